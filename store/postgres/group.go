package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Group commit for Apply. Sends into one box serialize on its counter row
// (lockBoxes), which a transaction holds until its commit is flushed: with
// eight producers writing into one INBOX, sampling pg_stat_activity showed
// most sessions waiting on that row lock behind a holder in WALSync, and
// throughput was one flush per send. So plans that queue while a group
// transaction runs go into the next one together: every box of every plan
// is locked first, in sorted order (so groups, lone plans and other nodes
// cannot deadlock on them), then each plan runs inside its own SAVEPOINT,
// so one plan's failure (an idempotency conflict, say) rolls back only
// itself, and one commit flushes them all.

// groupWriters is how many group transactions a node runs at once: one per
// four connections of the pool (pgxpool's default is max(4, CPUs); set it
// with pool_max_conns in the URL). Several writers let sends into different
// boxes commit in parallel on a PostgreSQL with cores to spare; sends into
// one box still serialize on its lock, each group carrying several. On the
// 2-core test machine two writers were no faster than one (docs/benchmarks.md),
// and each writer holds a connection while it works, which the reads and
// claims of the node also need.
func groupWriters(maxConns int32) int { return max(1, int(maxConns)/4) }

// maxGroup bounds a group so that its first plan is not kept waiting
// behind an unbounded queue, and keeps its savepoints within the
// subtransactions PostgreSQL caches per backend (64).
const maxGroup = 32

type applyReq struct {
	ctx  context.Context
	plan *store.Plan
	res  *store.ApplyResult
	err  error
	done chan struct{}
}

type grouper struct {
	s    *Store
	reqs chan *applyReq
	quit chan struct{}
	wg   sync.WaitGroup
}

func newGrouper(s *Store, writers int) *grouper {
	g := &grouper{s: s, reqs: make(chan *applyReq), quit: make(chan struct{})}
	for range writers {
		g.wg.Add(1)
		go g.loop()
	}
	return g
}

func (g *grouper) close() {
	close(g.quit)
	g.wg.Wait()
}

