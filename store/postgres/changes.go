package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Group commit for claims and state changes.
//
// A claim and an ack were each a transaction of their own, so each waited
// for a WAL flush of its own: with eight workers claiming and acking,
// sampling pg_stat_activity found the backends waiting on LWLock:WALWrite
// or IO:WALSync in three samples of four, and the same run with
// synchronous_commit off (a measurement, not a mode) took twice the claims
// (docs/benchmarks.md, twentieth round). So Claim, Update and
// UpdateThenClaim queue for a change writer, as Apply does for its group
// writers (group.go): a call that finds the writer idle goes at once, in a
// transaction of its own; calls that arrive while it works go into its
// next transaction together, and one flush commits them all.
//
// A transaction is one round trip: BEGIN, a lock timeout, the updates in
// record id order, the claims, COMMIT. When it carries an ack with its next
// claim (UpdateThenClaim), those claims go in a second round trip with the
// COMMIT, each only if its update matched. Each statement sees those before
// it, as it would have seen them committed: a record claimed earlier in the
// group is no longer in From, and one an update made claimable may be
// taken.
//
// Claims never wait for a row (SKIP LOCKED), but updates do, and a change
// also updates its conversation's row, which other transactions lock in
// their own orders: a group can wait behind another writer, or deadlock
// with one. A lone call used to hold up only its caller there; a group
// holds up every call of the node. So a group waits for a lock at most
// groupLockTimeout, and then, as after any failed statement, nothing of it
// is written (PostgreSQL skips the rest of the batch, COMMIT included) and
// every call runs alone on its caller's goroutine, as it would have without
// the writer, waiting as long as its own context allows. If the connection
// breaks when the COMMIT may have run, the outcome is unknown, as for any
// write whose answer is lost, and every call of the group gets that error.

// groupLockTimeout bounds a change group's wait for a row lock: well above
// the few milliseconds another transaction holds one (a commit's flush),
// well below deadlock_timeout (1 s), so that a deadlock ends here first.
const groupLockTimeout = "100ms"

// changeReq is one call waiting for the change writer.
type changeReq struct {
	ctx   context.Context
	upd   *store.Update      // Update and UpdateThenClaim
	claim *store.ClaimParams // Claim and UpdateThenClaim
	// The call's outcome, unless grouped: the updated record (or the
	// claimed one, for Claim), the claim after an update, the error.
	rec     model.Record
	claimed store.Claimed
	err     error
	// grouped: a committed group ran the call, and these are its
	// statements' own results (pgx.ErrNoRows: matched nothing), which the
	// caller turns into the outcome (finish). next is the claim's.
	// alone: nothing of the group was committed, and the caller makes the
	// call on its own.
	grouped, alone  bool
	updRec, next    model.Record
	updErr, nextErr error
	done            chan struct{}
}

// changer is the change writer.
type changer struct {
	s    *Store
	reqs chan *changeReq
	quit chan struct{}
	wg   sync.WaitGroup
	// groups and grouped count the groups committed and the calls in them;
	// handing counts the calls on their way to the writer.
	groups, grouped, handing atomic.Int64
	// before, if set (tests), runs before each batch with its size.
	before func(n int)
}

func newChanger(s *Store, writers int) *changer {
	c := &changer{s: s, reqs: make(chan *changeReq), quit: make(chan struct{})}
	for range writers {
		c.wg.Add(1)
		go c.loop()
	}
	return c
}

func (c *changer) close() {
	close(c.quit)
	c.wg.Wait()
}

