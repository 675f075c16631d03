package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	bob   = "did:test:bob"
	alice = "did:test:alice"
	carol = "did:test:carol"
)

func TestMatchFilter(t *testing.T) {
	t.Parallel()
	m := &message.Message{From: alice, Source: "did:test:author", To: []string{bob, carol}, Kind: message.KindChat,
		Thread: &message.Thread{Topic: "deploy"}, Workspace: "alpha", Mentions: []string{"did:test:ops"},
		Content: message.Content{Title: "Nightly Build", Content: "The build FAILED on arm64"},
		Meta:    []byte(`{"tags":["urgent"]}`)}
	rec := &model.Record{Tags: []string{"group:did:test:g"}}
	cases := []struct {
		name string
		f    model.ConsumerFilter
		want bool
	}{
		{"empty takes all", model.ConsumerFilter{}, true},
		{"from", model.ConsumerFilter{From: []string{carol, alice}}, true},
		{"from miss", model.ConsumerFilter{From: []string{carol}}, false},
		{"from matches a relayed message's author", model.ConsumerFilter{From: []string{"did:test:author"}}, true},
		{"to any", model.ConsumerFilter{To: []string{carol}}, true},
		{"to miss", model.ConsumerFilter{To: []string{alice}}, false},
		{"kind", model.ConsumerFilter{Kind: []string{message.KindChat}}, true},
		{"kind miss", model.ConsumerFilter{Kind: []string{message.KindNotify}}, false},
		{"topic", model.ConsumerFilter{Topic: []string{"deploy"}}, true},
		{"topic miss", model.ConsumerFilter{Topic: []string{"billing"}}, false},
		{"record tag", model.ConsumerFilter{Tags: []string{"group:did:test:g"}}, true},
		{"meta tag", model.ConsumerFilter{Tags: []string{"urgent"}}, true},
		{"tag miss", model.ConsumerFilter{Tags: []string{"starred"}}, false},
		{"mention", model.ConsumerFilter{Mentions: []string{"did:test:ops"}}, true},
		{"mention miss", model.ConsumerFilter{Mentions: []string{bob}}, false},
		{"workspace", model.ConsumerFilter{Workspace: []string{"beta", "alpha"}}, true},
		{"workspace miss", model.ConsumerFilter{Workspace: []string{"beta"}}, false},
		{"text in content ignoring case", model.ConsumerFilter{Text: "failed on ARM"}, true},
		{"text in title", model.ConsumerFilter{Text: "nightly"}, true},
		{"text miss", model.ConsumerFilter{Text: "succeeded"}, false},
		{"all fields AND", model.ConsumerFilter{From: []string{alice}, Workspace: []string{"alpha"}, Text: "build"}, true},
		{"one field fails the AND", model.ConsumerFilter{From: []string{alice}, Workspace: []string{"beta"}, Text: "build"}, false},
	}
	for _, tc := range cases {
		if got := matchFilter(&tc.f, rec, m); got != tc.want {
			t.Errorf("%s: match = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A message without a thread never matches a topic filter.
	if matchFilter(&model.ConsumerFilter{Topic: []string{""}}, rec, &message.Message{From: alice}) {
		t.Error("topic filter matched a message without a thread")
	}
}

// sendTo dispatches one chat message per text to bob, with the given
// workspace, and returns nothing: the texts are the identities.
func sendTo(t *testing.T, s *Service, workspace string, texts ...string) {
	t.Helper()
	for _, txt := range texts {
		m := chat(alice, []string{bob}, txt)
		m.Workspace = workspace
		mustDispatch(t, s, m)
	}
}

func createConsumer(t *testing.T, s *Service, name string, f model.ConsumerFilter, start string, after *int64) *wire.ConsumerInfo {
	t.Helper()
	info, err := s.CreateConsumer(context.Background(), agent(bob), &wire.ConsumerRequest{Name: name,
		SourceOwner: bob, SourceBox: "inbox", Filter: f, Start: start, AfterSeq: after})
	if err != nil {
		t.Fatalf("create consumer %s: %v", name, err)
	}
	return info
}

func pumpAll(t *testing.T, s *Service) {
	t.Helper()
	if err := s.PumpConsumers(context.Background()); err != nil {
		t.Fatalf("pump: %v", err)
	}
}

func TestConsumersTakeTheirFilteredSetsIndependently(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	sendTo(t, s, "alpha", "a1", "a2")
	sendTo(t, s, "beta", "b1")
	createConsumer(t, s, "ws-alpha", model.ConsumerFilter{Workspace: []string{"alpha"}}, "", nil)
	createConsumer(t, s, "ws-beta", model.ConsumerFilter{Workspace: []string{"beta"}}, "", nil)
	createConsumer(t, s, "all", model.ConsumerFilter{}, wire.StartNow, nil)
	sendTo(t, s, "beta", "b2")
	sendTo(t, s, "alpha", "a3")
	pumpAll(t, s)

	for name, want := range map[string][]string{
		"ws-alpha": {"a1", "a2", "a3"},
		"ws-beta":  {"b1", "b2"},
		"all":      {"b2", "a3"}, // started at "now": the backlog is not its
	} {
		items := syncAll(t, s, bob, model.ConsumerBox(name))
		if got := texts(items); !slices.Equal(got, want) {
			t.Errorf("consumer %s got %v, want %v", name, got, want)
		}
		for i, it := range items {
			if it.Record.Seq != int64(i+1) || it.Record.State != model.Unread || it.Record.Owner != bob {
				t.Errorf("consumer %s record %d: %+v", name, i, it.Record)
			}
		}
	}
	// A second pump finds nothing new: fan-out is exactly once.
	pumpAll(t, s)
	if n := len(syncAll(t, s, bob, model.ConsumerBox("ws-alpha"))); n != 3 {
		t.Fatalf("after a second pump ws-alpha has %d records", n)
	}

	// ws-alpha claims a record and fails it for good; ws-beta and the
	// source box do not notice.
	got, err := s.Next(ctx, agent(bob), bob, model.ConsumerBox("ws-alpha"), &wire.NextRequest{})
	if err != nil || got == nil {
		t.Fatalf("claim on ws-alpha: %v, %v", got, err)
	}
	if _, err := s.ReportDelivery(ctx, agent(bob), got.Record.RecordID, &wire.DeliveryRequest{
		Result: &wire.DeliveryResult{ErrorCode: "bad", ErrorMessage: "cannot handle"}, LeaseID: got.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRecord(ctx, agent(bob), got.Record.RecordID, false); r.Record.State != model.Dead {
		t.Fatalf("failed record is %s, want DEAD", r.Record.State)
	}
	all := syncAll(t, s, bob, model.ConsumerBox("all"))
	for _, it := range append(all, syncAll(t, s, bob, model.Inbox)...) {
		if it.Record.State != model.Unread {
			t.Fatalf("another box's record changed: %+v", it.Record)
		}
	}
	// ws-beta claims and acks its own copy of b2 while "all" keeps its copy.
	gb, err := s.Next(ctx, agent(bob), bob, model.ConsumerBox("ws-beta"), &wire.NextRequest{})
	if err != nil || gb == nil {
		t.Fatalf("claim on ws-beta: %v, %v", gb, err)
	}
	if _, err := s.SetState(ctx, agent(bob), gb.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: gb.Record.Lease.ID}); err != nil {
		t.Fatal(err)
	}
	if st := syncAll(t, s, bob, model.ConsumerBox("all"))[0].Record.State; st != model.Unread {
		t.Fatalf("ws-beta's ack changed all's copy to %s", st)
	}
}

func TestConsumerStartPositionsAndBackfill(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	var texts600 []string
	for i := range 600 { // more than one fan-out step
		texts600 = append(texts600, fmt.Sprintf("m%03d", i))
	}
	sendTo(t, s, "", texts600...)
	createConsumer(t, s, "from-start", model.ConsumerFilter{}, wire.StartBeginning, nil)
	createConsumer(t, s, "after-590", model.ConsumerFilter{}, "", ptr(int64(590)))
	now := createConsumer(t, s, "now", model.ConsumerFilter{}, wire.StartNow, nil)
	if now.SourceSeq != 600 || now.SourceLastSeq != 600 {
		t.Fatalf("start now: %+v", now)
	}
	sendTo(t, s, "", "late")
	pumpAll(t, s)
	if got := texts(syncAll(t, s, bob, model.ConsumerBox("from-start"))); len(got) != 601 || !slices.Equal(got[:600], texts600) || got[600] != "late" {
		t.Fatalf("from-start got %d records, first/last %v", len(got), []string{got[0], got[len(got)-1]})
	}
	if got := texts(syncAll(t, s, bob, model.ConsumerBox("after-590"))); !slices.Equal(got, append(slices.Clone(texts600[590:]), "late")) {
		t.Fatalf("after-590 got %v", got)
	}
	if got := texts(syncAll(t, s, bob, model.ConsumerBox("now"))); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("now got %v", got)
	}
	info, err := s.GetConsumer(context.Background(), agent(bob), bob, "from-start")
	if err != nil {
		t.Fatal(err)
	}
	if info.SourceSeq != 601 || info.LastSeq != 601 || info.AckedSeq != 0 || info.Box != model.ConsumerBox("from-start") {
		t.Fatalf("progress: %+v", info)
	}
}

func TestConsumerFedInBackground(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	createConsumer(t, s, "live", model.ConsumerFilter{Text: "wanted"}, wire.StartNow, nil)
	got := make(chan *wire.RecordWithMsg, 1)
	go func() {
		r, err := s.Next(ctx, agent(bob), bob, model.ConsumerBox("live"), &wire.NextRequest{WaitMS: 20_000})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	sendTo(t, s, "", "not this one", "the wanted one")
	r := <-got
	if r == nil {
		t.Fatal("long poll on the consumer's box timed out: no background fan-out")
	}
	if m, _ := message.Decode(r.Msg); m.Content.Content != "the wanted one" {
		t.Fatalf("claimed %q", m.Content.Content)
	}
}

func TestConsumerAckAndCursor(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	sendTo(t, s, "", "x1", "x2", "x3")
	createConsumer(t, s, "c", model.ConsumerFilter{}, "", nil)
	pumpAll(t, s)
	if seq, ok, err := s.ConsumerCursor(ctx, agent(bob), bob, model.ConsumerBox("c")); err != nil || !ok || seq != 0 {
		t.Fatalf("cursor before ack: %d %v %v", seq, ok, err)
	}
	info, err := s.AckConsumer(ctx, agent(bob), bob, "c", 2)
	if err != nil || info.AckedSeq != 2 {
		t.Fatalf("ack 2: %+v %v", info, err)
	}
	if info, err = s.AckConsumer(ctx, agent(bob), bob, "c", 1); err != nil || info.AckedSeq != 2 {
		t.Fatalf("an older ack moved the cursor back: %+v %v", info, err)
	}
	var me *model.Error
	if _, err = s.AckConsumer(ctx, agent(bob), bob, "c", 4); !errors.As(err, &me) || me.Field != "seq" {
		t.Fatalf("ack beyond the last seq: %v", err)
	}
	if _, err = s.AckConsumer(ctx, agent(carol), bob, "c", 3); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("carol acked bob's consumer: %v", err)
	}
	if seq, ok, err := s.ConsumerCursor(ctx, agent(bob), bob, model.ConsumerBox("c")); err != nil || !ok || seq != 2 {
		t.Fatalf("cursor after ack: %d %v %v", seq, ok, err)
	}
	if _, ok, _ := s.ConsumerCursor(ctx, agent(bob), bob, model.Inbox); ok {
		t.Fatal("an inbox has no consumer cursor")
	}
	if err := s.DeleteConsumer(ctx, agent(bob), bob, "c"); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.st.Sync(ctx, store.SyncParams{Owner: bob, Box: model.ConsumerBox("c"), Limit: 10}); err != nil || len(recs) != 0 {
		t.Fatalf("deleted consumer's box still has %d records (%v)", len(recs), err)
	}
	// Its box's reads say it is gone rather than that it is empty.
	if _, err := s.Sync(ctx, agent(bob), wire.SyncQuery{Owner: bob, Box: model.ConsumerBox("c")}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("sync of a deleted consumer: %v", err)
	}
	if _, err := s.GetConsumer(ctx, agent(bob), bob, "c"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("get deleted consumer: %v", err)
	}
	if n := len(syncAll(t, s, bob, model.Inbox)); n != 3 {
		t.Fatalf("deleting a consumer touched its source: %d records left", n)
	}
}

func TestCreateConsumerRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	long := make([]string, maxFilterValues+1)
	for i := range long {
		long[i] = "x"
	}
	cases := []struct {
		name  string
		who   model.Identity
		req   wire.ConsumerRequest
		field string
		kind  error
	}{
		{"empty name", agent(bob), wire.ConsumerRequest{SourceOwner: bob, SourceBox: "INBOX"}, "name", model.ErrInvalid},
		{"bad name", agent(bob), wire.ConsumerRequest{Name: "a/b", SourceOwner: bob, SourceBox: "INBOX"}, "name", model.ErrInvalid},
		{"no source owner", agent(bob), wire.ConsumerRequest{Name: "c", SourceBox: "INBOX"}, "source_owner", model.ErrInvalid},
		{"unknown box", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "MAILBOX"}, "source_box", model.ErrInvalid},
		{"consumer of a consumer", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "consumer:x"}, "source_box", model.ErrInvalid},
		{"start and after_seq", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Start: "now", AfterSeq: ptr(int64(1))}, "after_seq", model.ErrInvalid},
		{"bad start", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Start: "yesterday"}, "start", model.ErrInvalid},
		{"negative after_seq", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", AfterSeq: ptr(int64(-1))}, "after_seq", model.ErrInvalid},
		{"after_seq beyond the box's end", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", AfterSeq: ptr(int64(1))}, "after_seq", model.ErrInvalid},
		{"filter too long", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Filter: model.ConsumerFilter{From: long}}, "filter.from", model.ErrInvalid},
		{"unknown kind", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Filter: model.ConsumerFilter{Kind: []string{"shout"}}}, "filter.kind", model.ErrInvalid},
		{"empty filter value", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Filter: model.ConsumerFilter{Kind: []string{""}}}, "filter.kind[0]", model.ErrInvalid},
		// A value no DID can be would match nothing, for ever.
		{"filter.from not a DID", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Filter: model.ConsumerFilter{From: []string{"a b"}}}, "filter.from[0]", model.ErrInvalid},
		{"filter.mentions not a DID", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Filter: model.ConsumerFilter{Mentions: []string{"did:ok", "did:x\u0001"}}}, "filter.mentions[1]", model.ErrInvalid},
		{"filter.workspace empty", agent(bob), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX", Filter: model.ConsumerFilter{Workspace: []string{""}}}, "filter.workspace[0]", model.ErrInvalid},
		{"another's inbox", agent(carol), wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX"}, "", model.ErrForbidden},
		{"for another owner", agent(carol), wire.ConsumerRequest{Owner: bob, Name: "c", SourceOwner: carol, SourceBox: "INBOX"}, "", model.ErrForbidden},
		{"owner with a space", admin, wire.ConsumerRequest{Owner: "did:x y", Name: "c", SourceOwner: bob, SourceBox: "INBOX"}, "owner", model.ErrInvalid},
		{"source owner with a control character", admin, wire.ConsumerRequest{Name: "c", SourceOwner: "did:q\u0001", SourceBox: "INBOX"}, "source_owner", model.ErrInvalid},
	}
	for _, tc := range cases {
		_, err := s.CreateConsumer(ctx, tc.who, &tc.req)
		var me *model.Error
		if !errors.Is(err, tc.kind) || !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: err = %v, want %v on field %q", tc.name, err, tc.kind, tc.field)
		}
	}
	if res, err := s.ListConsumers(ctx, admin, ""); err != nil || len(res.Consumers) != 0 {
		t.Fatalf("a rejected request created something: %+v %v", res, err)
	}
	createConsumer(t, s, "c", model.ConsumerFilter{}, "", nil)
	if _, err := s.CreateConsumer(ctx, agent(bob), &wire.ConsumerRequest{Name: "c", SourceOwner: bob, SourceBox: "INBOX"}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("duplicate consumer: %v", err)
	}
	// An admin may create a consumer for someone, and list everyone's.
	if _, err := s.CreateConsumer(ctx, admin, &wire.ConsumerRequest{Owner: carol, Name: "c", SourceOwner: bob, SourceBox: "INBOX"}); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.ListConsumers(ctx, admin, ""); len(res.Consumers) != 2 {
		t.Fatalf("admin lists %d consumers", len(res.Consumers))
	}
	if res, _ := s.ListConsumers(ctx, agent(carol), ""); len(res.Consumers) != 1 || res.Consumers[0].Owner != carol {
		t.Fatalf("carol lists %+v", res)
	}
	if _, err := s.ListConsumers(ctx, agent(carol), bob); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("carol listed bob's consumers: %v", err)
	}
}

