package core

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestAgentLimits: what one agent token may make is bounded where each
// request would multiply writes (a group of its own DID, a message's
// recipients, consumers of its boxes); an admin's groups and consumers
// are not, and a refusal names the field and changes nothing.
func TestAgentLimits(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	eve := agent("did:eve")
	dids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("did:m:%05d", i)
		}
		return out
	}
	field := func(err error, kind error, want string) {
		t.Helper()
		var me *model.Error
		if !errors.Is(err, kind) || !errors.As(err, &me) || me.Field != want {
			t.Fatalf("%v; want %v on %s", err, kind, want)
		}
	}

	_, err := s.SetSubscribers(ctx, eve, eve.DID, &wire.SubscribersRequest{Subscribers: dids(MaxAgentGroup + 1)})
	field(err, model.ErrInvalid, "subscribers")
	if got, err := s.Subscribers(ctx, admin, eve.DID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a refused group was made: %+v, %v", got, err)
	}
	if _, err := s.SetSubscribers(ctx, eve, eve.DID, &wire.SubscribersRequest{Subscribers: dids(MaxAgentGroup)}); err != nil {
		t.Fatalf("an agent's group at the bound: %v", err)
	}
	if _, err := s.SetSubscribers(ctx, admin, "did:group:big", &wire.SubscribersRequest{Subscribers: dids(MaxAgentGroup + 1)}); err != nil {
		t.Fatalf("an admin's larger group: %v", err)
	}

	_, err = s.PostSend(ctx, agent("did:alice"), &wire.PostSendRequest{Msg: &message.Message{From: "did:alice",
		To: dids(message.MaxRecipients + 1), Content: message.Content{Content: "to everyone"}}})
	field(err, model.ErrInvalid, "msg.to")
	_, err = s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: &message.Message{From: "did:ext:x",
		To: dids(message.MaxRecipients + 1), Content: message.Content{Content: "to everyone"}}})
	field(err, model.ErrInvalid, "msg.to")
	if _, err := s.PostSend(ctx, admin, &wire.PostSendRequest{Msg: &message.Message{From: "did:alice",
		To: dids(message.MaxRecipients + 1), Content: message.Content{Content: "an admin's announcement"}}}); err != nil {
		t.Fatalf("an admin's send to more: %v", err)
	}

	for i := range MaxAgentConsumers {
		if _, err := s.CreateConsumer(ctx, eve, &wire.ConsumerRequest{Name: fmt.Sprintf("c%d", i), SourceOwner: eve.DID, SourceBox: "INBOX"}); err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
	}
	_, err = s.CreateConsumer(ctx, eve, &wire.ConsumerRequest{Name: "one-more", SourceOwner: eve.DID, SourceBox: "INBOX"})
	field(err, model.ErrConflict, "name")
	if _, err := s.CreateConsumer(ctx, admin, &wire.ConsumerRequest{Owner: eve.DID, Name: "by-admin", SourceOwner: eve.DID, SourceBox: "INBOX"}); err != nil {
		t.Fatalf("an admin's consumer past the agent's bound: %v", err)
	}
}

// TestAgentConsumerBoundUnderConcurrency: creations racing each other do
// not all see room under the bound.
func TestAgentConsumerBoundUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	eve := agent("did:eve")
	const tries = MaxAgentConsumers + 50
	errs := make(chan error, tries)
	for i := range tries {
		go func() {
			_, err := s.CreateConsumer(ctx, eve, &wire.ConsumerRequest{Name: fmt.Sprintf("c%d", i), SourceOwner: eve.DID, SourceBox: "INBOX"})
			errs <- err
		}()
	}
	made := 0
	for range tries {
		switch err := <-errs; {
		case err == nil:
			made++
		case !errors.Is(err, model.ErrConflict):
			t.Fatalf("a creation failed otherwise: %v", err)
		}
	}
	if made != MaxAgentConsumers {
		t.Fatalf("%d consumers made by %d racing creations, want %d", made, tries, MaxAgentConsumers)
	}
}
