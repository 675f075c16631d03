package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// routedSend sets up a recipient reached through a tunnel and post_sends
// one message to it, returning the tunnel outbox record id.
func routedSend(t *testing.T, s *Service) string {
	t.Helper()
	ctx := context.Background()
	if _, err := s.SetRoutes(ctx, admin, "did:ext:bob", []model.ContactRoute{{TunnelDID: tunnel.DID, Address: "tg:42", Platform: "telegram"}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.PostSend(ctx, agent("did:alice"), &wire.PostSendRequest{Msg: chat("did:alice", []string{"did:ext:bob"}, "hi")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deliveries) != 1 || res.Deliveries[0].TunnelDID != tunnel.DID || len(res.LocalRecipients) != 0 {
		t.Fatalf("post_send planned %+v", res)
	}
	return res.Deliveries[0].RecordID
}

// leased is req with the lease of the claim got.
func leased(req *wire.DeliveryRequest, got *wire.RecordWithMsg) *wire.DeliveryRequest {
	r := *req
	r.LeaseID = got.Record.Lease.ID
	return &r
}

func claimOne(t *testing.T, s *Service, who model.Identity, box model.BoxKind) *wire.RecordWithMsg {
	t.Helper()
	res, err := s.Next(context.Background(), who, who.DID, box, &wire.NextRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRetryBackoffThenDeadThenRedrive(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	id := routedSend(t, s)
	fail := &wire.DeliveryRequest{Result: &wire.DeliveryResult{ErrorCode: "timeout", Retryable: true}}
	for attempt, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		got := claimOne(t, s, tunnel, model.TunnelOutbox)
		if got == nil || got.Record.RecordID != id {
			t.Fatalf("attempt %d: claim = %+v", attempt+1, got)
		}
		res, err := s.ReportDelivery(ctx, tunnel, id, leased(fail, got))
		if err != nil {
			t.Fatal(err)
		}
		r := res.Record
		if r.State != model.Wait || r.Delivery.Attempts != attempt+1 || r.Delivery.NextRetryAtMS != clk.Now().Add(backoff).UnixMilli() {
			t.Fatalf("after failure %d: %+v", attempt+1, r)
		}
		if claimOne(t, s, tunnel, model.TunnelOutbox) != nil {
			t.Fatal("claimable before its backoff ran out")
		}
		clk.Advance(backoff)
	}
	last := claimOne(t, s, tunnel, model.TunnelOutbox)
	res, err := s.ReportDelivery(ctx, tunnel, id, leased(fail, last))
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.State != model.Dead || res.Record.Delivery.Attempts != 3 {
		t.Fatalf("third failure: %+v", res.Record)
	}
	dead, err := s.ListRecords(ctx, tunnel, wire.ListQuery{Owner: tunnel.DID, Box: model.TunnelOutbox, States: []model.State{model.Dead}})
	if err != nil || len(dead.Items) != 1 {
		t.Fatalf("dead list = %+v, %v", dead, err)
	}
	rd, err := s.RedriveBox(ctx, tunnel, tunnel.DID, model.TunnelOutbox, &wire.RedriveRequest{})
	if err != nil || rd.Redriven != 1 {
		t.Fatalf("redrive = %+v, %v", rd, err)
	}
	got := claimOne(t, s, tunnel, model.TunnelOutbox)
	if got == nil || got.Record.Delivery.Attempts != 0 {
		t.Fatalf("after redrive: %+v", got)
	}
	res, err = s.ReportDelivery(ctx, tunnel, id, &wire.DeliveryRequest{LeaseID: got.Record.Lease.ID, Result: &wire.DeliveryResult{OK: true, ExternalMsgID: "tg-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Record; r.State != model.Sent || r.Delivery.ExternalMsgID != "tg-1" || r.Delivery.DeliveredAtMS != clk.Now().UnixMilli() || r.Lease != nil {
		t.Fatalf("after success: %+v", r)
	}
	// Done, it says no error any more; last_error keeps the history.
	if d := res.Record.Delivery; d.ErrorCode != "" || d.ErrorMessage != "" || d.RetryAfterMS != 0 || d.LastError == "" {
		t.Fatalf("after success the failure is still reported: %+v", d)
	}
}

func TestRetryAfterAndNonRetryable(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	id := routedSend(t, s)
	got := claimOne(t, s, tunnel, model.TunnelOutbox)
	res, err := s.ReportDelivery(ctx, tunnel, id, &wire.DeliveryRequest{LeaseID: got.Record.Lease.ID, Result: &wire.DeliveryResult{
		ErrorCode: "429", Retryable: true, RetryAfterMS: 30_000}})
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().UnixMilli() + 30_000; res.Record.Delivery.NextRetryAtMS != want {
		t.Fatalf("next retry %d, want %d (retry_after beats the 1 s backoff)", res.Record.Delivery.NextRetryAtMS, want)
	}
	clk.Advance(30 * time.Second)
	got = claimOne(t, s, tunnel, model.TunnelOutbox)
	res, err = s.ReportDelivery(ctx, tunnel, id, &wire.DeliveryRequest{LeaseID: got.Record.Lease.ID, Result: &wire.DeliveryResult{ErrorCode: "403", ErrorMessage: "bot was blocked"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.State != model.Dead || res.Record.Delivery.LastError != "403: bot was blocked" {
		t.Fatalf("non-retryable failure: %+v", res.Record)
	}
	// A report on a record nobody holds is refused and changes nothing.
	_, err = s.ReportDelivery(ctx, tunnel, id, &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}})
	if !errors.Is(err, model.ErrInvalidTransition) {
		t.Fatalf("report on DEAD record: %v", err)
	}
}

func TestLeaseExpiryReturnsRecordAndFencesOldHolder(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	mustDispatch(t, s, chat("did:a", []string{"did:b"}, "x"))
	b := agent("did:b")
	first, err := s.Next(ctx, b, "did:b", model.Inbox, &wire.NextRequest{LeaseMS: 1000})
	if err != nil || first == nil {
		t.Fatal(first, err)
	}
	clk.Advance(999 * time.Millisecond)
	if n, err := s.ReapExpired(ctx); err != nil || n != 0 {
		t.Fatalf("reaped %d, %v before expiry", n, err)
	}
	clk.Advance(time.Millisecond)
	if n, err := s.ReapExpired(ctx); err != nil || n != 1 {
		t.Fatalf("reaped %d, %v at expiry", n, err)
	}
	got, err := s.GetRecord(ctx, b, first.Record.RecordID, false)
	if err != nil || got.Record.State != model.Unread || got.Record.Delivery.Attempts != 1 || got.Record.Lease != nil {
		t.Fatalf("after expiry: %+v %v", got, err)
	}
	clk.Advance(time.Second)
	second, err := s.Next(ctx, b, "did:b", model.Inbox, &wire.NextRequest{})
	if err != nil || second == nil || second.Record.Lease.ID == first.Record.Lease.ID {
		t.Fatalf("reclaim: %+v %v", second, err)
	}
	// The first holder's ack must not land on the second holder's claim.
	_, err = s.ReportDelivery(ctx, b, first.Record.RecordID, &wire.DeliveryRequest{LeaseID: first.Record.Lease.ID, Result: &wire.DeliveryResult{OK: true}})
	if !errors.Is(err, model.ErrLeaseLost) {
		t.Fatalf("stale ack: %v, want lease lost", err)
	}
	ext, err := s.ExtendLease(ctx, b, second.Record.RecordID, &wire.LeaseRequest{LeaseID: second.Record.Lease.ID, LeaseMS: 60_000})
	if err != nil || ext.Record.Lease.ExpiresAtMS != clk.Now().UnixMilli()+60_000 || ext.Record.State != model.Reading {
		t.Fatalf("extend: %+v %v", ext, err)
	}
}

func TestInvalidTransitionChangesNothing(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	mustDispatch(t, s, chat("did:a", []string{"did:b"}, "x"))
	items := syncAll(t, s, "did:b", model.Inbox)
	id := items[0].Record.RecordID
	if _, err := s.SetState(ctx, agent("did:b"), id, &wire.StateRequest{NewState: model.Sent}); !errors.Is(err, model.ErrInvalidTransition) {
		t.Fatalf("UNREAD→SENT: %v", err)
	}
	read, err := s.SetState(ctx, agent("did:b"), id, &wire.StateRequest{NewState: model.Readed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetState(ctx, agent("did:b"), id, &wire.StateRequest{NewState: model.Reading}); !errors.Is(err, model.ErrInvalidTransition) {
		t.Fatalf("READED→READING: %v", err)
	}
	after := syncAll(t, s, "did:b", model.Inbox)
	if got := after[0].Record; got.State != model.Readed || got.UpdatedAtMS != read.Record.UpdatedAtMS || got.Seq != read.Record.Seq {
		t.Fatalf("record changed by a refused transition: %+v, was %+v", got, read.Record)
	}
	ev, err := s.Events(ctx, admin, wire.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ev.Items); n != 2 { // created + one state change
		t.Fatalf("%d events, want 2: %+v", n, ev.Items)
	}
}

// TestRedriveBoxOldestFirst: dead records of messages created in the same
// millisecond (one sort key) are redriven in the order they reached the
// box, not in the order of their random record ids.
func TestRedriveBoxOldestFirst(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock()) // the clock stands still: one millisecond
	ctx := context.Background()
	if _, err := s.SetRoutes(ctx, admin, "did:ext:bob", []model.ContactRoute{{TunnelDID: tunnel.DID, Address: "tg:42", Platform: "telegram"}}); err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := range 6 {
		res, err := s.PostSend(ctx, agent("did:alice"), &wire.PostSendRequest{Msg: chat("did:alice", []string{"did:ext:bob"}, fmt.Sprintf("m%d", i))})
		if err != nil || len(res.Deliveries) != 1 {
			t.Fatalf("send %d: %+v, %v", i, res, err)
		}
		sent = append(sent, res.Deliveries[0].RecordID)
		got := claimOne(t, s, tunnel, model.TunnelOutbox)
		fail := &wire.DeliveryRequest{LeaseID: got.Record.Lease.ID, Result: &wire.DeliveryResult{ErrorCode: "bad_chat"}}
		if r, err := s.ReportDelivery(ctx, tunnel, res.Deliveries[0].RecordID, fail); err != nil || r.Record.State != model.Dead {
			t.Fatalf("failing send %d: %+v, %v", i, r, err)
		}
	}
	for i, want := range sent {
		rd, err := s.RedriveBox(ctx, tunnel, tunnel.DID, model.TunnelOutbox, &wire.RedriveRequest{Limit: 1})
		if err != nil || len(rd.RecordIDs) != 1 || rd.RecordIDs[0] != want {
			t.Fatalf("redrive %d: %+v, %v; want %s (order sent: %v)", i, rd, err, want, sent)
		}
	}
}

// TestSendToAnUnroutedTunnel: a post_send that asks for a tunnel the
// recipient has no route through is refused, naming send_ctx.tunnel_did,
// and stores nothing, delayed or not: it used to land in the recipient's
// local INBOX, where an external recipient never reads. A delayed send
// whose recipients' routes change before it is due still reaches every
// one of them, through their routes as they are then.
func TestSendToAnUnroutedTunnel(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	routedSend(t, s) // did:ext:bob through the tunnel; alice's OUTBOX holds one record
	alice := agent("did:alice")
	for _, delay := range []*int64{nil, ptr(int64(3_600_000))} {
		_, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: chat("did:alice", []string{"did:ext:bob"}, "typo"),
			SendCtx: &wire.SendCtx{TunnelDID: "did:tunnel:typo"}, DelayMS: delay})
		var me *model.Error
		if !errors.Is(err, model.ErrInvalid) || !errors.As(err, &me) || me.Field != "send_ctx.tunnel_did" {
			t.Fatalf("send through a tunnel without a route (delay %v): %v; want invalid send_ctx.tunnel_did", delay, err)
		}
	}
	if got := syncAll(t, s, "did:ext:bob", model.Inbox); len(got) != 0 {
		t.Fatalf("did:ext:bob's local INBOX holds %q", texts(got))
	}
	if got := syncAll(t, s, "did:alice", model.Outbox); len(got) != 1 {
		t.Fatalf("alice's OUTBOX holds %q, want only the first send", texts(got))
	}
	if sc, err := s.Scheduled(ctx, admin, wire.ScheduledQuery{Limit: 10}); err != nil || sc.Count != 0 {
		t.Fatalf("scheduled after the refused delayed send: %+v, %v", sc, err)
	}

	// Due after the routes changed: every recipient still gets it, the
	// one whose routes no longer include the tunnel through its routes as
	// they are now.
	res, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: chat("did:alice", []string{"did:ext:bob", "did:carol", "did:ext:dan"}, "routed, later"),
		SendCtx: &wire.SendCtx{TunnelDID: tunnel.DID}, DelayMS: ptr(int64(1000))})
	if err != nil || res.ScheduledDeliveryTime == "" {
		t.Fatalf("delayed send through the tunnel: %+v, %v", res, err)
	}
	if _, err := s.SetRoutes(ctx, admin, "did:ext:dan", []model.ContactRoute{{TunnelDID: "did:tunnel:slack", Address: "C1", Platform: "slack"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{}); err != nil {
		t.Fatalf("flush of an entry whose recipient's routes changed: %v", err)
	}
	if got := texts(syncAll(t, s, "did:carol", model.Inbox)); len(got) != 1 || got[0] != "routed, later" {
		t.Fatalf("carol's INBOX after the flush holds %q", got)
	}
	for _, tun := range []string{tunnel.DID, "did:tunnel:slack"} {
		got := syncAll(t, s, tun, model.TunnelOutbox)
		if len(got) == 0 || got[len(got)-1].Record.Route == nil {
			t.Fatalf("%s's outbox after the flush: %+v", tun, got)
		}
		if r := got[len(got)-1].Record.Route; (tun == tunnel.DID) != (r.TargetDID == "did:ext:bob") {
			t.Fatalf("%s carries the message to %s", tun, r.TargetDID)
		}
	}
}

// TestDispatchChecksIngress: a dispatch's ingress_ctx is stored as the
// route of every record it makes, so it is checked like a route, and a
// tunnel may not dispatch in another tunnel's name. A refused dispatch
// stores nothing.
func TestDispatchChecksIngress(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	long := strings.Repeat("a", maxRouteText+1)
	many := map[string]string{}
	for i := range maxExtIDs + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	cases := []struct {
		name  string
		who   model.Identity
		in    model.Route
		field string
		kind  error
	}{
		{"tunnel did with a space", tunnel, model.Route{TunnelDID: "did:tunnel:a b"}, "ingress_ctx.tunnel_did", model.ErrInvalid},
		{"another tunnel", tunnel, model.Route{TunnelDID: "did:tunnel:other"}, "", model.ErrForbidden},
		{"target did with a control character", tunnel, model.Route{TargetDID: "did:x\x01"}, "ingress_ctx.target_did", model.ErrInvalid},
		{"address too long", tunnel, model.Route{Address: long}, "ingress_ctx.address", model.ErrInvalid},
		{"chat id with a newline", tunnel, model.Route{ChatID: "c\n1"}, "ingress_ctx.chat_id", model.ErrInvalid},
		{"too many ext ids", tunnel, model.Route{ExtIDs: many}, "ingress_ctx.ext_ids", model.ErrInvalid},
		{"ext id too long", tunnel, model.Route{ExtIDs: map[string]string{"tg": long}}, "ingress_ctx.ext_ids.tg", model.ErrInvalid},
	}
	for _, tc := range cases {
		_, err := s.Dispatch(ctx, tc.who, &wire.DispatchRequest{Msg: chat("did:ext:u", []string{"did:r"}, tc.name), IngressCtx: &tc.in})
		var me *model.Error
		if !errors.Is(err, tc.kind) || !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: %v; want %v on field %q", tc.name, err, tc.kind, tc.field)
		}
	}
	if got := syncAll(t, s, "did:r", model.Inbox); len(got) != 0 {
		t.Fatalf("refused dispatches stored %q", texts(got))
	}
	for _, ok := range []struct {
		who model.Identity
		in  model.Route
	}{{tunnel, model.Route{TunnelDID: tunnel.DID, Address: "tg:1", ExtIDs: map[string]string{"tg": "42"}}},
		{admin, model.Route{TunnelDID: "did:tunnel:other", Address: "tg:2"}}} {
		if _, err := s.Dispatch(ctx, ok.who, &wire.DispatchRequest{Msg: chat("did:ext:u", []string{"did:r"}, "ok "+ok.in.Address), IngressCtx: &ok.in}); err != nil {
			t.Fatalf("dispatch as %s with %+v: %v", ok.who.DID, ok.in, err)
		}
	}
	if got := syncAll(t, s, "did:r", model.Inbox); len(got) != 2 || got[0].Record.Route == nil || got[0].Record.Route.Address != "tg:1" {
		t.Fatalf("accepted dispatches stored %+v", got)
	}
	_, err := s.SetRoutes(ctx, admin, "did:ext:bob", []model.ContactRoute{{TunnelDID: tunnel.DID, Address: long}})
	var me *model.Error
	if !errors.Is(err, model.ErrInvalid) || !errors.As(err, &me) || me.Field != "routes[0].address" {
		t.Fatalf("a route with a %d-byte address: %v", len(long), err)
	}
}

// TestPeekPassesOverBackoff: a peek (lock_on_take false) sees what a
// claim would: not a record waiting out its retry backoff, until the
// backoff ends.
func TestPeekPassesOverBackoff(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	id := routedSend(t, s)
	got := claimOne(t, s, tunnel, model.TunnelOutbox)
	if _, err := s.ReportDelivery(ctx, tunnel, id, &wire.DeliveryRequest{LeaseID: got.Record.Lease.ID, Result: &wire.DeliveryResult{ErrorCode: "timeout", Retryable: true}}); err != nil {
		t.Fatal(err)
	}
	peek := func() *wire.RecordWithMsg {
		t.Helper()
		res, err := s.Next(ctx, tunnel, tunnel.DID, model.TunnelOutbox, &wire.NextRequest{LockOnTake: ptr(false)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if got := peek(); got != nil {
		t.Fatalf("peek during the backoff = %+v, want nothing (a claim gets nothing)", got.Record)
	}
	if got := claimOne(t, s, tunnel, model.TunnelOutbox); got != nil {
		t.Fatalf("claim during the backoff = %+v", got.Record)
	}
	clk.Advance(time.Second)
	if got := peek(); got == nil || got.Record.RecordID != id || got.Record.State != model.Wait {
		t.Fatalf("peek after the backoff = %+v, want %s waiting", got, id)
	}
}

// TestManualMoveEndsBackoff: a record moved back to its claimable state by
// hand is claimable at once, and a peek sees it as a claim does: its retry
// backoff is cleared with the move.
func TestManualMoveEndsBackoff(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	id := routedSend(t, s)
	got := claimOne(t, s, tunnel, model.TunnelOutbox)
	if _, err := s.ReportDelivery(ctx, tunnel, id, &wire.DeliveryRequest{LeaseID: got.Record.Lease.ID,
		Result: &wire.DeliveryResult{ErrorCode: "429", Retryable: true, RetryAfterMS: 3_600_000}}); err != nil {
		t.Fatal(err)
	}
	for _, to := range []model.State{model.Archived, model.Wait} {
		if _, err := s.SetState(ctx, tunnel, id, &wire.StateRequest{NewState: to}); err != nil {
			t.Fatalf("move to %s: %v", to, err)
		}
	}
	peek, err := s.Next(ctx, tunnel, tunnel.DID, model.TunnelOutbox, &wire.NextRequest{LockOnTake: ptr(false)})
	if err != nil || peek == nil || peek.Record.RecordID != id || peek.Record.Delivery.NextRetryAtMS != 0 {
		t.Fatalf("peek after the move: %+v, %v; want %s with no retry time", peek, err, id)
	}
	if got := claimOne(t, s, tunnel, model.TunnelOutbox); got == nil || got.Record.RecordID != id {
		t.Fatalf("claim after the move: %+v", got)
	}
}
