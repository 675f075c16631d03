package core

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// deliveryEvents are the delivery.* events who reads in its own log.
func deliveryEvents(t *testing.T, s *Service, who model.Identity) []model.Event {
	t.Helper()
	res, err := s.Events(context.Background(), who, wire.EventQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Event
	for _, e := range res.Items {
		if strings.HasPrefix(e.Type, "delivery.") {
			out = append(out, e)
		}
	}
	return out
}

// The author of a message sent through a tunnel hears from its own event
// log when a delivery ends, SENT or DEAD, and when a dead one is redriven;
// not of the retries between, and nobody else hears of it.
func TestAuthorHearsHowItsDeliveryEnded(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	alice := agent("did:alice")
	id := routedSend(t, s)

	got := claimOne(t, s, tunnel, model.TunnelOutbox)
	retry := &wire.DeliveryRequest{Result: &wire.DeliveryResult{ErrorCode: "timeout", Retryable: true}}
	if _, err := s.ReportDelivery(ctx, tunnel, id, leased(retry, got)); err != nil {
		t.Fatal(err)
	}
	if evs := deliveryEvents(t, s, alice); len(evs) != 0 {
		t.Fatalf("a retried attempt told the author: %+v", evs)
	}

	clk.Advance(time.Minute)
	got = claimOne(t, s, tunnel, model.TunnelOutbox)
	dead := &wire.DeliveryRequest{Result: &wire.DeliveryResult{ErrorCode: "403", ErrorMessage: "bot was blocked by the user"}}
	if _, err := s.ReportDelivery(ctx, tunnel, id, leased(dead, got)); err != nil {
		t.Fatal(err)
	}
	evs := deliveryEvents(t, s, alice)
	if len(evs) != 1 {
		t.Fatalf("after the delivery died the author has %d delivery events: %+v", len(evs), evs)
	}
	e := evs[0]
	if e.Type != model.EventDeliveryDead || e.Owner != alice.DID || e.RecordID != id || e.BoxKind != model.TunnelOutbox ||
		e.FromState != model.Sending || e.ToState != model.Dead || e.AtMS != clk.Now().UnixMilli() {
		t.Fatalf("the author's notice = %+v", e)
	}
	if want := "to did:ext:bob via did:tunnel:tg: dead: attempt 2 failed (403: bot was blocked by the user)"; e.Detail != want {
		t.Fatalf("notice detail = %q, want %q", e.Detail, want)
	}
	// The author follows the notice to the record, which says the same.
	rec, err := s.GetRecord(ctx, alice, e.RecordID, false)
	if err != nil || rec.Record.State != model.Dead || rec.Record.Delivery.ErrorCode != "403" {
		t.Fatalf("the author reading the dead delivery: %+v, %v", rec, err)
	}

	if _, err := s.Redrive(ctx, admin, id); err != nil {
		t.Fatal(err)
	}
	got = claimOne(t, s, tunnel, model.TunnelOutbox)
	ok := &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true, ExternalMsgID: "tg-77"}}
	if _, err := s.ReportDelivery(ctx, tunnel, id, leased(ok, got)); err != nil {
		t.Fatal(err)
	}
	evs = deliveryEvents(t, s, alice)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "delivery.dead delivery.redriven delivery.sent" {
		t.Fatalf("the author's delivery events: %v", types)
	}
	if want := "to did:ext:bob via did:tunnel:tg: sent (external id tg-77)"; evs[2].Detail != want {
		t.Fatalf("sent notice detail = %q, want %q", evs[2].Detail, want)
	}
	for _, who := range []model.Identity{tunnel, agent("did:ext:bob")} {
		if evs := deliveryEvents(t, s, who); len(evs) != 0 {
			t.Fatalf("%s reads the author's notices: %+v", who.DID, evs)
		}
	}
}

