package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/message"
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
	conv, err := s.Conversations(ctx, agent(bob), wire.ConversationQuery{Owner: bob, Limit: 10})
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

// TestTopicThreads: a topic is a thread within its conversation, so two
// conversations that use the same topic stay apart, and a group's topic
// is the group's.
func TestTopicThreads(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	const grp = "did:test:group"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice, bob}}); err != nil {
		t.Fatal(err)
	}
	topical := func(m *message.Message) *message.Message {
		m.Thread = &message.Thread{Topic: "planning"}
		return m
	}
	for _, m := range []*message.Message{
		topical(chat(alice, []string{carol}, "alice's planning")),
		topical(chat(bob, []string{carol}, "bob's planning")),
		chat(bob, []string{carol}, "bob, no topic"),
		topical(&message.Message{From: grp, Source: alice, Kind: message.KindGroupMsg, Content: message.Content{Content: "the group's planning"}}),
	} {
		if _, err := s.PostSend(ctx, agent(m.LogicalSender()), &wire.PostSendRequest{Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, it := range syncAll(t, s, carol, model.Inbox) {
		got = append(got, it.Record.ThreadKey)
	}
	want := []string{"dm:" + alice + "/topic:planning", "dm:" + bob + "/topic:planning", "dm:" + bob}
	if !slices.Equal(got, want) {
		t.Fatalf("carol's threads %q, want %q", got, want)
	}
	if th := syncAll(t, s, bob, model.Inbox)[0].Record.ThreadKey; th != "group:"+grp+"/topic:planning" {
		t.Fatalf("bob's thread of the group's topic: %q", th)
	}
	if th := syncAll(t, s, alice, model.Outbox)[0].Record.ThreadKey; th != "dm:"+carol+"/topic:planning" {
		t.Fatalf("alice's own copy: %q", th)
	}
}

// TestRepliesContinueTheirTopic: a reply that names no topic lands in its
// parent's, however deep the thread (the topic of a reply's reply is in
// its records, not its body), in a direct conversation and in a group; a
// reply whose author cannot read the parent, or whose parent is unknown,
// starts no topic; a reply's own topic wins.
func TestRepliesContinueTheirTopic(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	const grp = "did:test:group"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice, bob}}); err != nil {
		t.Fatal(err)
	}
	send := func(m *message.Message, topic, replyTo string) string {
		t.Helper()
		if topic != "" || replyTo != "" {
			m.Thread = &message.Thread{Topic: topic, ReplyTo: replyTo}
		}
		res, err := s.PostSend(ctx, agent(m.LogicalSender()), &wire.PostSendRequest{Msg: m})
		if err != nil {
			t.Fatal(err)
		}
		return res.MsgID
	}
	last := func(owner string, box model.BoxKind) string {
		t.Helper()
		items := syncAll(t, s, owner, box)
		return items[len(items)-1].Record.ThreadKey
	}
	want := func(owner string, box model.BoxKind, key string) {
		t.Helper()
		if got := last(owner, box); got != key {
			t.Fatalf("%s's last %s record is in %q, want %q", owner, box, got, key)
		}
	}

	first := send(chat(alice, []string{bob}, "launch plan"), "launch", "")
	reply := send(chat(bob, []string{alice}, "looks good"), "", first)
	want(bob, model.Outbox, "dm:"+alice+"/topic:launch")
	want(alice, model.Inbox, "dm:"+bob+"/topic:launch")
	deeper := send(chat(alice, []string{bob}, "shipping it"), "", reply)
	want(alice, model.Outbox, "dm:"+bob+"/topic:launch")
	send(chat(bob, []string{alice}, "done"), "", deeper)
	want(alice, model.Inbox, "dm:"+bob+"/topic:launch")

	send(chat(bob, []string{alice}, "new subject"), "retro", deeper)
	want(alice, model.Inbox, "dm:"+bob+"/topic:retro")

	// carol never saw the launch thread: her reply to it names no topic of
	// it, in her copy or in alice's.
	send(chat(carol, []string{alice}, "what launch?"), "", first)
	want(carol, model.Outbox, "dm:"+alice)
	want(alice, model.Inbox, "dm:"+carol)
	send(chat(carol, []string{alice}, "about nothing"), "", "cymsg:0000000000000000000000000000000000000000000000000000000000000000")
	want(alice, model.Inbox, "dm:"+carol)

	gmsg := func(author, text string) *message.Message {
		return &message.Message{From: grp, Source: author, Kind: message.KindGroupMsg, Content: message.Content{Content: text}}
	}
	topic := send(gmsg(alice, "agenda"), "agenda", "")
	answer := send(gmsg(bob, "item one"), "", topic)
	want(alice, model.Inbox, "group:"+grp+"/topic:agenda")
	send(gmsg(alice, "noted"), "", answer)
	want(bob, model.Inbox, "group:"+grp+"/topic:agenda")
	want(grp, model.GroupInbox, "group:"+grp+"/topic:agenda")
}
