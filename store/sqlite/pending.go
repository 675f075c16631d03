package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

// The writer's open transaction (commit.go): the logged writes it holds,
// the log entries they were answered from, their commit, and getting them
// back when the transaction is lost. Readers wait for it through settle.

// logEntry is a write's entry, encoded by its caller.
type logEntry struct {
	payload []byte
	// changed is what the write left the records it changed as, once it
	// has run: the overlay answers them until the commit.
	changed func() []model.Record
	// visible is each changed record's visible_at_ms (nil: the write does
	// not change it).
	visible func(*model.Record) int64
	// msgID and body: the message body the write stores (Apply), which
	// the overlay also answers until the commit.
	msgID string
	body  []byte
}

// pendingWrite is a logged write no commit covers yet. It keeps the bytes
// that were logged, not the caller's parameters (which the caller may
// reuse): recovering from a lost transaction decodes them, as a replay
// after a crash does.
type pendingWrite struct {
	seq     uint64
	payload []byte
}

// pendingTx is the writer's open transaction: writes that are answered or
// about to be, not yet committed. Writer goroutine only.
type pendingTx struct {
	tx           *sql.Tx
	sp, rb, rel  *sql.Stmt      // SAVEPOINT / ROLLBACK TO / RELEASE, bound to tx
	since        time.Time      // when the first logged write was answered
	writes       []pendingWrite // logged and answered, in log order
	lastSeq      uint64         // the last log sequence number handed out
	committedSeq uint64         // the last one a commit covers (in the database)
}

