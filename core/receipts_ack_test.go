package core

import (
	"context"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A member's ack of a group message in its INBOX is a read receipt of the
// group, as a read of a GROUP_INBOX message would be; a receipt the member
// sets afterwards still wins, and acking a direct message makes none.
func TestMemberAckIsAReceipt(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const group, ann, bob = "did:group:g", "did:agent:ann", "did:agent:bob"
	if _, err := s.SetSubscribers(ctx, admin, group, &wire.SubscribersRequest{Subscribers: []string{ann, bob}}); err != nil {
		t.Fatal(err)
	}
	res := mustDispatch(t, s, &message.Message{From: group, Source: ann, Kind: message.KindGroupMsg, Content: message.Content{Content: "hi all"}})
	direct := mustDispatch(t, s, chat(ann, []string{bob}, "just you"))
	for range 2 {
		rec, err := s.Next(ctx, agent(bob), bob, model.Inbox, &wire.NextRequest{})
		if err != nil || rec == nil {
			t.Fatalf("claim: %+v, %v", rec, err)
		}
		clk.Advance(time.Second)
		if _, err := s.ReportDelivery(ctx, agent(bob), rec.Record.RecordID, &wire.DeliveryRequest{
			Result: &wire.DeliveryResult{OK: true}, LeaseID: rec.Record.Lease.ID}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListReceipts(ctx, agent(ann), wire.ReceiptQuery{MsgID: res.MsgID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 || got.Items[0].Reader != bob || got.Items[0].GroupID != group || got.Items[0].Status != model.ReceiptReaded {
		t.Fatalf("receipts of the group message: %+v", got.Items)
	}
	if d, err := s.ListReceipts(ctx, admin, wire.ReceiptQuery{MsgID: direct.MsgID}); err != nil || len(d.Items) != 0 {
		t.Fatalf("receipts of a direct message: %+v, %v", d, err)
	}
	clk.Advance(time.Second)
	if _, err := s.SetReadState(ctx, agent(bob), &wire.ReceiptRequest{MsgID: res.MsgID, ReaderDID: bob, GroupID: group,
		Status: model.ReceiptAccepted}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.ListReceipts(ctx, agent(ann), wire.ReceiptQuery{MsgID: res.MsgID})
	if len(got.Items) != 1 || got.Items[0].Status != model.ReceiptAccepted {
		t.Fatalf("after bob's own receipt: %+v", got.Items)
	}
}