// A lease that expires on the last attempt kills the delivery through the
// reaper, and the author hears of that too.
func TestAuthorHearsOfADeliveryTheReaperKilled(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := New(openTestStore(t), Config{Now: clk.Now, TunnelMaxAttempts: 1})
	id := routedSend(t, s)
	if got := claimOne(t, s, tunnel, model.TunnelOutbox); got == nil || got.Record.RecordID != id {
		t.Fatalf("claim = %+v", got)
	}
	clk.Advance(time.Hour)
	if n, err := s.ReapExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("ReapExpired = %d, %v; want 1", n, err)
	}
	evs := deliveryEvents(t, s, agent("did:alice"))
	if len(evs) != 1 || evs[0].Type != model.EventDeliveryDead || evs[0].RecordID != id ||
		!strings.Contains(evs[0].Detail, "lease_expired") {
		t.Fatalf("the author's notices after the reaper: %+v", evs)
	}
}

// A group's message to its external chat is its writer's: the notice goes
// to the source, not the group. A tunnel's own message tells no one.
func TestDeliveryNoticeGoesToTheWriter(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock())
	ctx := context.Background()
	const grp = "did:test:group"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{"did:alice"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRoutes(ctx, admin, grp, []model.ContactRoute{{TunnelDID: tunnel.DID, ChatID: "-100", Platform: "telegram"}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.PostSend(ctx, agent("did:alice"), &wire.PostSendRequest{Msg: &message.Message{From: grp, Source: "did:alice",
		Kind: message.KindGroupMsg, Content: message.Content{Content: "to the chat"}}})
	if err != nil || len(res.Deliveries) != 1 {
		t.Fatalf("group post_send = %+v, %v", res, err)
	}
	if _, err := s.SetRoutes(ctx, admin, "did:ext:carol", []model.ContactRoute{{TunnelDID: tunnel.DID, Address: "tg:9", Platform: "telegram"}}); err != nil {
		t.Fatal(err)
	}
	own, err := s.PostSend(ctx, tunnel, &wire.PostSendRequest{Msg: chat(tunnel.DID, []string{"did:ext:carol"}, "from the tunnel itself")})
	if err != nil || len(own.Deliveries) != 1 {
		t.Fatalf("the tunnel's own post_send = %+v, %v", own, err)
	}
	for range 2 {
		got := claimOne(t, s, tunnel, model.TunnelOutbox)
		if got == nil {
			t.Fatal("nothing to claim")
		}
		if _, err := s.SetState(ctx, tunnel, got.Record.RecordID, &wire.StateRequest{NewState: model.Sent, LeaseID: got.Record.Lease.ID}); err != nil {
			t.Fatal(err)
		}
	}
	evs := deliveryEvents(t, s, agent("did:alice"))
	if len(evs) != 1 || evs[0].Type != model.EventDeliverySent || evs[0].RecordID != res.Deliveries[0].RecordID {
		t.Fatalf("the writer's notices: %+v", evs)
	}
	for _, who := range []model.Identity{agent(grp), tunnel} {
		if evs := deliveryEvents(t, s, who); len(evs) != 0 {
			t.Fatalf("%s was told: %+v", who.DID, evs)
		}
	}
}

// A delivery ended or reopened by hand (the tunnel or an admin moving its
// record) is told like one ended by a report: every way out of WAIT or
// SENDING but SENT is delivery.dead, every way back is delivery.redriven,
// and moves between ended states tell nothing new.
func TestDeliveryEndedByHandIsTold(t *testing.T) {
	t.Parallel()
	type move struct {
		to    model.State
		claim bool // claim first: move from SENDING
		by    model.Identity
	}
	for _, tc := range []struct {
		name  string
		moves []move
		want  string
	}{
		{"deleted while waiting", []move{{to: model.Deleted, by: tunnel}}, "delivery.dead"},
		{"archived while waiting", []move{{to: model.Archived, by: admin}}, "delivery.dead"},
		{"archived while sending", []move{{to: model.Archived, claim: true, by: tunnel}}, "delivery.dead"},
		{"parked as failed", []move{{to: model.Failed, claim: true, by: tunnel}}, "delivery.dead"},
		{"failed, then dead", []move{{to: model.Failed, claim: true, by: tunnel}, {to: model.Dead, by: admin}}, "delivery.dead"},
		{"archived, then back", []move{{to: model.Archived, by: admin}, {to: model.Wait, by: admin}}, "delivery.dead delivery.redriven"},
		{"failed, then back", []move{{to: model.Failed, claim: true, by: tunnel}, {to: model.Wait, by: admin}}, "delivery.dead delivery.redriven"},
		{"dead, archived, back", []move{{to: model.Dead, by: admin}, {to: model.Archived, by: admin}, {to: model.Wait, by: admin}}, "delivery.dead delivery.redriven"},
		{"sent, then archived", []move{{to: model.Sent, claim: true, by: tunnel}, {to: model.Archived, by: tunnel}}, "delivery.sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newService(t, newClock())
			ctx := context.Background()
			id := routedSend(t, s)
			for _, m := range tc.moves {
				req := &wire.StateRequest{NewState: m.to}
				if m.claim {
					got := claimOne(t, s, tunnel, model.TunnelOutbox)
					req.LeaseID = got.Record.Lease.ID
				}
				if _, err := s.SetState(ctx, m.by, id, req); err != nil {
					t.Fatalf("move to %s: %v", m.to, err)
				}
			}
			var types []string
			for _, e := range deliveryEvents(t, s, agent("did:alice")) {
				types = append(types, e.Type)
				if e.RecordID != id {
					t.Fatalf("notice about %s, want %s", e.RecordID, id)
				}
			}
			if got := strings.Join(types, " "); got != tc.want {
				t.Fatalf("the author was told %q, want %q", got, tc.want)
			}
		})
	}
}

// A post_send naming a group in msg.to is refused, naming the field: the
// group's own INBOX, which no member reads, would take it.
func TestPostSendToAGroupIsRefused(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock())
	ctx := context.Background()
	const grp = "did:test:team"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{"did:alice", "did:bob"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.PostSend(ctx, agent("did:alice"), &wire.PostSendRequest{Msg: chat("did:alice", []string{"did:carol", grp}, "hi team")})
	var me *model.Error
	if !errors.As(err, &me) || !errors.Is(err, model.ErrInvalid) || me.Field != "msg.to[1]" || !strings.Contains(me.Message, "is a group") {
		t.Fatalf("post_send to a group: %v", err)
	}
	if n := len(syncAll(t, s, "did:carol", model.Inbox)); n != 0 {
		t.Fatalf("the refused send left %d records with carol", n)
	}
}

// A tunnel reads the messages that came in through it (to answer them:
// a mail's subject), and nothing more of them: not their receipts. Another
// tunnel reads none of it.
func TestTunnelReadsWhatCameThroughIt(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock())
	ctx := context.Background()
	res, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: chat("did:tg:ann", []string{"did:agent:bob"}, "hello"),
		IngressCtx: &model.Route{TunnelDID: tunnel.DID, Platform: "telegram", ChatID: "42"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMessage(ctx, tunnel, res.MsgID); err != nil {
		t.Fatalf("the tunnel reading what came in through it: %v", err)
	}
	other := model.Identity{DID: "did:tunnel:other", Role: model.RoleTunnel}
	if _, err := s.GetMessage(ctx, other, res.MsgID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("another tunnel reading it: %v", err)
	}
	if _, err := s.ListReceipts(ctx, tunnel, wire.ReceiptQuery{MsgID: res.MsgID}); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("the tunnel listing the message's receipts: %v", err)
	}
	// A tunnel's dispatch that does not name the tunnel came in through it
	// all the same.
	unnamed, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: chat("did:tg:ann", []string{"did:agent:bob"}, "again"),
		IngressCtx: &model.Route{Platform: "telegram", ChatID: "42"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMessage(ctx, tunnel, unnamed.MsgID); err != nil {
		t.Fatalf("the tunnel reading a dispatch that did not name it: %v", err)
	}
	rec, err := s.GetRecord(ctx, admin, model.RecordID("did:agent:bob", model.Inbox, unnamed.MsgID, ""), false)
	if err != nil || rec.Record.Route == nil || rec.Record.Route.TunnelDID != tunnel.DID {
		t.Fatalf("the record of a dispatch that did not name its tunnel: %+v, %v", rec, err)
	}
}
