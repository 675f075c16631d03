package core

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestBlockingAGroupMutesIt: a member that blocks a group (delivery to
// members) gets none of its messages, whoever writes them, while the
// others do; unblocked, it gets them again.
func TestBlockingAGroupMutesIt(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	const grp = "did:test:group"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice, bob, carol}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(ctx, agent(carol), carol, grp, true); err != nil {
		t.Fatal(err)
	}
	post := func(text string) *wire.PostSendResult {
		t.Helper()
		res, err := s.PostSend(ctx, agent(alice), &wire.PostSendRequest{Msg: &message.Message{From: grp, Source: alice,
			Kind: message.KindGroupMsg, Content: message.Content{Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := post("muted for carol")
	if !slices.Equal(res.LocalRecipients, []string{bob}) {
		t.Fatalf("delivered to %v, want bob alone", res.LocalRecipients)
	}
	if n := len(syncAll(t, s, carol, model.Inbox)); n != 0 {
		t.Fatalf("carol, who blocks the group, has %d records", n)
	}
	if _, err := s.Block(ctx, agent(carol), carol, grp, false); err != nil {
		t.Fatal(err)
	}
	if res := post("heard again"); !slices.Equal(res.LocalRecipients, []string{bob, carol}) {
		t.Fatalf("after the unblock delivered to %v", res.LocalRecipients)
	}
}

// TestContactsRefuseLoops: an owner cannot block itself, nor a group
// subscribe to itself.
func TestContactsRefuseLoops(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	var me *model.Error
	if _, err := s.Block(ctx, agent(bob), bob, bob, true); !errors.As(err, &me) || me.Field != "did" {
		t.Fatalf("self-block: %v", err)
	}
	if _, err := s.SetSubscribers(ctx, admin, "did:test:g", &wire.SubscribersRequest{Subscribers: []string{alice, "did:test:g"}}); !errors.As(err, &me) || me.Field != "subscribers[1]" {
		t.Fatalf("a group in itself: %v", err)
	}
}
