package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

// wakeGate lets the claimers of one box that a change woke look and claim
// one at a time. Every change to a box wakes all of its waiting claimers;
// a new record is one thing to take, and when each of them asked Claimable
// and then queued a claim write, all but one of those writes found nothing
// and still took their turn at the store's writer (in msgload's mixed mode
// with eight consumers, seven wasted writes per message). Behind the gate
// the next claimer asks after the previous one's claim is done, so it sees
// the record taken. Claimers that were not woken (a consumer asking again
// right after an ack, with a backlog to work through) do not pass it: their
// claims still share the writer's groups. The price is in bursts: N
// records landing at once in a box that N claimers wait on reach the last
// of them after N claim round trips, not one. Measured in mixed mode at
// 1,500 msgs/s (docs/benchmarks.md, fifth round): p99 from send to claim
// 92–100 ms without the gate, 25 ms with it.
type wakeGate struct {
	mu   sync.Mutex
	busy map[boxKey]chan struct{} // closed when the holder leaves
}

func newWakeGate() *wakeGate { return &wakeGate{busy: make(map[boxKey]chan struct{})} }

// enter waits until k's gate is free and takes it; leave with the func it
// returns. It gives up when ctx ends or at deadline (errGateTimeout). A
// free gate costs no timer: most woken claimers find it free.
func (g *wakeGate) enter(ctx context.Context, k boxKey, deadline time.Time) (func(), error) {
	var timeout <-chan time.Time
	for {
		g.mu.Lock()
		held, ok := g.busy[k]
		if !ok {
			done := make(chan struct{})
			g.busy[k] = done
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.busy, k)
				g.mu.Unlock()
				close(done)
			}, nil
		}
		g.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, errGateTimeout
		}
	}
}

// errGateTimeout: the caller's deadline passed while it waited.
var errGateTimeout = errors.New("wake gate: deadline passed")