// apply hands p to a group writer and waits for its own outcome.
func (g *grouper) apply(ctx context.Context, p *store.Plan) (*store.ApplyResult, error) {
	r := &applyReq{ctx: ctx, plan: p, done: make(chan struct{})}
	select {
	case g.reqs <- r:
	case <-g.quit:
		return nil, errors.New("postgres: store is closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Once handed over the plan may commit: wait for the verdict even if
	// ctx ends, or a write that happened would be reported as failed.
	<-r.done
	return r.res, r.err
}

func (g *grouper) loop() {
	defer g.wg.Done()
	batch := make([]*applyReq, 0, maxGroup)
	for {
		select {
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		case <-g.quit:
			return
		}
	drain:
		for len(batch) < maxGroup {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		g.run(batch)
		clear(batch)
	}
}

// run writes a batch and answers every request in it.
func (g *grouper) run(batch []*applyReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.err = r.ctx.Err(); r.err != nil {
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	// Queued once: a plan's queued statements are copied afresh into
	// every batch that carries it (queueInto), so both ways can use them.
	queued, live := g.s.queueAll(live)
	if g.s.applyAtOnce(live, queued) {
		for _, r := range live {
			close(r.done)
		}
		return
	}
	if len(live) > 1 {
		err := g.s.applyGroup(live, queued)
		if err == nil {
			for _, r := range live {
				close(r.done)
			}
			return
		}
		g.s.log.Debug("postgres: group commit failed, writing its plans one by one", "plans", len(live), "err", err)
	}
	for _, r := range live {
		r.res, r.err = g.s.applyAlone(r.ctx, r.plan)
		close(r.done)
	}
}

// queueAll queues the statements of each request's plan; a request whose
// plan cannot be queued gets its error and is left out of live.
func (s *Store) queueAll(reqs []*applyReq) (queued []*queuedPlan, live []*applyReq) {
	for _, r := range reqs {
		q, err := s.queuePlan(r.plan)
		if err != nil {
			r.err = err
			close(r.done)
			continue
		}
		queued, live = append(queued, q), append(live, r)
	}
	return queued, live
}

// applyAtOnce writes plans in a single round trip when none of them can
// fail but by a statement the server rejects: with no idempotency key to
// check against another message and no scheduled entry to consume, which
// is what nearly every send is. BEGIN, the box locks, every plan and
// COMMIT go in one batch. A rejected statement aborts the transaction and
// the server skips the rest of the batch, COMMIT included, so on any error
// nothing was written (or, if the connection broke during the COMMIT, it
// may have been, which the plans' idempotent records absorb as for any
// write retried after a lost answer): applyAtOnce rolls back and returns
// false, and the caller writes the plans the careful way, with savepoints
// (applyGroup) or alone. It sets each request's result only on success.
func (s *Store) applyAtOnce(reqs []*applyReq, queued []*queuedPlan) bool {
	if len(reqs) == 0 {
		return false
	}
	var all []model.Record
	for i, r := range reqs {
		if r.plan.Idem != nil || r.plan.ConsumeSchedule != 0 || r.plan.ConsumeMail != nil {
			return false
		}
		all = append(all, queued[i].recs...)
	}
	ctx := context.Background() // as in applyGroup
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	locks := lockBoxes(b, all)
	for _, q := range queued {
		q.queueInto(b)
	}
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	res := make([]*store.ApplyResult, len(reqs))
	ok := func() bool {
		if _, err := br.Exec(); err != nil {
			return false
		}
		if readLocks(br, locks) != nil {
			return false
		}
		for i, q := range queued {
			if res[i], _, err = q.read(br); err != nil {
				return false
			}
		}
		tag, err := br.Exec()
		return err == nil && tag.String() == "COMMIT"
	}()
	closeErr := br.Close()
	if !ok {
		// The transaction is aborted (or never began); end it, so that
		// the pool keeps the connection instead of closing it for being
		// in a transaction. A broken connection fails here too, and the
		// pool drops it.
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			s.log.Debug("postgres: rollback after a failed one-trip group", "err", err)
		}
		return false
	}
	if closeErr != nil {
		// The COMMIT's answer was read, so what Close reports (a FATAL
		// error as the session ends) came after it: the plans are in, and
		// writing them again would report their records as existing.
		s.log.Debug("postgres: one-trip group committed, then its connection failed", "err", closeErr)
	}
	for i, r := range reqs {
		r.res, r.err = res[i], nil
	}
	return true
}

// applyGroup writes plans in one transaction, setting each request's own
// outcome. An error means the transaction as a whole failed and nothing of
// it was committed.
//
// The plans travel together: the group's box locks and every plan, each
// behind a SAVEPOINT of its own, go in one batch, so a group costs the
// same few round trips however many plans it carries. (One round trip per
// plan, with the box locks held throughout, was what bounded sends into
// one box.)
func (s *Store) applyGroup(live []*applyReq, queued []*queuedPlan) error {
	// Not a caller's context: one caller giving up must not roll back the
	// others' plans.
	ctx := context.Background()
	var all []model.Record
	for _, q := range queued {
		all = append(all, q.recs...)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		locks := lockBoxes(b, all)
		for first := 0; first < len(live); {
			n, err := runPlans(ctx, tx, b, locks, live[first:], queued[first:], first)
			if err != nil {
				return err
			}
			first += n
			b, locks = &pgx.Batch{}, 0
		}
		return nil
	})
}

// runPlans sends b (whatever it holds: the group's box locks the first
// time) followed by every plan of reqs, each in its own savepoint, in one
// round trip, and reads their outcomes in order. It returns how many plans
// it settled: all of them, or those up to and including the first that
// failed, which it rolled back to its savepoint. The plans after that one
// either ran in an aborted transaction or were undone with it, so the
// caller sends them again. An error is one the whole transaction cannot
// survive.
//
// Each savepoint is named after its plan's place in the group (first is
// that of reqs[0]), so a ROLLBACK TO names the failed plan's own. A name
// is reused only when its plan is sent again, and by then the rollback
// has released the savepoint of that name, so the names stay a group's
// few (each is a statement pgx prepares).
func runPlans(ctx context.Context, tx pgx.Tx, b *pgx.Batch, locks int, reqs []*applyReq, queued []*queuedPlan, first int) (int, error) {
	names := make([]string, len(reqs))
	for i, q := range queued {
		reqs[i].res, reqs[i].err = nil, nil // a plan sent again
		names[i] = fmt.Sprintf("plan%d", first+i)
		b.Queue("SAVEPOINT " + names[i])
		q.queueInto(b)
	}
	br := tx.SendBatch(ctx, b)
	if err := readLocks(br, locks); err != nil {
		br.Close()
		return 0, err
	}
	failed := len(reqs)
	idemNew := make([]bool, len(reqs))
	for i, q := range queued {
		var err error
		if _, err = br.Exec(); err != nil {
			err = fail("savepoint", err)
		} else {
			reqs[i].res, idemNew[i], err = q.read(br)
		}
		if err != nil {
			if retryable(err) {
				br.Close()
				return 0, err // a deadlock took the whole transaction
			}
			reqs[i].res, reqs[i].err, failed = nil, err, i
			break
		}
	}
	// Once a plan failed, whatever Close reports (that failure again, or
	// an error of a later plan, which ran after a failure that did not
	// abort the transaction) is undone by the rollback to the failed
	// plan's savepoint; if the connection itself broke, that rollback
	// fails and so does the group. Otherwise it is the batch's own error.
	if err := br.Close(); err != nil && failed == len(reqs) {
		return 0, fail("apply", err)
	}
	settled := len(reqs)
	if failed < len(reqs) {
		if err := rollbackTo(ctx, tx, names[failed]); err != nil {
			return 0, err
		}
		settled = failed + 1
	}
	// An idempotency key that existed must be bound to the plan's own
	// message; checked after the batch, as applyAlone does.
	for i := range settled {
		if idemNew[i] || reqs[i].err != nil {
			continue
		}
		err := checkPlanIdem(ctx, tx, reqs[i].plan)
		if err == nil {
			continue
		}
		var me *model.Error
		if !errors.As(err, &me) {
			return 0, err
		}
		if err := rollbackTo(ctx, tx, names[i]); err != nil {
			return 0, err
		}
		reqs[i].res, reqs[i].err = nil, err
		return i + 1, nil
	}
	return settled, nil
}

// rollbackTo undoes what the transaction did since the savepoint name.
func rollbackTo(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+name); err != nil {
		return fail("rollback to savepoint", err)
	}
	return nil
}
