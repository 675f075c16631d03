package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestConcurrentClaimsExactlyOnce: 16 goroutines claim from one box of
// 5,000 records; every record is claimed exactly once.
func TestConcurrentClaimsExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	n := 5000
	if testing.Short() {
		n = 500
	}
	ctx := context.Background()
	// Seed concurrently: the writes share commits, which keeps this test
	// affordable under -race.
	var seed sync.WaitGroup
	for g := 0; g < 16; g++ {
		seed.Add(1)
		go func() {
			defer seed.Done()
			for i := g; i < n; i += 16 {
				if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{"did:worker"}, fmt.Sprint("m", i))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seed.Wait()
	if got := len(syncAll(t, s, "did:worker", model.Inbox)); got != n {
		t.Fatalf("seeded %d records, want %d", got, n)
	}
	var mu sync.Mutex
	seen := make(map[string]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := s.Next(ctx, agent("did:worker"), "did:worker", model.Inbox, &wire.NextRequest{WithObject: ptr(false)})
				if err != nil {
					errs <- err
					return
				}
				if res == nil {
					return
				}
				if res.Record.State != model.Reading || res.Record.Lease == nil {
					errs <- fmt.Errorf("claimed record in state %s with lease %v", res.Record.State, res.Record.Lease)
					return
				}
				mu.Lock()
				seen[res.Record.RecordID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct records, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("record %s claimed %d times", id, c)
		}
	}
}

// TestLongPollWokenByWrite: a waiting claimer returns as soon as a record
// arrives, well before its wait deadline, and 204s (nil) at the deadline.
func TestLongPollWokenByWrite(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	got := make(chan *wire.RecordWithMsg, 1)
	start := time.Now()
	go func() {
		res, err := s.Next(ctx, agent("did:w"), "did:w", model.Inbox, &wire.NextRequest{WaitMS: 60_000})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	time.Sleep(50 * time.Millisecond)
	mustDispatch(t, s, chat("did:a", []string{"did:w"}, "hello"))
	select {
	case res := <-got:
		if res == nil || texts([]wire.RecordWithMsg{*res})[0] != "hello" {
			t.Fatalf("long poll returned %+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("long poll was not woken by the write")
	}
	// The wake-up must come from the write, not the 60 s deadline.
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("waited %v", waited)
	}
	res, err := s.Next(ctx, agent("did:w"), "did:w", model.Inbox, &wire.NextRequest{WaitMS: 20})
	if err != nil || res != nil {
		t.Fatalf("empty box long poll = %v, %v; want nil, nil", res, err)
	}
}

func TestClaimRules(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	mustDispatch(t, s, chat("did:a", []string{"did:b"}, "x"))
	cases := []struct {
		name string
		who  model.Identity
		req  wire.NextRequest
		want error
	}{
		{"other agent", agent("did:c"), wire.NextRequest{}, model.ErrForbidden},
		{"claim of READED", agent("did:b"), wire.NextRequest{StateFilter: []model.State{model.Readed}}, model.ErrInvalid},
		{"unknown state", agent("did:b"), wire.NextRequest{StateFilter: []model.State{"NOPE"}}, model.ErrInvalid},
		{"negative lease", agent("did:b"), wire.NextRequest{LeaseMS: -1}, model.ErrInvalid},
		{"wait too long", agent("did:b"), wire.NextRequest{WaitMS: 10_000_000}, model.ErrInvalid},
	}
	for _, tc := range cases {
		_, err := s.Next(ctx, tc.who, "did:b", model.Inbox, &tc.req)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Peek leaves the record alone; a claim then takes it.
	res, err := s.Next(ctx, agent("did:b"), "did:b", model.Inbox, &wire.NextRequest{LockOnTake: ptr(false)})
	if err != nil || res == nil || res.Record.State != model.Unread {
		t.Fatalf("peek = %+v, %v", res, err)
	}
	res, err = s.Next(ctx, agent("did:b"), "did:b", model.Inbox, &wire.NextRequest{LeaseMS: 1000})
	if err != nil || res == nil || res.Record.State != model.Reading {
		t.Fatalf("claim = %+v, %v", res, err)
	}
	if d := res.Record.Lease.ExpiresAtMS - res.Record.UpdatedAtMS; d != 1000 {
		t.Fatalf("lease = %d ms, want 1000", d)
	}
}

// TestStaleLeaseIsLeaseLost: once a lease no longer holds its record, a
// state change naming it is lease_lost, whatever the record's state: an
// ack after the holder released the record, or one after the lease ran
// out and the record went back to the queue, tells the worker it lost
// the record, not that the transition is not allowed. (A repeat of the
// change that ended the lease is answered: TestRepeatedChangeIsAnswered.)
func TestStaleLeaseIsLeaseLost(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	bob := agent("did:bob")
	for _, text := range []string{"released, then acked", "acked late"} {
		if _, err := s.PostSend(ctx, agent("did:alice"), &wire.PostSendRequest{Msg: chat("did:alice", []string{"did:bob"}, text)}); err != nil {
			t.Fatal(err)
		}
	}
	stale := func(what string, id, lease string) {
		t.Helper()
		_, err := s.SetState(ctx, bob, id, &wire.StateRequest{NewState: model.Readed, LeaseID: lease})
		var me *model.Error
		if !errors.Is(err, model.ErrLeaseLost) || !errors.As(err, &me) || me.Field != "lease_id" {
			t.Fatalf("%s: %v; want lease_lost on lease_id", what, err)
		}
	}
	first := claimOne(t, s, bob, model.Inbox)
	if _, err := s.SetState(ctx, bob, first.Record.RecordID, &wire.StateRequest{NewState: model.Unread, LeaseID: first.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	stale("an ack after a release", first.Record.RecordID, first.Record.Lease.ID)

	second := claimOne(t, s, bob, model.Inbox)
	clk.Advance(s.cfg.DefaultLease + time.Second)
	if _, err := s.ReapExpired(ctx); err != nil {
		t.Fatal(err)
	}
	stale("an ack after the lease ran out", second.Record.RecordID, second.Record.Lease.ID)
}
