package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

func TestWakeGate(t *testing.T) {
	t.Parallel()
	g := newWakeGate()
	ctx := context.Background()
	a, b := boxKey{"did:a", model.Inbox}, boxKey{"did:b", model.Inbox}
	leaveA, err := g.enter(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	// Another box's gate is free.
	leaveB, err := g.enter(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	leaveB()

	// A second claimer of the same box waits for the first to leave.
	entered := make(chan func())
	go func() {
		leave, err := g.enter(ctx, a)
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
	leaveA, err = g.enter(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.enter(cctx, a); !errors.Is(err, context.Canceled) {
		t.Fatalf("enter with a cancelled context while held: %v", err)
	}
	leaveA()
	leave, err := g.enter(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	leave()
	if len(g.busy) != 0 {
		t.Fatalf("gates left held: %v", g.busy)
	}
}
