package core

import (
	"context"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestReadReceiptReadsOwnCopy: a reader's READED receipt also reads its own
// INBOX copy when that is still UNREAD, with the conversation's unread
// count; a copy the reader has claimed meanwhile is left to its claim, and
// other statuses change no record.
func TestReadReceiptReadsOwnCopy(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	const grp = "did:group:team"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{"did:r1", "did:r2", "did:r3"}}); err != nil {
		t.Fatal(err)
	}
	post := mustDispatch(t, s, &message.Message{From: grp, Source: "did:r1", Kind: message.KindGroupMsg, Content: message.Content{Content: "standup"}})
	receipt := func(reader string, st model.ReceiptStatus) {
		t.Helper()
		if _, err := s.SetReadState(ctx, agent(reader), &wire.ReceiptRequest{MsgID: post.MsgID, ReaderDID: reader, GroupID: grp, Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	own := func(reader string) model.Record {
		t.Helper()
		got, err := s.GetRecord(ctx, agent(reader), model.RecordID(reader, model.Inbox, post.MsgID, ""), false)
		if err != nil {
			t.Fatal(err)
		}
		return got.Record
	}
	unread := func(reader string) int64 {
		t.Helper()
		res, err := s.Conversations(ctx, agent(reader), wire.ConversationQuery{Owner: reader})
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("%s's conversations: %+v, %v", reader, res, err)
		}
		return res.Items[0].UnreadCount
	}

	receipt("did:r2", model.ReceiptReading)
	if r := own("did:r2"); r.State != model.Unread {
		t.Fatalf("a READING receipt moved r2's copy to %s", r.State)
	}
	receipt("did:r2", model.ReceiptReaded)
	if r, n := own("did:r2"), unread("did:r2"); r.State != model.Readed || n != 0 {
		t.Fatalf("after r2's READED receipt: copy %s, unread %d; want READED, 0", r.State, n)
	}
	receipt("did:r2", model.ReceiptReaded) // again: nothing left to read

	held, err := s.Next(ctx, agent("did:r3"), "did:r3", model.Inbox, &wire.NextRequest{})
	if err != nil || held == nil {
		t.Fatalf("r3's claim: %+v, %v", held, err)
	}
	receipt("did:r3", model.ReceiptReaded)
	if r := own("did:r3"); r.State != model.Reading || r.Lease == nil {
		t.Fatalf("r3's claimed copy after its receipt: %s; want it left to its claim", r.State)
	}
}