// do hands r to the writer and waits for its outcome, then finishes it.
func (c *changer) do(ctx context.Context, r *changeReq) {
	r.ctx, r.done = ctx, make(chan struct{})
	c.handing.Add(1)
	var err error
	select {
	case c.reqs <- r:
	case <-c.quit:
		err = errors.New("postgres: store is closed")
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.handing.Add(-1)
	if err != nil {
		r.err = err
		return
	}
	// Once handed over the call may commit: wait for the verdict even if
	// ctx ends, or a change that happened would be reported as failed.
	<-r.done
	if r.alone {
		c.s.runAlone(r)
		return
	}
	c.s.finish(r)
}

func (c *changer) loop() {
	defer c.wg.Done()
	batch := make([]*changeReq, 0, maxGroup)
	for {
		select {
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		case <-c.quit:
			return
		}
	drain:
		for len(batch) < maxGroup {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if c.before != nil {
			c.before(len(batch))
		}
		c.run(batch)
		clear(batch)
	}
}

// run carries out a batch and answers every call in it.
func (c *changer) run(batch []*changeReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.err = r.ctx.Err(); r.err != nil {
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	switch c.s.runGroup(live) {
	case groupCommitted:
		if len(live) > 1 {
			c.groups.Add(1)
			c.grouped.Add(int64(len(live)))
		}
	case groupFailed:
		for _, r := range live {
			r.alone = true
		}
	}
	for _, r := range live {
		close(r.done)
	}
}

// runAlone makes r's call on its own, as without the change writer.
func (s *Store) runAlone(r *changeReq) {
	switch {
	case r.upd != nil && r.claim != nil:
		r.rec, r.claimed, r.err = s.updateThenClaimAlone(r.ctx, r.upd, r.claim)
	case r.upd != nil:
		r.rec, r.err = s.updateAlone(r.ctx, r.upd)
	default:
		r.rec, r.err = s.claimAlone(r.ctx, r.claim)
	}
}

// finish turns a grouped call's statement results into its outcome, on
// the caller's goroutine: a conflict's reason is read back (updateMiss),
// and that read should not hold up the writer.
func (s *Store) finish(r *changeReq) {
	if !r.grouped {
		return
	}
	if r.upd == nil {
		r.rec, r.err = claimed(r.next, r.nextErr)
		return
	}
	r.rec, r.err = s.updated(r.ctx, r.upd, r.updRec, r.updErr)
	if r.err == nil && r.claim != nil {
		r.claimed.Record, r.claimed.Err = claimed(r.next, r.nextErr)
	}
}

// errRolledBack is a group whose COMMIT answered ROLLBACK.
var errRolledBack = errors.New("postgres: group transaction rolled back")

// groupOutcome is what became of a group's transaction.
type groupOutcome int

const (
	groupFailed    groupOutcome = iota // nothing committed: each call runs alone
	groupCommitted                     // each call has its statements' results
	groupUnknown                       // the COMMIT went unanswered: each call has the error
)

// runGroup runs reqs in one transaction and records each statement's
// result in its call.
func (s *Store) runGroup(reqs []*changeReq) groupOutcome {
	// Not a caller's context: one caller giving up must not roll back the
	// others' changes.
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return groupFailed
	}
	defer conn.Release()

	var upds, claims, nexts []*changeReq
	for _, r := range reqs {
		if r.upd != nil {
			upds = append(upds, r)
		} else {
			claims = append(claims, r)
		}
	}
	slices.SortStableFunc(upds, func(a, b *changeReq) int { return cmp.Compare(a.upd.RecordID, b.upd.RecordID) })
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL lock_timeout = '" + groupLockTimeout + "'")
	var outs []stmtOut
	for _, r := range upds {
		b.Queue(sqlUpdate, updateArgs(r.upd)...)
		outs = append(outs, stmtOut{&r.updRec, &r.updErr})
		if r.claim != nil {
			nexts = append(nexts, r)
		}
	}
	for _, r := range claims {
		b.Queue(sqlClaim, claimArgs(r.claim)...)
		outs = append(outs, stmtOut{&r.next, &r.nextErr})
	}
	commit := len(nexts) == 0
	committed, err := sendRound(ctx, conn, b, 2, outs, commit)
	if err == nil && !commit {
		b, outs = &pgx.Batch{}, outs[:0]
		for _, r := range nexts {
			if r.updErr == nil {
				b.Queue(sqlClaim, claimArgs(r.claim)...)
				outs = append(outs, stmtOut{&r.next, &r.nextErr})
			}
		}
		commit = true
		committed, err = sendRound(ctx, conn, b, 0, outs, commit)
	}
	switch {
	case committed:
		if err != nil {
			// The COMMIT's answer was read; what broke came after it.
			s.log.Debug("postgres: change group committed, then its connection failed", "err", err)
		}
		for _, r := range reqs {
			r.grouped = true
		}
		return groupCommitted
	case commit && !refused(err):
		for _, r := range reqs {
			r.err = fail("change records", err)
		}
		return groupUnknown
	}
	// Nothing is committed. End the transaction, so that the pool keeps
	// the connection instead of closing it for being in one; a broken
	// connection fails here too, and the pool drops it.
	rctx, cancel := context.WithTimeout(ctx, rollbackWithin)
	defer cancel()
	if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
		s.log.Debug("postgres: rollback of a failed change group", "err", rerr)
	}
	s.log.Debug("postgres: change group failed; its calls run alone", "calls", len(reqs), "err", err)
	return groupFailed
}

// refused reports whether err is the server's refusal of a statement (or
// of the COMMIT), after which nothing of the transaction is committed. A
// FATAL error ends the session, possibly after its COMMIT ran.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, errRolledBack) || errors.As(err, &pe) && pe.Severity == "ERROR"
}

// stmtOut is where a statement's returned record and error go.
type stmtOut struct {
	rec *model.Record
	err *error
}

// sendRound sends b: first skip statements that return nothing (BEGIN,
// SET), then one statement per out, each returning a record or none
// (pgx.ErrNoRows), then COMMIT when commit. A statement the server refused
// ends the round: the server skips the rest. Any other error of a
// statement (a record that does not decode) stays that statement's, and
// the round goes on. committed reports that the COMMIT's answer was read.
func sendRound(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, skip int, outs []stmtOut, commit bool) (committed bool, err error) {
	if commit {
		b.Queue("COMMIT")
	}
	br := conn.SendBatch(ctx, b)
	err = func() error {
		for range skip {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		for _, o := range outs {
			*o.rec, *o.err = scanRecord(br.QueryRow())
			var pe *pgconn.PgError
			if errors.As(*o.err, &pe) {
				return *o.err
			}
		}
		if commit {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			if tag.String() != "COMMIT" {
				return errRolledBack
			}
			committed = true
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return committed, err
}

// Claim takes the first visible record in From of one box.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	r := &changeReq{claim: &p}
	s.changes.do(ctx, r)
	return r.rec, r.err
}

// Update is a compare-and-set on one record's state (and lease).
func (s *Store) Update(ctx context.Context, u *store.Update) (model.Record, error) {
	r := &changeReq{upd: u}
	s.changes.do(ctx, r)
	return r.rec, r.err
}

// UpdateThenClaim is a worker's ack and the claim of its next record in
// one transaction, shared with other calls (above; updateclaim.go makes it
// alone).
func (s *Store) UpdateThenClaim(ctx context.Context, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed, error) {
	r := &changeReq{upd: u, claim: &p}
	s.changes.do(ctx, r)
	return r.rec, r.claimed, r.err
}
