package sqlite

import (
	"strconv"
	"time"
)

// Under continuous writes a PASSIVE checkpoint never catches up with the
// end of the WAL: new frames arrive while it copies. SQLite rewinds the WAL
// to its start only after a checkpoint that copied everything, so the file
// would grow without bound (measured: 6 GiB after 100,000 dispatches).
// When a PASSIVE pass leaves more than ckRestartFrames behind it, the
// checkpointer asks the writer to run a RESTART checkpoint between two
// groups: no write is in flight then, the PASSIVE pass has already copied
// almost everything, so the pause is short, and the next commit starts the
// WAL over (journal_size_limit then trims the file).

// WAL checkpoints. SQLite's automatic checkpoint runs inside the commit
// that crosses its threshold, so one request in every few hundred paid for
// copying the WAL back into the database (and, in FULL mode, its fsyncs).
// Here a goroutine with its own connection does it instead: PASSIVE
// checkpoints take no write lock, so writers keep appending meanwhile.

const (
	// ckEveryCommits asks for a checkpoint after this many commits; a
	// commit writes a handful of pages, so the WAL stays in the low MiBs.
	ckEveryCommits = 256
	// ckMinCommits is the fewest commits between two kicks, however large
	// the commits (nextCkEvery); ckFirstCommits make the first kick, before
	// a pass has seen how large they are.
	ckMinCommits   = 8
	ckFirstCommits = 32
	// ckInterval checkpoints a quiet database too, so a burst's WAL does
	// not linger.
	ckInterval = time.Second
	// ckRestartFrames is the WAL length (in pages; 16 MiB at 4 KiB) past
	// which the WAL is restarted.
	ckRestartFrames = 4096
	// restartWaitMS bounds the writer's wait for readers during a restart.
	restartWaitMS = "100"
)

func (s *Store) checkpointLoop() {
	defer close(s.ckDone)
	t := time.NewTicker(ckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-s.ckKick:
		case <-t.C:
		}
		var busy, logFrames, copied int
		if err := s.ck.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied); err != nil {
			s.log.Warn("sqlite: checkpoint failed", "err", err)
			continue
		}
		s.ckEvery.Store(nextCkEvery(s.ckEvery.Load(), logFrames))
		if logFrames >= ckRestartFrames {
			select {
			case s.ckRestart <- struct{}{}:
			default:
			}
		}
	}
}

// nextCkEvery adapts the commits between two checkpoints to the commits'
// size. A group commit of many large bodies writes hundreds of pages, and
// 256 of them took the WAL to 55–75 MiB before a pass could ask for a
// restart, past journal_size_limit (TestWALStaysBoundedUnderContinuousWrites,
// which under a loaded machine crossed its bound). So the first kick comes
// after ckFirstCommits; while passes find the WAL at more than twice
// ckRestartFrames, kicks come twice as often, and they go back towards
// ckEveryCommits once passes find it under half.
func nextCkEvery(cur int64, logFrames int) int64 {
	switch {
	case logFrames > 2*ckRestartFrames:
		return max(cur/2, ckMinCommits)
	case logFrames < ckRestartFrames/2:
		return min(cur*2, ckEveryCommits)
	}
	return cur
}

// restartWAL runs on the writer goroutine, between groups. A RESTART
// waits for readers still on the old WAL; it may wait only briefly (reads
// are short), so writes never stall behind it: if readers do not let go in
// time, it gives up and the next checkpoint asks again.
func (s *Store) restartWAL() {
	if _, err := s.w.Exec("PRAGMA busy_timeout=" + restartWaitMS); err != nil {
		s.log.Warn("sqlite: WAL restart failed", "err", err)
		return
	}
	defer func() {
		if _, err := s.w.Exec("PRAGMA busy_timeout=" + strconv.Itoa(busyTimeoutMS)); err != nil {
			s.log.Error("sqlite: restore busy_timeout", "err", err)
		}
	}()
	var busy, logFrames, copied int
	if err := s.w.QueryRow("PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &logFrames, &copied); err != nil {
		s.log.Warn("sqlite: WAL restart failed", "err", err)
		return
	}
	if busy != 0 {
		s.log.Debug("sqlite: WAL restart blocked by a reader; retried at the next checkpoint", "frames", logFrames)
	}
}