func TestGroupMemberConsumesGroupInbox(t *testing.T) {
	t.Parallel()
	for _, d := range []model.GroupDelivery{model.DeliverToMembers, model.DeliverToGroup} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			s := newService(t, nil)
			ctx := context.Background()
			const grp = "did:test:group"
			if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{bob, carol}, Delivery: d}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateConsumer(ctx, agent(carol), &wire.ConsumerRequest{Name: "mentions", SourceOwner: grp,
				SourceBox: "group_inbox", Filter: model.ConsumerFilter{Mentions: []string{carol}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateConsumer(ctx, agent(alice), &wire.ConsumerRequest{Name: "spy", SourceOwner: grp, SourceBox: "GROUP_INBOX"}); !errors.Is(err, model.ErrForbidden) {
				t.Fatalf("a non-member subscribed to the group: %v", err)
			}
			for i, mentions := range [][]string{{carol}, nil, {bob, carol}} {
				// The group relays a member's message: from the group, source bob.
				m := &message.Message{From: grp, Source: bob, Kind: message.KindGroupMsg, Mentions: mentions,
					Content: message.Content{Content: fmt.Sprintf("g%d", i)}}
				res, err := s.PostSend(ctx, admin, &wire.PostSendRequest{Msg: m})
				if err != nil {
					t.Fatal(err)
				}
				if res.GroupDelivery != d {
					t.Fatalf("post_send reports delivery %q, want %q", res.GroupDelivery, d)
				}
			}
			pumpAll(t, s)
			if got := texts(syncAll(t, s, carol, model.ConsumerBox("mentions"))); !slices.Equal(got, []string{"g0", "g2"}) {
				t.Fatalf("carol's mentions consumer got %v", got)
			}
			want := []string{"g0", "g1", "g2"}
			if d == model.DeliverToGroup {
				want = nil // members read the group's box instead
			}
			if got := texts(syncAll(t, s, carol, model.Inbox)); !slices.Equal(got, want) {
				t.Fatalf("carol's INBOX holds %v, want %v", got, want)
			}
			if got := texts(syncAll(t, s, grp, model.GroupInbox)); !slices.Equal(got, []string{"g0", "g1", "g2"}) {
				t.Fatalf("the group's box holds %v", got)
			}
		})
	}
}