// settle makes every write answered so far visible to the read pool: if
// some are not committed yet, the writer commits them now. Every read of
// what logged writes change calls it first, so a read never misses a write
// that was acknowledged (reads of the contact tables need not: sqlite.go).
func (s *Store) settle(ctx context.Context) error {
	if err := s.failure(); err != nil {
		return err
	}
	if !s.uncommitted.Load() {
		return nil
	}
	done := make(chan error, 1)
	select {
	case s.barrier <- done:
	case <-s.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-done
}

// failure is the error that stopped the writer, if any: the shared
// transaction was lost and the logged writes it held could not be applied
// again. Reads and writes fail from then on rather than serve a state
// without writes that were acknowledged; a restart replays them.
func (s *Store) failure() error {
	if p := s.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// recordPosition writes, in tx, the last log sequence number handed out,
// if no commit has recorded it yet: every entry up to it is then covered,
// including what a failed append may have left in the file.
func (s *Store) recordPosition(tx *sql.Tx) error {
	if s.pt.lastSeq <= s.pt.committedSeq {
		return nil
	}
	if _, err := tx.Exec(`UPDATE apply_log SET applied = ?`, s.pt.lastSeq); err != nil {
		return fmt.Errorf("sqlite: record apply log position: %w", err)
	}
	return nil
}

// committed notes a commit: the log position it recorded, the emptied log,
// and a count for the checkpointer.
func (s *Store) committed() {
	if s.pt.lastSeq > s.pt.committedSeq {
		s.pt.committedSeq = s.pt.lastSeq
	}
	if s.applyLog != nil {
		if err := s.applyLog.reset(); err != nil {
			// Harmless for correctness (replay skips what the database
			// says is applied), but the file keeps growing.
			s.log.Warn("sqlite: apply log not emptied", "err", err)
		}
	}
	if s.sinceCk++; int64(s.sinceCk) >= s.ckEvery.Load() {
		s.sinceCk = 0
		select {
		case s.ckKick <- struct{}{}:
		default:
		}
	}
}

// logGroup appends the entries of the group's successful writes to the log
// in one write. After it the writes are acknowledged, committed or not. If
// the append fails the sequence numbers are used up all the same: the
// caller commits the writes instead, and that commit's position covers
// whatever of the failed append is left in the file.
func (s *Store) logGroup(live []*writeReq, errs []error) error {
	var seqs []uint64
	var payloads [][]byte
	seq := s.pt.lastSeq
	for i, r := range live {
		if errs[i] == nil {
			seq++
			seqs = append(seqs, seq)
			payloads = append(payloads, r.logged.payload)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	s.pt.lastSeq = seq
	if err := s.applyLog.append(seqs, payloads); err != nil {
		if errors.Is(err, errLogStuck) {
			// What is in the file can no longer be trusted to end where
			// the next entry begins: write on without the log.
			s.logOff = true
			s.log.Error("sqlite: apply log unusable; every write now commits before it is answered (restart to use it again)", "err", err)
		} else {
			s.log.Warn("sqlite: apply log write failed; committing instead", "err", err)
		}
		return err
	}
	if len(s.pt.writes) == 0 {
		s.pt.since = time.Now()
	}
	for i, r := range live {
		if errs[i] == nil {
			s.pt.writes = append(s.pt.writes, pendingWrite{seq: seqs[0], payload: r.logged.payload})
			seqs = seqs[1:]
			s.overlay.put(r.logged.changed(), r.logged.visible)
			if len(r.logged.body) > 0 {
				s.overlay.putBody(r.logged.msgID, r.logged.body)
			}
		}
	}
	s.uncommitted.Store(true)
	return nil
}

// commitPending commits the open transaction, if any, recording the last
// logged plan it covers, then empties the log. A failed commit loses the
// transaction; recover brings its logged writes back.
func (s *Store) commitPending() error {
	if s.pt.tx == nil {
		// Without a transaction no answered write is pending, so whatever
		// the log holds past the last commit was never acknowledged: a
		// failed append that an earlier coverLog could not cover either
		// (replay hands out no sequence number it fails to commit).
		return s.coverLog()
	}
	tx := s.pt.tx
	s.pt.tx = nil
	if err := s.recordPosition(tx); err != nil {
		_ = tx.Rollback()
		return s.recoverAfter(err)
	}
	if err := tx.Commit(); err != nil {
		s.rollbackConn()
		return s.recoverAfter(fmt.Errorf("sqlite: commit: %w", err))
	}
	s.seqs.commit(tx)
	clear(s.pt.writes)
	s.pt.writes = s.pt.writes[:0]
	s.uncommitted.Store(false)
	s.overlay.reset()
	s.committed()
	return nil
}

// recoverAfter is commitPending's failure path: it reports cause unless
// recover could not restore the acknowledged writes.
func (s *Store) recoverAfter(cause error) error {
	if err := s.recover(); err != nil {
		return err
	}
	return cause
}

// coverLog commits the log position alone when entries beyond the last
// commit are left that no answered write holds: a failed append that could
// not be cut back, of writes the caller is about to run again or report
// failed. A restart must not replay them; should the writes succeed alone,
// their commit records the position as well. If the commit fails too the
// writes are reported failed, and the next commit covers the entries (a
// commitPending with nothing open does, so Close does too). A stopped
// writer covers nothing: its answered writes were not applied, and a
// restart must replay them.
func (s *Store) coverLog() error {
	if err := s.failure(); err != nil {
		return err
	}
	if s.pt.lastSeq <= s.pt.committedSeq {
		return nil
	}
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := s.commitTx(tx); err != nil { // nothing deferred: recover dropped it
		return fmt.Errorf("sqlite: record the apply log position: %w", err)
	}
	return nil
}

// rollbackConn ends a transaction a failed COMMIT may have left open on the
// writer connection (database/sql forgets the Tx either way).
func (s *Store) rollbackConn() {
	_, _ = s.w.Exec("ROLLBACK")
}

// recover rolls back the open transaction and applies the logged writes it
// held again, in log order, committing them: the state every caller was
// answered on (which the overlay keeps answering meanwhile). If that fails
// the store stops (failure) until a restart replays the log. With nothing
// answered to apply again, it still covers what a failed append left in
// the log (coverLog).
func (s *Store) recover() error {
	if s.pt.tx != nil {
		_ = s.pt.tx.Rollback()
		s.pt.tx = nil
	}
	s.dropDeferred(0)
	if len(s.pt.writes) == 0 {
		s.uncommitted.Store(false)
		return s.coverLog()
	}
	pending := s.pt.writes
	s.pt.writes = nil
	writes := make([]*loggedWrite, len(pending))
	var err error
	for i, p := range pending {
		var w loggedWrite
		if w, err = decodeWrite(p.seq, p.payload); err != nil {
			break
		}
		writes[i] = &w
	}
	if err == nil {
		err = s.replay(writes, s.pt.lastSeq)
	}
	if err != nil {
		err = fmt.Errorf("sqlite: acknowledged writes could not be applied again after a failed transaction (restart to replay the apply log): %w", err)
		s.log.Error("sqlite: writer stopped", "err", err)
		s.broken.Store(&err)
		return err
	}
	s.uncommitted.Store(false)
	s.overlay.reset()
	return nil
}
