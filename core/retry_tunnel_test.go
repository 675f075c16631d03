package core

import (
	"context"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A tunnel's outbox has its own limit of attempts (its far side is often
// away for minutes); other boxes keep MaxAttempts.
func TestTunnelMaxAttempts(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := New(openTestStore(t), Config{Now: clk.Now, MaxAttempts: 2, TunnelMaxAttempts: 4})
	ctx := context.Background()
	id := routedSend(t, s)
	fail := &wire.DeliveryRequest{Result: &wire.DeliveryResult{ErrorCode: "451", Retryable: true}}
	for attempt := 1; attempt <= 4; attempt++ {
		got := claimOne(t, s, tunnel, model.TunnelOutbox)
		if got == nil || got.Record.RecordID != id {
			t.Fatalf("attempt %d: claim = %+v", attempt, got)
		}
		res, err := s.ReportDelivery(ctx, tunnel, id, leased(fail, got))
		if err != nil {
			t.Fatal(err)
		}
		want := model.Wait
		if attempt == 4 {
			want = model.Dead
		}
		if res.Record.State != want {
			t.Fatalf("after attempt %d: %s, want %s", attempt, res.Record.State, want)
		}
		clk.Advance(10 * time.Minute)
	}

	mustDispatch(t, s, chat("did:tg:ann", []string{"did:agent:bob"}, "x"))
	bob := agent("did:agent:bob")
	for attempt := 1; attempt <= 2; attempt++ {
		got := claimOne(t, s, bob, model.Inbox)
		if got == nil {
			t.Fatalf("inbox attempt %d: nothing to claim", attempt)
		}
		res, err := s.ReportDelivery(ctx, bob, got.Record.RecordID, leased(fail, got))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]model.State{1: model.Unread, 2: model.Dead}[attempt]; res.Record.State != want {
			t.Fatalf("inbox after attempt %d: %s, want %s", attempt, res.Record.State, want)
		}
		clk.Advance(10 * time.Minute)
	}
}

// The author of a message sent through a tunnel may read its delivery's
// record (to see it SENT, or DEAD and why), not work it; nobody else may.
func TestAuthorFollowsItsDelivery(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock())
	ctx := context.Background()
	id := routedSend(t, s)
	got, err := s.GetRecord(ctx, agent("did:alice"), id, false)
	if err != nil || got.Record.RecordID != id || got.Record.BoxKind != model.TunnelOutbox {
		t.Fatalf("the author reading its delivery: %+v, %v", got, err)
	}
	if _, err := s.GetRecord(ctx, agent("did:mallory"), id, false); err == nil {
		t.Fatal("another agent read the delivery")
	}
	if _, err := s.SetState(ctx, agent("did:alice"), id, &wire.StateRequest{NewState: model.Sent}); err == nil {
		t.Fatal("the author changed its delivery's state")
	}
}
