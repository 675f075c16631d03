package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestDelayedSendDroppedWhenItWouldBeRefused: a delayed post_send that a
// send made at its due time would refuse, or that would reach no one, is
// dropped then with a message.schedule_dropped event saying why, not
// written as delivered: a recipient that became a group (whose own INBOX
// no member reads), or recipients that all block the author now. One
// recipient of two blocking the author leaves the other's copy.
func TestDelayedSendDroppedWhenItWouldBeRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		to      []string
		change  func(t *testing.T, s *Service)
		why     string   // in the dropped event's detail; "" for no drop
		reached []string // whose INBOX has the message
	}{
		{name: "recipient became a group", to: []string{"did:g2"}, why: "is a group",
			change: func(t *testing.T, s *Service) {
				if _, err := s.SetSubscribers(context.Background(), admin, "did:g2",
					&wire.SubscribersRequest{Subscribers: []string{"did:x", "did:y"}}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "every recipient blocks the author", to: []string{"did:x"}, why: "blocks its author",
			change: func(t *testing.T, s *Service) { block(t, s, "did:x", "did:alice") }},
		{name: "one recipient of two blocks the author", to: []string{"did:x", "did:y"}, reached: []string{"did:y"},
			change: func(t *testing.T, s *Service) { block(t, s, "did:x", "did:alice") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			s := newService(t, clk)
			ctx := context.Background()
			alice := agent("did:alice")
			sent, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: chat(alice.DID, tc.to, "later"), DelayMS: ptr(int64(60_000))})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, s)
			clk.Advance(2 * time.Minute)
			if _, err := s.materializeDue(ctx, clk.Now().UnixMilli(), ""); err != nil {
				t.Fatal(err)
			}
			for _, did := range []string{"did:g2", "did:x", "did:y"} {
				want := 0
				for _, r := range tc.reached {
					if r == did {
						want = 1
					}
				}
				if got := syncAll(t, s, did, model.Inbox); len(got) != want {
					t.Fatalf("%s's INBOX holds %q; want %d", did, texts(got), want)
				}
			}
			var dropped []model.Event
			for _, e := range allEventsOf(t, s) {
				if e.Type == model.EventMsgDropped && e.MsgID == sent.MsgID {
					dropped = append(dropped, e)
				}
			}
			outbox := syncAll(t, s, alice.DID, model.Outbox)
			if tc.why == "" {
				if len(dropped) != 0 || len(outbox) != 1 {
					t.Fatalf("dropped %+v, outbox %d; want no drop and the author's copy", dropped, len(outbox))
				}
				return
			}
			if len(dropped) != 1 || !strings.Contains(dropped[0].Detail, tc.why) || dropped[0].Owner != alice.DID {
				t.Fatalf("message.schedule_dropped events %+v; want one of alice's saying %q", dropped, tc.why)
			}
			if len(outbox) != 0 {
				t.Fatalf("the author's OUTBOX holds %d records for a dropped send", len(outbox))
			}
		})
	}
}

func block(t *testing.T, s *Service, owner, blocked string) {
	t.Helper()
	if _, err := s.Block(context.Background(), admin, owner, blocked, true); err != nil {
		t.Fatal(err)
	}
}

// TestDelayedGroupPostNoMemberTakes: a delayed group post that no other
// member takes by its due time (each blocks the author) still goes to the
// group's log, as a post made then does; it is not dropped.
func TestDelayedGroupPostNoMemberTakes(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const grp = "did:group:quiet"
	alice := agent("did:alice")
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice.DID, "did:x"}}); err != nil {
		t.Fatal(err)
	}
	m := chat(grp, nil, "to the log")
	m.Source, m.Kind = alice.DID, message.KindGroupMsg
	sent, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: m, DelayMS: ptr(int64(60_000))})
	if err != nil {
		t.Fatal(err)
	}
	block(t, s, "did:x", alice.DID)
	clk.Advance(2 * time.Minute)
	if _, err := s.materializeDue(ctx, clk.Now().UnixMilli(), ""); err != nil {
		t.Fatal(err)
	}
	if got := syncAll(t, s, grp, model.GroupInbox); len(got) != 1 || got[0].Record.MsgID != sent.MsgID {
		t.Fatalf("the group's log holds %q; want the post", texts(got))
	}
	if got := syncAll(t, s, "did:x", model.Inbox); len(got) != 0 {
		t.Fatalf("the member who blocks the author got %q", texts(got))
	}
	for _, e := range allEventsOf(t, s) {
		if e.Type == model.EventMsgDropped {
			t.Fatalf("the post was dropped: %+v", e)
		}
	}
}
