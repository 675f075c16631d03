package core

import (
	"context"
	"reflect"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A send repeated with its idempotency key writes nothing and is answered
// as the first one was, however the recipients changed in between: a
// recipient who has a route since does not get the message again through
// it, nor a member who joined the group since.
func TestKeyedRepeatWritesNothing(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock())
	ctx := context.Background()
	const dora, tunnel2 = "did:agent:dora", "did:tunnel:two"

	send := func() *wire.PostSendResult {
		t.Helper()
		res, err := s.PostSend(ctx, agent(alice), &wire.PostSendRequest{Msg: chat(alice, []string{dora}, "hi"), IdempotencyKey: "k-1"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := send()
	if len(first.LocalRecipients) != 1 || len(first.Deliveries) != 0 {
		t.Fatalf("first send: %+v", first)
	}
	for _, tun := range []string{tunnel.DID, tunnel2} {
		if _, err := s.SetRoutes(ctx, admin, dora, []model.ContactRoute{{TunnelDID: tun, Address: "a:" + tun}}); err != nil {
			t.Fatal(err)
		}
		if again := send(); !reflect.DeepEqual(again, first) {
			t.Fatalf("repeat after a route through %s: %+v, want the first answer %+v", tun, again, first)
		}
		if items := syncAll(t, s, tun, model.TunnelOutbox); len(items) != 0 {
			t.Fatalf("the repeat went out through %s: %d records", tun, len(items))
		}
	}
	if items := syncAll(t, s, dora, model.Inbox); len(items) != 1 {
		t.Fatalf("dora's inbox holds %d records, want the first send's one", len(items))
	}

	// The same for a group's message and a dispatch: a member who joined
	// since gets nothing from the repeat.
	const grp = "did:group:g"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice, bob}}); err != nil {
		t.Fatal(err)
	}
	post := func() *wire.DispatchResult {
		t.Helper()
		m := &message.Message{From: grp, Source: bob, Kind: message.KindGroupMsg, Content: message.Content{Content: "standup"}}
		res, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: m, IdempotencyKey: "g-1"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	firstPost := post()
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice, bob, carol}}); err != nil {
		t.Fatal(err)
	}
	if again := post(); !reflect.DeepEqual(again, firstPost) {
		t.Fatalf("repeated group post: %+v, want the first answer %+v", again, firstPost)
	}
	if items := syncAll(t, s, carol, model.Inbox); len(items) != 0 {
		t.Fatalf("carol, who joined after the post, got %d records from its repeat", len(items))
	}
}