// TestRemovedMemberConsumerStops: a group's box feeds a member's consumer
// only while the owner is a member. What the group gets while the owner is
// out never reaches the consumer, not even once the owner is back; an
// admin cannot make a consumer of a group's box for a non-member either.
func TestRemovedMemberConsumerStops(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	const grp = "did:test:group"
	members := func(dids ...string) {
		t.Helper()
		if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: dids}); err != nil {
			t.Fatal(err)
		}
	}
	// No pump between the sends and the membership changes: what a
	// consumer gets must not depend on when the pump runs.
	send := func(text string) {
		t.Helper()
		m := &message.Message{From: grp, Source: bob, Kind: message.KindGroupMsg, Content: message.Content{Content: text}}
		if _, err := s.PostSend(ctx, admin, &wire.PostSendRequest{Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	members(bob, carol)
	if _, err := s.CreateConsumer(ctx, agent(carol), &wire.ConsumerRequest{Name: "all", SourceOwner: grp, SourceBox: "GROUP_INBOX"}); err != nil {
		t.Fatal(err)
	}
	send("while a member")
	members(bob)
	send("after carol left")
	members(bob, carol)
	send("after carol came back")
	pumpAll(t, s)
	want := []string{"while a member", "after carol came back"}
	if got := texts(syncAll(t, s, carol, model.ConsumerBox("all"))); !slices.Equal(got, want) {
		t.Fatalf("carol's consumer of the group got %q, want %q", got, want)
	}
	if got := texts(syncAll(t, s, grp, model.GroupInbox)); len(got) != 3 {
		t.Fatalf("the group's box holds %q, want all three", got)
	}
	_, err := s.CreateConsumer(ctx, admin, &wire.ConsumerRequest{Owner: alice, Name: "spy", SourceOwner: grp, SourceBox: "GROUP_INBOX"})
	if !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("an admin made a consumer of the group's box for a non-member: %v", err)
	}
	if _, err := s.CreateConsumer(ctx, admin, &wire.ConsumerRequest{Owner: grp, Name: "own", SourceOwner: grp, SourceBox: "GROUP_INBOX"}); err != nil {
		t.Fatalf("the group's own consumer of its box: %v", err)
	}
}

// A deleted group's members' consumers of its box get what it held before
// the delete (they could not afterwards: a former member is fed nothing),
// the members can no longer read it or consume it anew, and the DID's own
// consumer is fed as before.
func TestDeletedGroupConsumersStop(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	const grp = "did:test:group"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{bob, carol}, Delivery: model.DeliverToGroup}); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{carol, grp} {
		if _, err := s.CreateConsumer(ctx, admin, &wire.ConsumerRequest{Owner: who, Name: "all", SourceOwner: grp, SourceBox: "GROUP_INBOX"}); err != nil {
			t.Fatal(err)
		}
	}
	m := &message.Message{From: grp, Source: bob, Kind: message.KindGroupMsg, Content: message.Content{Content: "before"}}
	if _, err := s.PostSend(ctx, agent(bob), &wire.PostSendRequest{Msg: m}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, agent(bob), grp); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("a member deleted the group: %v", err)
	}
	if err := s.DeleteGroup(ctx, agent(grp), grp); err != nil {
		t.Fatal(err)
	}
	pumpAll(t, s)
	for _, who := range []string{carol, grp} {
		if got := texts(syncAll(t, s, who, model.ConsumerBox("all"))); !slices.Equal(got, []string{"before"}) {
			t.Fatalf("%s's consumer of the deleted group's box got %q, want what it held before", who, got)
		}
	}
	if err := s.CanRead(ctx, agent(carol), grp, model.GroupInbox); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("a former member reads the deleted group's box: %v", err)
	}
	_, err := s.CreateConsumer(ctx, admin, &wire.ConsumerRequest{Owner: bob, Name: "late", SourceOwner: grp, SourceBox: "GROUP_INBOX"})
	if !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("a former member's new consumer of the box: %v", err)
	}
	if err := s.DeleteGroup(ctx, admin, grp); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("deleted twice: %v", err)
	}
}
