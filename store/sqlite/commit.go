package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Group commit. Every write already queues for the one writer connection,
// and most of a small transaction's cost is the commit: writing each dirty
// page to the WAL. So the writer loop takes every write that queued while
// the previous commit ran and runs them in one transaction, each inside its
// own SAVEPOINT so that one failing write (a conflict, say) rolls back only
// itself. Callers still return only after their write is committed. A lone
// write pays nothing extra: it runs in a plain transaction of its own.

// Consecutive Apply writes in a group insert their records together,
// after the last of them and before the next write of another kind (or the
// commit): one statement per kind of row for the run rather than per write
// (bulk.go), where the statements' own overhead was a third of the
// writer's time. Apply's part inside its savepoint is only what can fail
// on its own (the idempotency key, a scheduled entry already consumed) and
// the body, none of which reads records; inserting records can fail only
// with the whole transaction, and then every write is run again alone.
// Any other write (a claim, a consumer's deletion that removes bodies no
// record refers to, …) runs only after the records before it are in, so
// a group is still exactly its writes one after the other, in queue order.

// maxBatch bounds a group so the first writer in it is not kept waiting
// behind an unbounded queue.
const maxBatch = 128

// errClosed is returned by writes issued after Close.
var errClosed = errors.New("sqlite: store is closed")

type writeReq struct {
	ctx  context.Context
	fn   func(tx *sql.Tx) error
	done chan error // buffered: the loop never blocks on a caller
	// defers: fn leaves its records in s.deferred (Apply); any other write
	// finds them inserted.
	defers bool
}

// write runs fn in a write transaction, possibly shared with other writes
// (see above), and returns once it is committed. fn may run more than once
// if its group has to be retried, so it must reset whatever it reports.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// writeDeferring is write for a fn that appends its records to s.deferred
// instead of inserting them.
func (s *Store) writeDeferring(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), defers: true})
}

func (s *Store) submit(ctx context.Context, req *writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.reqs <- req:
	case <-s.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once handed over the write may commit, so wait for the verdict even if
	// ctx ends: returning early would report a failure for a write that
	// happened. The wait is bounded by one batch and busy_timeout.
	return <-req.done
}

// writeLoop is the writer: the only goroutine that uses s.w for writes.
func (s *Store) writeLoop() {
	defer close(s.loopDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-s.quit:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.runBatch(batch)
		clear(batch) // drop references to finished closures
		select {
		case <-s.ckRestart:
			s.restartWAL()
		default:
		}
		if s.sinceCk++; s.sinceCk >= ckEveryCommits {
			s.sinceCk = 0
			select {
			case s.ckKick <- struct{}{}:
			default:
			}
		}
	}
}

// runBatch commits a group of writes and answers each of them.
func (s *Store) runBatch(batch []*writeReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	if len(live) == 1 {
		live[0].done <- s.runAlone(live[0])
		return
	}
	if len(live) == 0 {
		return
	}
	if s.onGroup != nil {
		s.onGroup(len(live))
	}
	errs, err := s.runGroup(live)
	if err == nil {
		for i, r := range live {
			r.done <- errs[i]
		}
		return
	}
	// The shared transaction was lost (a commit error, or a failed write
	// that took the whole transaction down with it). Nothing of it is
	// committed, so run each write again on its own.
	s.log.Debug("sqlite: group commit failed, retrying writes one by one", "writes", len(live), "err", err)
	for _, r := range live {
		r.done <- s.runAlone(r)
	}
}

// runAlone runs one write in its own transaction.
func (s *Store) runAlone(r *writeReq) error {
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := r.fn(tx); err != nil {
		s.dropDeferred(0)
		_ = tx.Rollback()
		return err
	}
	if err := s.insertDeferred(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// runGroup runs writes in one transaction, one savepoint each. errs holds
// each write's own outcome; err is set when the transaction itself failed,
// in which case nothing was committed.
func (s *Store) runGroup(live []*writeReq) (errs []error, err error) {
	defer s.dropDeferred(0)
	// Not a caller's context: one caller giving up must not roll back the
	// others' writes.
	bg := context.Background()
	tx, err := s.w.BeginTx(bg, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: begin: %w", err)
	}
	// Prepared once: parsing the three statements per write showed in the
	// writer's profile.
	sp, rb, rel := tx.StmtContext(bg, s.st.savepoint), tx.StmtContext(bg, s.st.rollbackTo), tx.StmtContext(bg, s.st.release)
	errs = make([]error, len(live))
	for i, r := range live {
		if !r.defers { // before the savepoint: r failing must not undo them
			if err := s.insertDeferred(tx); err != nil {
				_ = tx.Rollback()
				return nil, err
			}
		}
		if _, err := sp.ExecContext(bg); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		held := len(s.deferred)
		if errs[i] = r.fn(tx); errs[i] != nil {
			s.dropDeferred(held)
			if _, err := rb.ExecContext(bg); err != nil {
				_ = tx.Rollback()
				return nil, err
			}
		}
		if _, err := rel.ExecContext(bg); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
	}
	if err := s.insertDeferred(tx); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: commit: %w", err)
	}
	return errs, nil
}

// insertDeferred inserts the records the transaction's Apply writes left
// for the end, all at once.
func (s *Store) insertDeferred(tx *sql.Tx) error {
	if len(s.deferred) == 0 {
		return nil
	}
	defer s.dropDeferred(0)
	return s.txStmts(context.Background(), tx).insertRecords(context.Background(), s.deferred...)
}

// dropDeferred forgets the deferred record sets from index from on,
// releasing what they refer to.
func (s *Store) dropDeferred(from int) {
	clear(s.deferred[from:])
	s.deferred = s.deferred[:from]
}
