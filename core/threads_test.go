package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestDirectConversationThreads: a conversation among the same people is
// one thread on each side, whoever writes: alice to bob and carol, bob's
// reply to both, carol's reply to alice alone (a conversation of two, its
// own thread), and a note to self.
func TestDirectConversationThreads(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	post := func(from string, to ...string) {
		t.Helper()
		if _, err := s.PostSend(ctx, agent(from), &wire.PostSendRequest{Msg: chat(from, to, from+" to "+strings.Join(to, ","))}); err != nil {
			t.Fatal(err)
		}
	}
	post(alice, bob, carol)
	post(bob, alice, carol)
	post(carol, alice)
	post(alice, alice)
	threads := func(owner string, box model.BoxKind) []string {
		var out []string
		for _, it := range syncAll(t, s, owner, box) {
			out = append(out, it.Record.ThreadKey)
		}
		return out
	}
	for _, c := range []struct {
		owner string
		box   model.BoxKind
		want  []string
	}{
		{alice, model.Outbox, []string{"dm:" + bob + "," + carol, "dm:" + alice}},
		{alice, model.Inbox, []string{"dm:" + bob + "," + carol, "dm:" + carol, "dm:" + alice}},
		{bob, model.Inbox, []string{"dm:" + alice + "," + carol}},
		{bob, model.Outbox, []string{"dm:" + alice + "," + carol}},
		{carol, model.Inbox, []string{"dm:" + alice + "," + bob, "dm:" + alice + "," + bob}},
		{carol, model.Outbox, []string{"dm:" + alice}},
	} {
		if got := threads(c.owner, c.box); !slices.Equal(got, c.want) {
			t.Errorf("%s's %s threads: %q, want %q", c.owner, c.box, got, c.want)
		}
	}
	conv, err := s.Conversations(ctx, agent(bob), bob, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(conv.Items) != 1 || conv.Items[0].ThreadKey != "dm:"+alice+","+carol {
		t.Fatalf("bob's conversations: %+v, want the one of three", conv.Items)
	}
}

// TestLargeDirectConversationThread: beyond nine people a conversation's
// key is a digest of all of them, the same for everyone, and short.
func TestLargeDirectConversationThread(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	var to []string
	for i := range 12 {
		to = append(to, fmt.Sprintf("did:test:p%02d", i))
	}
	if _, err := s.PostSend(ctx, agent(alice), &wire.PostSendRequest{Msg: chat(alice, to, "all hands")}); err != nil {
		t.Fatal(err)
	}
	want := syncAll(t, s, alice, model.Outbox)[0].Record.ThreadKey
	if !strings.HasPrefix(want, "dm#") || len(want) != 3+32 {
		t.Fatalf("alice's thread %q, want dm# and 32 hex digits", want)
	}
	for _, d := range to {
		if got := syncAll(t, s, d, model.Inbox)[0].Record.ThreadKey; got != want {
			t.Fatalf("%s's thread %q, want %q", d, got, want)
		}
	}
}
