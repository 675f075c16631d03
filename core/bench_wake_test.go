//go:build unix

package core

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// lookCounter counts the reads and writes waiting claimers make of a store.
type lookCounter struct {
	claimCounter
	nextVisible atomic.Int64
}

func (c *lookCounter) NextVisible(ctx context.Context, owner string, box model.BoxKind, state model.State, afterMS int64) (int64, bool, error) {
	c.nextVisible.Add(1)
	return c.Store.NextVisible(ctx, owner, box, state, afterMS)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWaitingClaimers: eight claimers long-poll one INBOX (get_next
// with wait_ms, then an ack) while one sender dispatches to it, one
// message at a time, so the claimers are mostly waiting: the shape of
// msgload's mixed mode below saturation. It reports the process's CPU time
// per message and the store calls the claimers make per message (claim
// writes, Claimable and NextVisible reads); the time per op is the
// sender's and says little.
func BenchmarkWaitingClaimers(b *testing.B) {
	const claimers = 8
	st := &lookCounter{claimCounter: claimCounter{Store: openTestStore(b)}}
	s := New(st, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bob := agent("did:agent:bob")
	var got atomic.Int64
	var wg sync.WaitGroup
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 5000})
				if err != nil || r == nil {
					continue
				}
				if _, err := s.SetState(ctx, bob, r.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: r.Record.Lease.ID}); err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				got.Add(1)
			}
		}()
	}
	// Every claimer waiting before the clock starts: the first finds the
	// box empty, the others take its word (or look themselves).
	for st.nextVisible.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	claims0, asks0, next0 := st.claims.Load(), st.asks.Load(), st.nextVisible.Load()
	cpu0 := cpuTime(b)
	var i int64
	for b.Loop() {
		i++
		m := chat("did:ext:alice", []string{bob.DID}, benchText(i, 100))
		if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
			b.Fatal(err)
		}
	}
	for got.Load() < i {
		time.Sleep(100 * time.Microsecond)
	}
	cpu := cpuTime(b) - cpu0
	n := float64(i)
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
	b.ReportMetric(float64(st.claims.Load()-claims0)/n, "claims/msg")
	b.ReportMetric(float64(st.asks.Load()-asks0)/n, "asks/msg")
	b.ReportMetric(float64(st.nextVisible.Load()-next0)/n, "next-visible/msg")
	cancel()
	wg.Wait()
}

var _ store.Store = (*lookCounter)(nil)
