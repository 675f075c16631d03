package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Group commit. Every write already queues for the one writer connection,
// and most of a small transaction's cost is the commit: writing each dirty
// page to the WAL. So the writer loop takes every write that queued while
// the previous group ran and runs them in one transaction, each inside its
// own SAVEPOINT so that one failing write (a conflict, say) rolls back only
// itself.
//
// A group of sends, claims and state changes is answered once they are in
// the apply log (applylog.go); the transaction stays open for the next
// groups and commits when it is commitEvery old, before any other kind of
// write is answered (those are not in the log, so they must be committed),
// and whenever a reader needs to see it (settle). GetRecord needs no
// commit: the records those writes changed are kept in an overlay until
// the commit (overlay.go). Everything else is as before: answered after
// its group commits.
//
// A write may bring a second one that runs right after it in the same
// group, and only if it succeeded (then: a worker's ack and the claim of
// its next record, UpdateThenClaim). They are two writes, each with its
// savepoint and its entry in the log, so the log and its replay know
// nothing of the pairing; what the pair saves is the second trip through
// the writer's queue.
//
// Consecutive Apply writes in a group insert their records together,
// after the last of them and before the next write of another kind (or the
// end of the group): one statement per kind of row for the run rather than
// per write (bulk.go), where the statements' own overhead was a third of
// the writer's time. Apply's part inside its savepoint is only what can
// fail on its own (the idempotency key, a scheduled entry already consumed)
// and the body, none of which reads records; inserting records can fail
// only with the whole transaction, and then every write is run again
// alone. Any other write (a claim, a consumer's deletion that removes
// bodies no record refers to, …) runs only after the records before it
// are in, so a group is still exactly its writes one after the other, in
// queue order.
//
// A logged group is answered once the records of its last run are in,
// before the events and conversations that follow from them
// (insertRows): a sender's next request is read and planned while the
// writer finishes, which took 10-16% off a sequential fan-out's latency
// (docs/benchmarks.md, fifteenth round). Nothing reads those tables before
// the writer is done (their reads settle first, and settle waits for the
// writer), and none of those rows can fail for any given records: what can
// fail them (a full disk) can fail the commit after the answer too, and
// the same recovery covers both (TestAnsweredGroupSurvivesItsLastRows).
// That holds only while events and conversations accept any row
// a valid record implies: a constraint or trigger added to them that can
// reject one would turn that write, answered already, into a writer that
// stops (recover fails the same way) until a restart, which fails too.
// Such a check belongs in the write's own savepoint, before the answer.

const (
	// maxBatch bounds a group so the first writer in it is not kept
	// waiting behind an unbounded queue. It counts requests: with the
	// writes they bring (then), a group holds up to twice as many.
	maxBatch = 128
	// commitEvery bounds how long logged writes stay uncommitted: the
	// replay after a crash, and the dirty pages held in memory. A commit
	// writes every page the transaction dirtied, and the hash-keyed and
	// owner-keyed indexes put most sends' entries on pages other sends
	// dirty too, so a longer transaction writes each page once for more
	// sends: 20,000 sends over HTTP wrote 565 MB at 25 ms, 285 MB at
	// 250 ms, and took 12-21% less server CPU per send; mixed load at
	// 1,200 msgs/s had a median p99 of 10 ms against 30 ms over nine runs
	// each (claims stall behind 4 commits a second rather than 40). At 1 s
	// the commits themselves grew long enough to raise p99 again
	// (docs/benchmarks.md, eighth round).
	commitEvery = 250 * time.Millisecond
	// commitLogBytes commits early once the log holds this much (a burst
	// of big fan-outs).
	commitLogBytes = 16 << 20
)

// errClosed is returned by writes issued after Close.
var errClosed = errors.New("sqlite: store is closed")

type writeReq struct {
	ctx context.Context
	// fn runs the write in tx. Its ctx is the caller's without the
	// cancellation: interrupting a statement rolls back SQLite's whole
	// transaction, which holds other callers' writes.
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error // buffered: the loop never blocks on a caller
	// defers: fn leaves its records in s.deferred (Apply); any other write
	// finds them inserted.
	defers bool
	// logged is the apply-log entry of a write the log can carry exactly
	// (applylog.go); such a write is answered once logged. Nil for every
	// other write: answered once committed.
	logged *logEntry
	// ctl, when set, is not a write: the writer runs it between
	// transactions (Open's replay of the log).
	ctl func() error
	// then is a write that runs right after this one, in the same group,
	// if this one succeeds (UpdateThenClaim); its caller waits for both.
	then *writeReq
	// follows is set on a then: it runs only if the write before it did.
	follows bool
}

