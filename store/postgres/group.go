package postgres

import (
	"context"
	"errors"
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

// groupSavepoint is the savepoint each plan of a group opens (applyTx).
const groupSavepoint = "plan"

// maxGroup bounds a group so that its first plan is not kept waiting
// behind an unbounded queue.
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
	if len(live) > 1 {
		err := g.s.applyGroup(live)
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

// applyGroup writes plans in one transaction, setting each request's own
// outcome. An error means the transaction as a whole failed and nothing of
// it was committed.
func (s *Store) applyGroup(reqs []*applyReq) error {
	// Not a caller's context: one caller giving up must not roll back the
	// others' plans.
	ctx := context.Background()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var all []model.Record
		for _, r := range reqs {
			all = append(all, r.plan.Records...)
		}
		b := &pgx.Batch{}
		lockBoxes(b, all)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fail("lock boxes", err)
		}
		// Each plan opens a savepoint in its own batch and none is released:
		// a later SAVEPOINT of the same name hides the earlier one, and
		// ROLLBACK TO finds the latest, so a plan costs one round trip.
		// maxGroup keeps the nesting within the subtransactions PostgreSQL
		// caches per backend (64).
		for _, r := range reqs {
			r.res, r.err = s.applyTx(ctx, tx, r.plan, true)
			if r.err == nil {
				continue
			}
			if retryable(r.err) {
				return r.err // a deadlock took the whole transaction
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+groupSavepoint); err != nil {
				return fail("rollback to savepoint", err)
			}
			r.res = nil
		}
		return nil
	})
}
