package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestRepeatedChangeIsAnswered: a worker whose ack (or failure, or
// release) was applied but whose answer was lost sends it again under the
// same lease. The repeat is answered with the record as the first left
// it, and changes nothing: no second attempt counted, no event. A
// different change under that lease, or any change under a lease that
// ran out, is still lease_lost.
func TestRepeatedChangeIsAnswered(t *testing.T) {
	t.Parallel()
	ack := func(lease string) any {
		return &wire.DeliveryRequest{LeaseID: lease, Result: &wire.DeliveryResult{OK: true}}
	}
	fail := func(lease string) any {
		return &wire.DeliveryRequest{LeaseID: lease, Result: &wire.DeliveryResult{ErrorCode: "busy", Retryable: true}}
	}
	failDead := func(lease string) any {
		return &wire.DeliveryRequest{LeaseID: lease, Result: &wire.DeliveryResult{ErrorCode: "bad"}}
	}
	set := func(to model.State) func(string) any {
		return func(lease string) any { return &wire.StateRequest{NewState: to, LeaseID: lease} }
	}
	for _, tc := range []struct {
		name          string
		first, second func(lease string) any
		expire        bool // the lease runs out and is reaped before the first change
		state         model.State
		attempts      int
		lost          bool // the second is lease_lost
	}{
		{name: "ack", first: ack, second: ack, state: model.Readed, attempts: 1},
		{name: "set READED", first: set(model.Readed), second: set(model.Readed), state: model.Readed},
		{name: "ack then set READED", first: ack, second: set(model.Readed), state: model.Readed, attempts: 1},
		{name: "retryable failure", first: fail, second: fail, state: model.Unread, attempts: 1},
		{name: "failure to DEAD", first: failDead, second: failDead, state: model.Dead, attempts: 1},
		{name: "release", first: set(model.Unread), second: set(model.Unread), state: model.Unread},
		{name: "delete", first: set(model.Deleted), second: set(model.Deleted), state: model.Deleted},
		{name: "failure then ack", first: fail, second: ack, state: model.Unread, attempts: 1, lost: true},
		{name: "ack then failure", first: ack, second: fail, state: model.Readed, attempts: 1, lost: true},
		{name: "release then ack", first: set(model.Unread), second: ack, state: model.Unread, lost: true},
		{name: "release then failure", first: set(model.Unread), second: fail, state: model.Unread, lost: true},
		{name: "release then failure to DEAD", first: set(model.Unread), second: failDead, state: model.Unread, lost: true},
		{name: "failure then release", first: fail, second: set(model.Unread), state: model.Unread, attempts: 1, lost: true},
		{name: "set DEAD then failure", first: set(model.Dead), second: failDead, state: model.Dead, lost: true},
		{name: "failure to DEAD then set DEAD", first: failDead, second: set(model.Dead), state: model.Dead, attempts: 1, lost: true},
		{name: "retryable failure then failure to DEAD", first: fail, second: failDead, state: model.Unread, attempts: 1, lost: true},
		{name: "ack then set DEAD", first: ack, second: set(model.Dead), state: model.Readed, attempts: 1, lost: true},
		{name: "ack after expiry", second: ack, expire: true, state: model.Unread, attempts: 1, lost: true},
		{name: "failure after expiry", second: fail, expire: true, state: model.Unread, attempts: 1, lost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			s := newService(t, clk)
			ctx := context.Background()
			bob := agent("did:bob")
			mustDispatch(t, s, chat("did:alice", []string{"did:bob"}, "once"))
			held := claimOne(t, s, bob, model.Inbox)
			id, lease := held.Record.RecordID, held.Record.Lease.ID
			do := func(req any) (*wire.StateResult, error) {
				switch r := req.(type) {
				case *wire.DeliveryRequest:
					return s.ReportDelivery(ctx, bob, id, r)
				case *wire.StateRequest:
					return s.SetState(ctx, bob, id, r)
				}
				t.Fatalf("request %T", req)
				return nil, nil
			}
			if tc.expire {
				clk.Advance(s.cfg.DefaultLease + time.Second)
				if n, err := s.ReapExpired(ctx); err != nil || n != 1 {
					t.Fatalf("reaped %d, %v", n, err)
				}
			} else if _, err := do(tc.first(lease)); err != nil {
				t.Fatalf("first: %v", err)
			}
			was, err := s.GetRecord(ctx, bob, id, false)
			if err != nil {
				t.Fatal(err)
			}
			events := len(allEventsOf(t, s))
			clk.Advance(time.Second)

			got, err := do(tc.second(lease))
			if tc.lost {
				if !errors.Is(err, model.ErrLeaseLost) {
					t.Fatalf("second: %v; want lease_lost", err)
				}
			} else if err != nil {
				t.Fatalf("second: %v; want the record as the first left it", err)
			} else if got.Record.State != tc.state || got.Record.UpdatedAtMS != was.Record.UpdatedAtMS {
				t.Fatalf("second answered %s updated at %d; want %s updated at %d",
					got.Record.State, got.Record.UpdatedAtMS, tc.state, was.Record.UpdatedAtMS)
			}
			now, err := s.GetRecord(ctx, bob, id, false)
			if err != nil {
				t.Fatal(err)
			}
			if r := now.Record; r.State != tc.state || r.Delivery.Attempts != tc.attempts || r.UpdatedAtMS != was.Record.UpdatedAtMS {
				t.Fatalf("after the second: %s, %d attempts, updated at %d; want %s, %d attempts, updated at %d",
					r.State, r.Delivery.Attempts, r.UpdatedAtMS, tc.state, tc.attempts, was.Record.UpdatedAtMS)
			}
			if n := len(allEventsOf(t, s)); n != events {
				t.Fatalf("the second appended %d events; want none", n-events)
			}
		})
	}
}