// errNotRun answers a then whose write before it failed.
var errNotRun = errors.New("sqlite: not run: the write before it failed")

// write runs fn in a write transaction, possibly shared with other writes
// (see above), and returns once it is committed. fn may run more than once
// if its group has to be retried, so it must reset whatever it reports.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)})
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
	due := time.NewTimer(time.Hour)
	due.Stop()
	busy := time.Now() // when the writer last finished something (gather)
	for {
		var dueC <-chan time.Time
		if len(s.pt.writes) > 0 {
			due.Reset(time.Until(s.pt.since.Add(s.linger)))
			dueC = due.C
		}
		var idle time.Duration
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
			idle = time.Since(busy)
		case done := <-s.barrier:
			// A failed commit that recover made good is no reason for the
			// reader to fail: everything answered is committed now.
			if s.commitPending() != nil {
				done <- s.failure()
			} else {
				done <- nil
			}
			busy = time.Now()
			continue
		case <-dueC:
			_ = s.commitPending()
			busy = time.Now()
			continue
		case <-s.quit:
			if !s.abandon.Load() {
				_ = s.commitPending()
			}
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
		batch = s.gather(batch, idle)
		s.runBatch(batch)
		clear(batch) // drop references to finished closures
		busy = time.Now()
		select {
		case <-s.ckRestart:
			if s.commitPending() == nil {
				s.restartWAL()
			}
		default:
		}
	}
}

// runBatch runs a group of writes and answers each of them.
func (s *Store) runBatch(batch []*writeReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctl != nil {
			r.done <- s.control(r.ctl)
			continue
		}
		err := r.ctx.Err()
		if err == nil {
			err = s.failure()
		}
		if err != nil {
			r.done <- err
			if r.then != nil {
				r.then.done <- errNotRun
			}
			continue
		}
		live = append(live, r)
		if r.then != nil {
			live = append(live, r.then)
		}
	}
	if len(live) == 0 {
		return
	}
	logged := s.applyLog != nil && !s.logOff
	for _, r := range live {
		logged = logged && r.logged != nil
	}
	if len(live) == 1 && !logged && s.pt.tx == nil {
		live[0].done <- s.runAlone(live[0])
		return
	}
	if len(live) > 1 && s.onGroup != nil {
		s.onGroup(len(live))
	}
	errs, rest, err := s.runGroup(live)
	if err != nil {
		s.retryAlone(live, err)
		return
	}
	if !logged || s.logGroup(live, errs) != nil {
		// Not in the log, so answer only once committed.
		if err := rest(); err != nil {
			s.retryAlone(live, err)
			return
		}
		if err := s.commitPending(); err != nil {
			s.retryAlone(live, err)
			return
		}
		answer(live, errs)
		return
	}
	// In the log, so answered now; the rows that follow from its records
	// are written while the callers read their answers and send their next
	// requests (a sender's next fan-out plans meanwhile). Should that
	// fail, the transaction is lost, and recover applies the logged writes
	// again, as after a failed commit.
	answer(live, errs)
	if err := rest(); err != nil {
		s.log.Warn("sqlite: a logged group's last rows failed; applying its writes again", "err", err)
		_ = s.recoverAfter(err)
		return
	}
	// The transaction stays open only while it holds logged writes (every
	// write of the group may have failed), and for at most commitEvery.
	if len(s.pt.writes) == 0 || time.Since(s.pt.since) >= s.linger || s.applyLog.size >= commitLogBytes {
		_ = s.commitPending()
	}
}

// control runs fn between transactions, on the writer goroutine.
func (s *Store) control(fn func() error) error {
	if err := s.commitPending(); err != nil {
		return err
	}
	return fn()
}

func answer(live []*writeReq, errs []error) {
	for i, r := range live {
		r.done <- errs[i]
	}
}

