package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// modelRec is the test's own idea of one record.
type modelRec struct {
	id        string
	state     model.State
	attempts  int
	visibleAt int64  // claimable from (ms)
	leaseTill int64  // while held
	lease     string // the holding claim's lease id, while held
}

// TestPropRecordStateMachine drives one inbox with random claims, acks,
// failures, lease expiries, redrives and manual transitions, and checks
// after every step that the service agrees with a simple model: states,
// attempts, who gets claimed next, and the conversation's unread count.
func TestPropRecordStateMachine(t *testing.T) {
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		owner := fmt.Sprintf("did:sm:%d", run)
		who := agent(owner)
		n := rapid.IntRange(1, 4).Draw(rt, "records")
		recs := make([]*modelRec, n)
		for i := range recs {
			mustDispatch(rt, s, chat("did:peer", []string{owner}, fmt.Sprint(run, "-", i)))
		}
		for i, it := range syncAll(rt, s, owner, model.Inbox) {
			recs[i] = &modelRec{id: it.Record.RecordID, state: model.Unread}
		}
		now := func() int64 { return clk.Now().UnixMilli() }
		pick := func(label string) *modelRec { return recs[rapid.IntRange(0, n-1).Draw(rt, label)] }
		fail := func(r *modelRec, retryable bool) {
			r.attempts++
			if retryable && r.attempts < 3 {
				r.state, r.visibleAt = model.Unread, now()+s.backoff(r.attempts).Milliseconds()
			} else {
				r.state = model.Dead
			}
			r.leaseTill, r.lease = 0, ""
		}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
			case 0: // claim
				var want *modelRec
				for _, r := range recs { // lowest seq first
					if r.state == model.Unread && r.visibleAt <= now() {
						want = r
						break
					}
				}
				got, err := s.Next(ctx, who, owner, model.Inbox, &wire.NextRequest{LeaseMS: 1000, WithObject: ptr(false)})
				if err != nil {
					rt.Fatal(err)
				}
				switch {
				case want == nil && got != nil:
					rt.Fatalf("claimed %s, model has nothing claimable", got.Record.RecordID)
				case want != nil && (got == nil || got.Record.RecordID != want.id):
					rt.Fatalf("claim got %v, want %s", got, want.id)
				case want != nil:
					want.state, want.leaseTill, want.lease = model.Reading, now()+1000, got.Record.Lease.ID
				}
			case 1, 2: // ack or fail
				r := pick("record")
				ok := op == 1
				retryable := rapid.Bool().Draw(rt, "retryable")
				res := &wire.DeliveryResult{OK: true}
				if !ok {
					res = &wire.DeliveryResult{Retryable: retryable, ErrorCode: "x"}
				}
				_, err := s.ReportDelivery(ctx, who, r.id, &wire.DeliveryRequest{LeaseID: r.lease, Result: res})
				if r.state != model.Reading {
					if !errors.Is(err, model.ErrInvalidTransition) {
						rt.Fatalf("report on %s record: err %v", r.state, err)
					}
					continue
				}
				if err != nil {
					rt.Fatal(err)
				}
				if ok {
					r.state, r.leaseTill, r.lease = model.Readed, 0, ""
					r.attempts++
				} else {
					fail(r, retryable)
				}
			case 3: // time passes, expired leases come back
				clk.Advance(time.Duration(rapid.Int64Range(0, 3000).Draw(rt, "ms")) * time.Millisecond)
				if _, err := s.ReapExpired(ctx); err != nil {
					rt.Fatal(err)
				}
				for _, r := range recs {
					if r.state == model.Reading && r.leaseTill <= now() {
						fail(r, true)
					}
				}
			case 4: // redrive
				r := pick("record")
				_, err := s.Redrive(ctx, who, r.id)
				if r.state != model.Dead {
					if !errors.Is(err, model.ErrInvalidTransition) {
						rt.Fatalf("redrive of %s record: %v", r.state, err)
					}
					continue
				}
				if err != nil {
					rt.Fatal(err)
				}
				r.state, r.attempts, r.visibleAt = model.Unread, 0, 0
			case 5: // manual transition, checked against the table
				r := pick("record")
				to := rapid.SampledFrom(model.States).Draw(rt, "to")
				res, err := s.SetState(ctx, who, r.id, &wire.StateRequest{NewState: to, LeaseID: r.lease})
				if !model.CanTransition(model.Inbox, r.state, to) {
					if !errors.Is(err, model.ErrInvalidTransition) {
						rt.Fatalf("%s→%s: err %v, want invalid transition", r.state, to, err)
					}
					continue
				}
				if err != nil {
					rt.Fatal(err)
				}
				if r.state == model.Dead && to == model.Unread {
					r.attempts, r.visibleAt = 0, 0
				}
				// A manual move makes the record claimable at once: any
				// retry backoff belongs to the attempt it replaces.
				r.state, r.leaseTill, r.visibleAt, r.lease = to, 0, 0, ""
				if to == model.Reading {
					r.leaseTill, r.lease = now()+s.cfg.DefaultLease.Milliseconds(), res.Record.Lease.ID
				}
			}
			check(rt, s, owner, recs)
		}
	})
}

func check(rt *rapid.T, s *Service, owner string, recs []*modelRec) {
	unread := 0
	items := syncAll(rt, s, owner, model.Inbox)
	if len(items) != len(recs) {
		rt.Fatalf("%d records, want %d", len(items), len(recs))
	}
	for i, it := range items {
		got, want := it.Record, recs[i]
		if got.RecordID != want.id || got.State != want.state || got.Delivery.Attempts != want.attempts {
			rt.Fatalf("record %d: got %s %s attempts %d, want %s %s attempts %d", i,
				got.RecordID, got.State, got.Delivery.Attempts, want.id, want.state, want.attempts)
		}
		if (got.Lease != nil) != (want.state == model.Reading) {
			rt.Fatalf("record %d in %s has lease %v", i, got.State, got.Lease)
		}
		if want.state.IsUnread() {
			unread++
		}
	}
	conv, err := s.Conversations(context.Background(), agent(owner), wire.ConversationQuery{Owner: owner})
	if err != nil {
		rt.Fatal(err)
	}
	if len(conv.Items) != 1 || conv.Items[0].UnreadCount != int64(unread) {
		rt.Fatalf("conversations %+v, want one with unread %d", conv.Items, unread)
	}
}
