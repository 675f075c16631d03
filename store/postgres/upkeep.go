package postgres

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// chore is a background task every node runs every so often. A failed run
// changes nothing that the next run cannot do.
type chore struct {
	what  string
	every time.Duration
	run   func(ctx context.Context) error
}

// upkeep runs the store's chores, each on its own ticker, until stopped.
type upkeep struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// chores are this store's: folding unread deltas (unread.go) and keeping
// the planner's statistics of young tables current (analyze.go).
func (s *Store) chores() []chore {
	return []chore{
		{"fold unread counts", foldEvery, func(ctx context.Context) error { _, err := s.foldUnread(ctx); return err }},
		{"analyze grown tables", analyzeEvery, func(ctx context.Context) error { _, err := s.analyzeGrown(ctx); return err }},
	}
}

func (s *Store) startUpkeep(chores []chore) *upkeep {
	ctx, cancel := context.WithCancel(context.Background())
	u := &upkeep{cancel: cancel}
	for _, c := range chores {
		u.wg.Go(func() {
			t := time.NewTicker(c.every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if err := c.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
					s.log.Warn("postgres: background chore failed; it runs again at its next tick",
						slog.String("chore", c.what), slog.Any("err", err))
				}
			}
		})
	}
	return u
}

// stop ends the chores and waits for a run in progress. Stopping twice is
// harmless.
func (u *upkeep) stop() {
	u.cancel()
	u.wg.Wait()
}