// retryAlone answers a group whose shared transaction was lost (a commit
// error, or a failed write that took the whole transaction down with it):
// nothing of it is committed, so once the logged writes answered earlier
// are back (recover), each write runs again on its own.
func (s *Store) retryAlone(live []*writeReq, cause error) {
	s.log.Debug("sqlite: group failed, retrying writes one by one", "writes", len(live), "err", cause)
	if err := s.recover(); err != nil {
		for _, r := range live {
			r.done <- err
		}
		return
	}
	var prev error
	for _, r := range live {
		if r.follows && prev != nil {
			prev = errNotRun
		} else {
			prev = s.runAlone(r)
		}
		r.done <- prev
	}
}

// runAlone runs one write in its own transaction, committed before it
// returns. The writer has no transaction open when it is called.
func (s *Store) runAlone(r *writeReq) error {
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := r.fn(context.WithoutCancel(r.ctx), tx); err != nil {
		s.dropDeferred(0)
		_ = tx.Rollback()
		return err
	}
	return s.commitTx(tx)
}

// commitTx commits a transaction of the writer's other than the shared one
// (runAlone, replay), with the records its Apply writes deferred and the
// log position.
func (s *Store) commitTx(tx *sql.Tx) error {
	if err := s.insertDeferred(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := s.recordPosition(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		s.rollbackConn()
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	s.seqs.commit(tx)
	s.committed()
	return nil
}

// begin opens the writer's transaction unless one is open.
func (s *Store) begin() error {
	if s.pt.tx != nil {
		return nil
	}
	// Not a caller's context: one caller giving up must not roll back the
	// others' writes.
	bg := context.Background()
	tx, err := s.w.BeginTx(bg, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	// Prepared once: parsing the three statements per write showed in the
	// writer's profile.
	s.pt.tx = tx
	s.pt.sp, s.pt.rb, s.pt.rel = tx.StmtContext(bg, s.st.savepoint), tx.StmtContext(bg, s.st.rollbackTo), tx.StmtContext(bg, s.st.release)
	return nil
}

// runGroup runs writes in the open transaction, one savepoint each. errs
// holds each write's own outcome; err is set when the transaction itself
// failed, in which case it is lost, with whatever it held. rest writes
// what follows from the last records inserted (insertRows) and must run
// before anything else in the transaction.
func (s *Store) runGroup(live []*writeReq) (errs []error, rest func() error, err error) {
	defer s.dropDeferred(0)
	if err := s.begin(); err != nil {
		return nil, nil, err
	}
	bg := context.Background()
	tx := s.pt.tx
	errs = make([]error, len(live))
	for i, r := range live {
		if r.follows && errs[i-1] != nil {
			errs[i] = errNotRun
			continue
		}
		if !r.defers { // before the savepoint: r failing must not undo them
			if err := s.insertDeferred(tx); err != nil {
				return nil, nil, err
			}
		}
		if _, err := s.pt.sp.ExecContext(bg); err != nil {
			return nil, nil, err
		}
		held := len(s.deferred)
		if errs[i] = r.fn(context.WithoutCancel(r.ctx), tx); errs[i] != nil {
			s.dropDeferred(held)
			s.seqs.forget()
			if _, err := s.pt.rb.ExecContext(bg); err != nil {
				return nil, nil, err
			}
		}
		if _, err := s.pt.rel.ExecContext(bg); err != nil {
			return nil, nil, err
		}
	}
	rest, err = s.insertDeferredRows(tx)
	if err != nil {
		return nil, nil, err
	}
	return errs, rest, nil
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

// insertDeferredRows is insertDeferred in insertRows' two steps; rest is
// never nil.
func (s *Store) insertDeferredRows(tx *sql.Tx) (rest func() error, err error) {
	rest = func() error { return nil }
	if len(s.deferred) == 0 {
		return rest, nil
	}
	defer s.dropDeferred(0)
	bg := context.Background()
	then, err := s.txStmts(bg, tx).insertRows(bg, s.deferred...)
	if err != nil || then == nil {
		return rest, err
	}
	return func() error { return then(bg) }, nil
}

// dropDeferred forgets the deferred record sets from index from on,
// releasing what they refer to.
func (s *Store) dropDeferred(from int) {
	clear(s.deferred[from:])
	s.deferred = s.deferred[:from]
}
