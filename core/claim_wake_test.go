package core

import (
	"context"
	"errors"
	"fmt"
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

// Claim counts a claim once it is done: a test that waits for claims to be
// counted goes on while one counted before it ran could still take a
// record sent after (seen on PostgreSQL, where a claim takes longer).
func (c *claimCounter) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	defer c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *claimCounter) UpdateThenClaim(ctx context.Context, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed, error) {
	rec, cl, err := c.Store.UpdateThenClaim(ctx, u, p)
	if err == nil {
		c.claims.Add(1)
	}
	return rec, cl, err
}

func (c *claimCounter) Claimable(ctx context.Context, owner string, box model.BoxKind, state model.State, nowMS int64) (bool, error) {
	c.asks.Add(1)
	return c.Store.Claimable(ctx, owner, box, state, nowMS)
}

// wakeCounter counts what woken claimers did (Metrics.ClaimWake).
type wakeCounter struct {
	noMetrics
	taken, empty, skipped atomic.Int64
}

func (w *wakeCounter) ClaimWake(_ model.BoxKind, o WakeOutcome) {
	map[WakeOutcome]*atomic.Int64{WakeTaken: &w.taken, WakeEmpty: &w.empty, WakeSkipped: &w.skipped}[o].Add(1)
}

func (w *wakeCounter) total() int64 { return w.taken.Load() + w.empty.Load() + w.skipped.Load() }

// TestWokenClaimersAskBeforeWriting: an ack leaves nothing to take and
// wakes no waiting claimer; a new record wakes them all, one takes it with
// one claim write, one more asks the store and finds nothing, and the rest
// take that answer without asking.
func TestWokenClaimersAskBeforeWriting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc := &claimCounter{Store: openTestStore(t)}
	wc := &wakeCounter{}
	s := New(cc, Config{IdleRecheck: time.Hour, Metrics: wc}) // no timed re-checks: only wake-ups
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
	// A waiter's first claim finds nothing; those that come after it take
	// its word.
	waitFor(t, "every waiter's first attempt", func() bool { return cc.claims.Load()-1+wc.skipped.Load() == waiters })
	claims0 := cc.claims.Load()
	wc.skipped.Store(0)

	// The ack changes the box (its streams must see it) but leaves nothing
	// UNREAD: the claimers sleep on. The box's stream watch is closed.
	stream, claims := s.Watch(bob.DID, model.Inbox), s.notify.WatchClaims(bob.DID, model.Inbox)
	if _, err := s.SetState(ctx, bob, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	if !closed(stream) {
		t.Fatal("the ack did not wake the box's stream watchers")
	}
	if closed(claims) {
		t.Fatal("the ack woke the box's claimers")
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
	// The others pass the wake gate one after another, after the claim
	// before them: the first asks and finds it taken, the rest take its
	// word. Had the ack woken them, each would have asked once more.
	waitFor(t, "every waiter woken by the send", func() bool { return wc.total() >= waiters })
	cancel()
	wg.Wait() // the counts are final
	if a, e, sk := cc.asks.Load(), wc.empty.Load(), wc.skipped.Load(); a != 2 || e != 1 || sk != waiters-2 {
		t.Fatalf("after an ack and one new record: %d asks, %d found nothing, %d skipped; want 2, 1, %d", a, e, sk, waiters-2)
	}
	if n := cc.claims.Load() - claims0; n != 1 {
		t.Fatalf("waiters woken by one new record queued %d claim writes, want 1", n)
	}
	if len(got) != 0 {
		t.Fatalf("%d more waiters took a record; there was one", len(got))
	}
}

// TestClaimerRecheckIgnoresEmptyMark: a box marked as found empty is
// still looked at when a claimer's idle recheck fires, since that timer
// stands for changes no notification announced (another node's, lost with
// its connection). Here the records are written by another service on the
// same store, as another node would, so nothing wakes the claimer. The
// record it then finds shows the mark wrong: the records after it are
// claimed without waiting for the recheck again.
func TestClaimerRecheckIgnoresEmptyMark(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openTestStore(t)
	wc := &wakeCounter{}
	s := New(st, Config{IdleRecheck: 50 * time.Millisecond, Metrics: wc})
	bob := agent("did:bob")

	const records = 4
	got := make(chan string, records)
	done := make(chan struct{})
	go func() { // a worker: get_next with wait_ms, then an ack
		defer close(done)
		for ctx.Err() == nil {
			r, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 30_000})
			if err != nil || r == nil {
				continue
			}
			if _, err := s.SetState(ctx, bob, r.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: r.Record.Lease.ID}); err != nil {
				t.Error(err)
				return
			}
			got <- r.Record.MsgID
		}
	}()
	// A change with nothing to take marks the box found empty.
	waitFor(t, "the box marked found empty", func() bool {
		s.notify.Changed(bob.DID, model.Inbox)
		return wc.empty.Load() > 0
	})

	other := New(st, Config{})
	want := map[string]bool{}
	for i := range records {
		res, err := other.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{bob.DID}, fmt.Sprint("unannounced ", i))})
		if err != nil {
			t.Fatal(err)
		}
		want[res.MsgID] = true
	}
	for range records {
		select {
		case id := <-got:
			if !want[id] {
				t.Fatalf("took %s, not one of the unannounced records", id)
			}
			delete(want, id)
		case <-time.After(10 * time.Second):
			t.Fatal("the worker did not find the unannounced records: the idle recheck trusted the empty mark")
		}
	}
	if n := wc.skipped.Load(); n != 0 {
		t.Fatalf("%d claims skipped on the word of a mark the first record had shown wrong", n)
	}
	cancel()
	<-done
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

func (c *claimThenTick) UpdateThenClaim(ctx context.Context, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed, error) {
	rec, cl, err := c.Store.UpdateThenClaim(ctx, u, p)
	if err == nil && errors.Is(cl.Err, model.ErrNotFound) {
		c.clk.Advance(10 * time.Millisecond)
	}
	return rec, cl, err
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

// TestClaimerWokenByExpiredLease: a record claimable again without a new
// record (here its lease expired, with a retry backoff of 1 ms) wakes a
// claimer that found the box empty. The clock is the test's, so a claimer
// not woken would sleep for its IdleRecheck of an hour.
func TestClaimerWokenByExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	s := New(openTestStore(t), Config{IdleRecheck: time.Hour, Now: clk.Now, BackoffBase: time.Millisecond})
	bob := agent("did:bob")
	if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{bob.DID}, "once")}); err != nil {
		t.Fatal(err)
	}
	held, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{LeaseMS: 1000})
	if err != nil || held == nil {
		t.Fatalf("claim: %v, %v", held, err)
	}
	got := make(chan *wire.RecordWithMsg, 1)
	go func() {
		r, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 30_000})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitFor(t, "the waiter to find the box empty", func() bool {
		_, ok := s.notify.knownEmpty(bob.DID, model.Inbox, s.notify.WatchClaims(bob.DID, model.Inbox), s.nowMS())
		return ok
	})
	clk.Advance(2 * time.Second)
	if n, err := s.ReapExpired(ctx); err != nil || n != 1 {
		t.Fatalf("ReapExpired = %d, %v; want 1", n, err)
	}
	clk.Advance(time.Second) // past the backoff
	select {
	case r := <-got:
		if r == nil || r.Record.RecordID != held.Record.RecordID {
			t.Fatalf("the waiter got %+v, want the record whose lease expired", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the expired lease did not wake the waiting claimer")
	}
}
