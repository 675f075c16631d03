package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestWakeGate(t *testing.T) {
	t.Parallel()
	g := newWakeGate()
	ctx := context.Background()
	a, b := boxKey{"did:a", model.Inbox}, boxKey{"did:b", model.Inbox}
	far := time.Now().Add(time.Hour)
	leaveA, err := g.enter(ctx, a, far)
	if err != nil {
		t.Fatal(err)
	}
	// Another box's gate is free.
	leaveB, err := g.enter(ctx, b, far)
	if err != nil {
		t.Fatal(err)
	}
	leaveB()

	// A second claimer of the same box waits for the first to leave.
	entered := make(chan func())
	go func() {
		leave, err := g.enter(ctx, a, far)
		if err != nil {
			t.Error(err)
			close(entered)
			return
		}
		entered <- leave
	}()
	select {
	case <-entered:
		t.Fatal("entered a gate that was held")
	case <-time.After(50 * time.Millisecond):
	}
	leaveA()
	select {
	case leave := <-entered:
		leave()
	case <-time.After(10 * time.Second):
		t.Fatal("the gate was left but the waiter did not enter")
	}

	// A waiter whose caller gives up returns at once, and the gate stays
	// usable.
	leaveA, err = g.enter(ctx, a, far)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.enter(cctx, a, far); !errors.Is(err, context.Canceled) {
		t.Fatalf("enter with a cancelled context while held: %v", err)
	}
	// And one whose deadline passes.
	if _, err := g.enter(ctx, a, time.Now().Add(20*time.Millisecond)); !errors.Is(err, errGateTimeout) {
		t.Fatalf("enter past its deadline while held: %v", err)
	}
	leaveA()
	leave, err := g.enter(ctx, a, far)
	if err != nil {
		t.Fatal(err)
	}
	leave()
	if len(g.busy) != 0 {
		t.Fatalf("gates left held: %v", g.busy)
	}
}

// TestWokenClaimerKeepsItsDeadline: a claimer woken while its box's gate
// is held answers "nothing" at the end of its wait_ms, not when the gate
// is left.
func TestWokenClaimerKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(openTestStore(t), Config{IdleRecheck: time.Hour})
	bob := agent("did:bob")
	leave, err := s.woken.enter(ctx, boxKey{bob.DID, model.Inbox}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	type answer struct {
		rec *wire.RecordWithMsg
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 300})
		done <- answer{r, err}
	}()
	time.Sleep(50 * time.Millisecond)
	s.notify.Changed(bob.DID, model.Inbox) // wakes it into the held gate
	select {
	case a := <-done:
		if a.err != nil || a.rec != nil {
			t.Fatalf("Next = %+v, %v; want nothing, no error", a.rec, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the woken claimer waited for the gate past its wait_ms")
	}
}
