package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// claimCounter counts the claim writes and the Claimable reads a service
// makes.
type claimCounter struct {
	store.Store
	claims, asks atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *claimCounter) Claimable(ctx context.Context, owner string, box model.BoxKind, state model.State, nowMS int64) (bool, error) {
	c.asks.Add(1)
	return c.Store.Claimable(ctx, owner, box, state, nowMS)
}

// TestWokenClaimersAskBeforeWriting: a change to a box that leaves nothing
// to take (here an ack) wakes every waiting claimer; none of them may queue
// a claim write for it, and a real new record is taken by one of them,
// with one claim write.
func TestWokenClaimersAskBeforeWriting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc := &claimCounter{Store: openTestStore(t)}
	s := New(cc, Config{IdleRecheck: time.Hour}) // no timed re-checks: only wake-ups
	bob := agent("did:bob")

	if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{bob.DID}, "first")}); err != nil {
		t.Fatal(err)
	}
	held, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || held == nil {
		t.Fatalf("claim of the first record: %v, %v", held, err)
	}

	const waiters = 4
	got := make(chan *wire.RecordWithMsg, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 60_000})
			if err == nil && r != nil {
				got <- r
			}
		}()
	}
	waitFor(t, "every waiter's first attempt", func() bool { return cc.claims.Load() == 1+waiters })

	// The ack changes the box and wakes the waiters, but leaves nothing UNREAD.
	if _, err := s.SetState(ctx, bob, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every woken waiter to ask", func() bool { return cc.asks.Load() >= waiters })
	if n := cc.claims.Load(); n != 1+waiters {
		t.Fatalf("woken waiters queued %d claim writes for a change with nothing to take", n-1-waiters)
	}

	if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{bob.DID}, "second")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.Record.State != model.Reading {
			t.Fatalf("taken record is %s, want READING", r.Record.State)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no waiter took the new record")
	}
	// The others ask one after another behind the wake gate, each after
	// the claim before it, and find it taken.
	waitFor(t, "every waiter woken by the send to ask", func() bool { return cc.asks.Load() >= 2*waiters })
	if n := cc.claims.Load() - 1 - waiters; n != 1 {
		t.Fatalf("waiters woken by one new record queued %d claim writes, want 1", n)
	}
	cancel()
	wg.Wait()
	if len(got) != 0 {
		t.Fatalf("%d more waiters took a record; there was one", len(got))
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// claimThenTick advances the clock after every claim that finds nothing:
// the time a backoff ends can fall between the claim and the claimer's
// question about when to look again.
type claimThenTick struct {
	store.Store
	clk *clock
}

func (c *claimThenTick) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	r, err := c.Store.Claim(ctx, p)
	if errors.Is(err, model.ErrNotFound) {
		c.clk.Advance(10 * time.Millisecond)
	}
	return r, err
}

// TestBackoffEndingDuringAClaimIsNotSlept: a record whose backoff ends
// between a claim that found nothing and the claimer's NextVisible is
// claimed at once, not after the wait (or IdleRecheck) runs out.
func TestBackoffEndingDuringAClaimIsNotSlept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	st := &claimThenTick{Store: openTestStore(t), clk: clk}
	s := New(st, Config{IdleRecheck: time.Hour, Now: clk.Now})
	bob := agent("did:bob")
	if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{bob.DID}, "later")}); err != nil {
		t.Fatal(err)
	}
	held, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || held == nil {
		t.Fatalf("claim: %v, %v", held, err)
	}
	now := s.nowMS()
	if _, err := st.Update(ctx, &store.Update{RecordID: held.Record.RecordID, From: model.Reading, ExpectLeaseID: held.Record.Lease.ID,
		To: model.Unread, VisibleAtMS: now + 5, NowMS: now}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 5000})
	if err != nil || got == nil || got.Record.RecordID != held.Record.RecordID {
		t.Fatalf("Next after the backoff = %+v, %v; want the record, claimed again", got, err)
	}
	if waited := time.Since(start); waited > 2500*time.Millisecond {
		t.Fatalf("the claimer slept %v next to a claimable record", waited)
	}
}