// TestRepeatedAckWithNext: a repeated ack that asks for the next record
// gets one, as the first did (that one's claim, whose answer was lost
// with the ack's, comes back when its lease runs out).
func TestRepeatedAckWithNext(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	bob := agent("did:bob")
	for _, text := range []string{"one", "two", "three"} {
		mustDispatch(t, s, chat("did:alice", []string{"did:bob"}, text))
	}
	held := claimOne(t, s, bob, model.Inbox)
	req := &wire.DeliveryRequest{LeaseID: held.Record.Lease.ID, Result: &wire.DeliveryResult{OK: true}, Next: &wire.NextRequest{}}
	first, err := s.ReportDelivery(ctx, bob, held.Record.RecordID, req)
	if err != nil || first.Next == nil {
		t.Fatalf("first: %+v, %v", first, err)
	}
	again, err := s.ReportDelivery(ctx, bob, held.Record.RecordID, req)
	if err != nil || again.Next == nil {
		t.Fatalf("repeat: %+v, %v", again, err)
	}
	if again.Record.State != model.Readed || again.Next.Record.RecordID == first.Next.Record.RecordID {
		t.Fatalf("repeat: %s with next %s; want READED and the third record (the first's next is held)",
			again.Record.State, again.Next.Record.RecordID)
	}
}

// TestConcurrentRepeatsAreAnswered: repeats sent while the first is
// still being written (a client that retries on a short timeout) all get
// the record as acked, not a conflict, and the ack is counted once.
func TestConcurrentRepeatsAreAnswered(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	bob := agent("did:bob")
	const records, tries = 20, 4
	for i := range records {
		mustDispatch(t, s, chat("did:alice", []string{"did:bob"}, fmt.Sprintf("m%d", i)))
	}
	for range records {
		held := claimOne(t, s, bob, model.Inbox)
		req := &wire.DeliveryRequest{LeaseID: held.Record.Lease.ID, Result: &wire.DeliveryResult{OK: true}}
		errs := make(chan error, tries)
		for range tries {
			go func() {
				got, err := s.ReportDelivery(ctx, bob, held.Record.RecordID, req)
				if err == nil && (got.Record.State != model.Readed || got.Record.Delivery.Attempts != 1) {
					err = fmt.Errorf("answered %s after %d attempts", got.Record.State, got.Record.Delivery.Attempts)
				}
				errs <- err
			}()
		}
		for range tries {
			if err := <-errs; err != nil {
				t.Fatalf("one of %d concurrent acks of %s: %v", tries, held.Record.RecordID, err)
			}
		}
	}
	delivered := 0
	for _, e := range allEventsOf(t, s) {
		if e.Type == model.EventRecordDelivered {
			delivered++
		}
	}
	if delivered != records {
		t.Fatalf("%d record.delivered events for %d records acked", delivered, records)
	}
}

func allEventsOf(t *testing.T, s *Service) []model.Event {
	t.Helper()
	res, err := s.Events(context.Background(), admin, wire.EventQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return res.Items
}
