package core

import (
	"context"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func memberGroup(t *testing.T) (*Service, *clock, string) {
	t.Helper()
	clk := newClock()
	s := newService(t, clk)
	if _, err := s.SetSubscribers(context.Background(), admin, "did:group:g", &wire.SubscribersRequest{Subscribers: []string{"did:agent:ann", "did:agent:bob"}}); err != nil {
		t.Fatal(err)
	}
	res := mustDispatch(t, s, &message.Message{From: "did:group:g", Source: "did:agent:ann", Kind: message.KindGroupMsg, Content: message.Content{Content: "hi all"}})
	return s, clk, res.MsgID
}

func receiptsOf(t *testing.T, s *Service, msgID string) []model.Receipt {
	t.Helper()
	got, err := s.ListReceipts(context.Background(), admin, wire.ReceiptQuery{MsgID: msgID})
	if err != nil {
		t.Fatal(err)
	}
	return got.Items
}

// A member that rejected (or accepted) a group message with a reason and
// then acks its INBOX record (the usual order: read, decide, ack) keeps
// its own receipt: the mechanical ack must not downgrade it to READED.
func TestAckKeepsEarlierExplicitReceipt(t *testing.T) {
	s, clk, msgID := memberGroup(t)
	ctx := context.Background()
	bob := agent("did:agent:bob")
	rec, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || rec == nil {
		t.Fatalf("claim: %+v %v", rec, err)
	}
	if _, err := s.SetReadState(ctx, bob, &wire.ReceiptRequest{MsgID: msgID, ReaderDID: bob.DID, GroupID: "did:group:g",
		Status: model.ReceiptRejected, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if _, err := s.ReportDelivery(ctx, bob, rec.Record.RecordID, &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, LeaseID: rec.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	got := receiptsOf(t, s, msgID)
	if len(got) != 1 || got[0].Status != model.ReceiptRejected || got[0].Reason != "spam" {
		t.Fatalf("after the ack, bob's REJECTED receipt became %+v", got)
	}
}

// ack+next (the same write claims the next record: UpdateThenClaim) writes
// the member's receipt too.
func TestAckNextWritesReceipt(t *testing.T) {
	s, clk, msgID := memberGroup(t)
	ctx := context.Background()
	bob := agent("did:agent:bob")
	mustDispatch(t, s, chat("did:agent:ann", []string{bob.DID}, "second"))
	rec, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || rec == nil || rec.Record.MsgID != msgID {
		t.Fatalf("claim: %+v %v", rec, err)
	}
	clk.Advance(time.Second)
	res, err := s.ReportDelivery(ctx, bob, rec.Record.RecordID, &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true},
		LeaseID: rec.Record.Lease.ID, Next: &wire.NextRequest{}})
	if err != nil || res.Next == nil {
		t.Fatalf("ack+next: %+v %v", res, err)
	}
	if got := receiptsOf(t, s, msgID); len(got) != 1 || got[0].Status != model.ReceiptReaded {
		t.Fatalf("ack+next receipts: %+v", got)
	}
}

// SetState READED (a hand ack) writes the receipt too.
func TestSetStateWritesReceipt(t *testing.T) {
	s, clk, msgID := memberGroup(t)
	ctx := context.Background()
	bob := agent("did:agent:bob")
	rec, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || rec == nil {
		t.Fatalf("claim: %+v %v", rec, err)
	}
	clk.Advance(time.Second)
	if _, err := s.SetState(ctx, bob, rec.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: rec.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	if got := receiptsOf(t, s, msgID); len(got) != 1 || got[0].Status != model.ReceiptReaded {
		t.Fatalf("SetState READED receipts: %+v", got)
	}
}

// The author of a message sent through a tunnel reads its TUNNEL_OUTBOX
// record without the recipient's route (address, chat id): routes the
// author may not read through GET /v1/routes/{did} either.
func TestAuthorDoesNotSeeRecipientRoute(t *testing.T) {
	s := newService(t, newClock())
	ctx := context.Background()
	id := routedSend(t, s) // did:alice -> did:ext:bob, route tg:42
	if _, err := s.Routes(ctx, agent("did:alice"), "did:ext:bob"); err == nil {
		t.Fatal("alice may read bob's routes: this test's premise is wrong")
	}
	got, err := s.GetRecord(ctx, agent("did:alice"), id, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Record.Route; r != nil && (r.Address != "" || r.ChatID != "" || r.AccountID != "") {
		t.Fatalf("the author reads the recipient's route it may not read otherwise: %+v", *r)
	}
}
