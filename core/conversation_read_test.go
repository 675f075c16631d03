package core

import (
	"context"
	"errors"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestReadConversation: a conversation is read up to a seq, then whole,
// leaving other conversations and a record claimed meanwhile as they
// are; bad input and another owner's conversation change nothing.
func TestReadConversation(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	bob := agent("did:bob")
	var seqs []int64
	for _, text := range []string{"one", "two", "three", "four"} {
		mustDispatch(t, s, chat("did:alice", []string{"did:bob"}, text))
	}
	for _, it := range syncAll(t, s, "did:bob", model.Inbox) {
		seqs = append(seqs, it.Record.Seq)
	}
	mustDispatch(t, s, chat("did:carol", []string{"did:bob"}, "other"))
	unread := func() map[string]int64 {
		t.Helper()
		res, err := s.Conversations(ctx, bob, wire.ConversationQuery{Owner: "did:bob"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, c := range res.Items {
			out[c.ThreadKey] = c.UnreadCount
		}
		return out
	}
	read := func(req wire.ReadConversationRequest) *wire.ReadConversationResult {
		t.Helper()
		res, err := s.ReadConversation(ctx, bob, "did:bob", &req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The first one is claimed: a read passes over it (it still counts as
	// unread, being read).
	if held, err := s.Next(ctx, bob, "did:bob", model.Inbox, &wire.NextRequest{}); err != nil || held.Record.Seq != seqs[0] {
		t.Fatalf("claim: %+v, %v", held, err)
	}
	if res := read(wire.ReadConversationRequest{ThreadKey: "dm:did:alice", UpToSeq: seqs[2]}); res.Read != 2 || res.More {
		t.Fatalf("read up to the third: %+v; want 2 (the first is claimed)", res)
	}
	if u := unread(); u["dm:did:alice"] != 2 || u["dm:did:carol"] != 1 {
		t.Fatalf("unread after reading up to a seq: %v; want the claimed one and the fourth", u)
	}
	if res := read(wire.ReadConversationRequest{ThreadKey: "dm:did:alice"}); res.Read != 1 {
		t.Fatalf("read the rest: %+v; want 1", res)
	}
	if u := unread(); u["dm:did:alice"] != 1 || u["dm:did:carol"] != 1 {
		t.Fatalf("unread after reading the whole conversation: %v; want only the claimed one", u)
	}
	for _, tc := range []struct {
		who   model.Identity
		owner string
		req   wire.ReadConversationRequest
		kind  error
	}{
		{bob, "did:bob", wire.ReadConversationRequest{}, model.ErrInvalid},
		{bob, "did:bob", wire.ReadConversationRequest{ThreadKey: "dm:did:carol", UpToSeq: -1}, model.ErrInvalid},
		{agent("did:eve"), "did:bob", wire.ReadConversationRequest{ThreadKey: "dm:did:carol"}, model.ErrForbidden},
	} {
		if _, err := s.ReadConversation(ctx, tc.who, tc.owner, &tc.req); !errors.Is(err, tc.kind) {
			t.Fatalf("ReadConversation(%s, %+v): %v; want %v", tc.who.DID, tc.req, err, tc.kind)
		}
	}
	if u := unread(); u["dm:did:carol"] != 1 {
		t.Fatalf("a refused read changed carol's conversation: %v", u)
	}
}
