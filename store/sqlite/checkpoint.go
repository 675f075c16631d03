package sqlite

import (
	"time"
)

// WAL checkpoints. SQLite's automatic checkpoint runs inside the commit
// that crosses its threshold, so one request in every few hundred paid for
// copying the WAL back into the database (and, in FULL mode, its fsyncs).
// Here a goroutine with its own connection does it instead: PASSIVE
// checkpoints take no write lock, so writers keep appending meanwhile.

const (
	// ckEveryCommits asks for a checkpoint after this many commits; a
	// commit writes a handful of pages, so the WAL stays in the low MiBs.
	ckEveryCommits = 256
	// ckInterval checkpoints a quiet database too, so a burst's WAL does
	// not linger.
	ckInterval = time.Second
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
		if _, err := s.ck.Exec("PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
			s.log.Warn("sqlite: checkpoint failed", "err", err)
		}
	}
}
