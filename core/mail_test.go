package core

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func aggDispatch(t *testing.T, s *Service, who model.Identity, m *message.Message, a *wire.Aggregate, idem string) *wire.DispatchResult {
	t.Helper()
	res, err := s.Dispatch(context.Background(), who, &wire.DispatchRequest{Msg: m, Aggregate: a, IdempotencyKey: idem,
		IngressCtx: &model.Route{ChatID: "chat-1", Platform: "telegram"}})
	if err != nil {
		t.Fatalf("dispatch with aggregate: %v", err)
	}
	return res
}

func flushDue(t *testing.T, s *Service, clk *clock) int {
	t.Helper()
	n, err := s.flushMail(context.Background(), clk.Now().UnixMilli())
	if err != nil {
		t.Fatalf("flushMail: %v", err)
	}
	return n
}

// decodeMail reads a delivered Mail back.
func decodeMail(t *testing.T, item wire.RecordWithMsg) (*message.Message, MailInfo) {
	t.Helper()
	m, err := message.Decode(item.Msg)
	if err != nil {
		t.Fatal(err)
	}
	var mm MailMachine
	if err := json.Unmarshal(m.Content.Machine, &mm); err != nil {
		t.Fatalf("Mail machine content: %v (%s)", err, m.Content.Machine)
	}
	return m, mm.Mail
}

// Seed 002: consecutive messages of one chat become one Mail, delivered
// once the burst pauses for the window, holding every part in order.
func TestMailBurstIsOneMessage(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	const alice, bob = "did:tg:alice", "did:agent:bob"
	a := &wire.Aggregate{Key: "tg:chat-1"}
	var ids []string
	for i, text := range []string{"hi", "are you there?", "the build is red"} {
		if i > 0 {
			clk.Advance(2 * time.Second)
		}
		res := aggDispatch(t, s, tunnel, chat(alice, []string{bob}, text), a, "")
		if res.Aggregate == nil || res.Aggregate.Parts != i+1 || len(res.DeliveredRecipients) != 0 {
			t.Fatalf("part %d answered %+v", i, res)
		}
		if want := clk.Now().UnixMilli() + 5_000; res.Aggregate.DueAtMS != want {
			t.Fatalf("part %d due at %d, want %d", i, res.Aggregate.DueAtMS, want)
		}
		ids = append(ids, res.MsgID)
	}
	clk.Advance(4999 * time.Millisecond)
	if n := flushDue(t, s, clk); n != 0 || len(syncAll(t, s, bob, model.Inbox)) != 0 {
		t.Fatalf("a Mail was written before its burst paused for the window (%d)", n)
	}
	clk.Advance(time.Millisecond)
	if n := flushDue(t, s, clk); n != 1 {
		t.Fatalf("flushMail wrote %d Mails, want 1", n)
	}
	items := syncAll(t, s, bob, model.Inbox)
	if len(items) != 1 {
		t.Fatalf("bob has %d records, want one Mail", len(items))
	}
	m, info := decodeMail(t, items[0])
	if m.From != alice || !slices.Equal(m.To, []string{bob}) || m.Kind != message.KindChat {
		t.Fatalf("Mail from %s to %v kind %s", m.From, m.To, m.Kind)
	}
	if m.Content.Content != "hi\nare you there?\nthe build is red" {
		t.Fatalf("Mail text %q", m.Content.Content)
	}
	var got []string
	for _, p := range info.Parts {
		got = append(got, p.MsgID)
		if message.IDOf(p.Msg) != p.MsgID {
			t.Fatalf("part %s carries a body of another id", p.MsgID)
		}
	}
	if !slices.Equal(got, ids) || len(m.Content.Refs) != 3 || info.Key != "tg:chat-1" || info.Sender != tunnel.DID {
		t.Fatalf("Mail parts %v (want %v), refs %d, info %+v", got, ids, len(m.Content.Refs), info)
	}
	if r := items[0].Record.Route; r == nil || r.ChatID != "chat-1" {
		t.Fatalf("Mail record route %+v, want the first part's ingress_ctx", r)
	}
	if pending, err := s.PendingMail(context.Background(), tunnel, wire.PendingMailQuery{}); err != nil || len(pending.Mail) != 0 {
		t.Fatalf("pending after the flush: %+v, %v", pending, err)
	}
	// A part dispatched again after its Mail was written says where it went.
	again := aggDispatch(t, s, tunnel, chat(alice, []string{bob}, "hi"), a, "")
	if !again.Aggregate.Duplicate || again.Aggregate.MailID != items[0].Record.MsgID {
		t.Fatalf("a part dispatched again answered %+v, want a duplicate in %s", again.Aggregate, items[0].Record.MsgID)
	}
	if n := flushDue(t, s, clk); n != 0 {
		t.Fatalf("a duplicate part made a Mail")
	}
}

// A burst of several people is from the tunnel, and its text says who
// said what; a steady trickle is cut at the max wait; different keys and
// different recipients are different Mails.
func TestMailSendersKeysAndMaxWait(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	const bob, carol = "did:agent:bob", "did:agent:carol"
	a := &wire.Aggregate{Key: "room", WindowMS: ptr(int64(1_000)), MaxWaitMS: ptr(int64(3_000))}
	aggDispatch(t, s, tunnel, chat("did:tg:ann", []string{bob}, "one"), a, "")
	aggDispatch(t, s, tunnel, chat("did:tg:ann", []string{carol}, "for carol"), a, "")
	aggDispatch(t, s, tunnel, chat("did:tg:ann", []string{bob}, "other key"), &wire.Aggregate{Key: "elsewhere"}, "")
	for _, text := range []string{"two", "three", "four"} {
		clk.Advance(900 * time.Millisecond)
		aggDispatch(t, s, tunnel, chat("did:tg:ben", []string{bob}, text), a, "")
	}
	clk.Advance(300 * time.Millisecond) // +3.0 s: the max wait
	if n := flushDue(t, s, clk); n != 2 {
		t.Fatalf("flushMail at the max wait wrote %d Mails, want 2 (bob's trickle, carol's)", n)
	}
	items := syncAll(t, s, bob, model.Inbox)
	if len(items) != 1 {
		t.Fatalf("bob has %d records, want 1", len(items))
	}
	m, info := decodeMail(t, items[0])
	if m.From != tunnel.DID || len(info.Parts) != 4 {
		t.Fatalf("mixed burst from %s with %d parts", m.From, len(info.Parts))
	}
	if want := "did:tg:ann: one\ndid:tg:ben: two\ndid:tg:ben: three\ndid:tg:ben: four"; m.Content.Content != want {
		t.Fatalf("Mail text %q, want %q", m.Content.Content, want)
	}
	if got := texts(syncAll(t, s, carol, model.Inbox)); len(got) != 1 || got[0] != "for carol" {
		t.Fatalf("carol got %q", got)
	}
	clk.Advance(5 * time.Second)
	flushDue(t, s, clk)
	if n := len(syncAll(t, s, bob, model.Inbox)); n != 2 {
		t.Fatalf("bob has %d records after the other key's window, want 2", n)
	}
}

// Whoever blocks a part's author is answered as dropped and gets none of
// it, and a part everyone blocks is refused as a dispatch would be:
// nothing is stored.
func TestMailBlocked(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const spam, bob, carol = "did:tg:spam", "did:agent:bob", "did:agent:carol"
	if _, err := s.Block(ctx, admin, bob, spam, true); err != nil {
		t.Fatal(err)
	}
	res := aggDispatch(t, s, tunnel, chat(spam, []string{bob, carol}, "buy"), &wire.Aggregate{Key: "k"}, "")
	if !slices.Equal(res.DroppedRecipients, []string{bob}) || res.Aggregate == nil {
		t.Fatalf("part to a blocker and another answered %+v", res)
	}
	only := aggDispatch(t, s, tunnel, chat(spam, []string{bob}, "buy now"), &wire.Aggregate{Key: "k"}, "")
	if only.OK || only.Reason != "blocked" || only.Aggregate != nil {
		t.Fatalf("part only for a blocker answered %+v", only)
	}
	clk.Advance(time.Minute)
	flushDue(t, s, clk)
	if n := len(syncAll(t, s, bob, model.Inbox)); n != 0 {
		t.Fatalf("bob, who blocks the author, got %d records", n)
	}
	if got := texts(syncAll(t, s, carol, model.Inbox)); len(got) != 1 || got[0] != "buy" {
		t.Fatalf("carol got %q", got)
	}
}

// A member's burst in a group is one Mail that speaks for the group, fanned
// out to the members; once the group is gone, the Mail is dropped (with an
// event), not retried for ever.
func TestMailInGroup(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const group, ann, bob = "did:group:g", "did:tg:ann", "did:agent:bob"
	if _, err := s.SetSubscribers(ctx, admin, group, &wire.SubscribersRequest{Subscribers: []string{ann, bob}}); err != nil {
		t.Fatal(err)
	}
	post := func(text string) *message.Message {
		return &message.Message{From: group, Source: ann, Kind: message.KindGroupMsg, Content: message.Content{Content: text}}
	}
	aggDispatch(t, s, tunnel, post("a"), &wire.Aggregate{Key: "g"}, "")
	aggDispatch(t, s, tunnel, post("b"), &wire.Aggregate{Key: "g"}, "")
	clk.Advance(6 * time.Second)
	flushDue(t, s, clk)
	items := syncAll(t, s, bob, model.Inbox)
	if len(items) != 1 {
		t.Fatalf("bob has %d records, want the group's one Mail", len(items))
	}
	m, _ := decodeMail(t, items[0])
	if m.From != group || m.Source != ann || m.Content.Content != "a\nb" {
		t.Fatalf("group Mail from %s source %s text %q", m.From, m.Source, m.Content.Content)
	}

	aggDispatch(t, s, tunnel, post("c"), &wire.Aggregate{Key: "g"}, "")
	if _, err := s.SetSubscribers(ctx, admin, group, &wire.SubscribersRequest{Subscribers: []string{}}); err != nil {
		t.Fatal(err)
	}
	// A group without members is still a group: its Mail goes to the
	// group's log, as a post dispatched now would, and reaches nobody.
	clk.Advance(6 * time.Second)
	flushDue(t, s, clk)
	if p, err := s.PendingMail(ctx, admin, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 0 {
		t.Fatalf("pending after the group emptied: %+v, %v", p, err)
	}
	evs, err := s.Events(ctx, admin, wire.EventQuery{Owner: tunnel.DID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs.Items {
		types = append(types, e.Type)
	}
	want := []string{model.EventMailPartAdded, model.EventMailPartAdded, model.EventMailFlushed, model.EventMailPartAdded, model.EventMailFlushed}
	if !slices.Equal(types, want) {
		t.Fatalf("tunnel's events %v, want %v", types, want)
	}
	if got := texts(syncAll(t, s, group, model.GroupInbox)); !slices.Equal(got, []string{"a\nb", "c"}) {
		t.Fatalf("the group's log holds %q, want both Mails", got)
	}
	if n := len(syncAll(t, s, bob, model.Inbox)); n != 1 {
		t.Fatalf("bob, no longer a member, has %d records", n)
	}
}

// A part dispatched twice (a tunnel retrying) counts once, by its id or by
// its idempotency key; a key reused for another message is a conflict.
func TestMailDuplicateParts(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	a := &wire.Aggregate{Key: "k"}
	m := chat("did:tg:ann", []string{"did:agent:bob"}, "x")
	first := aggDispatch(t, s, tunnel, m, a, "upd-1")
	again := aggDispatch(t, s, tunnel, m, a, "upd-1")
	if !again.Aggregate.Duplicate || again.Aggregate.Parts != 1 || again.Aggregate.BucketID != first.Aggregate.BucketID {
		t.Fatalf("repeat answered %+v", again.Aggregate)
	}
	_, err := s.Dispatch(context.Background(), tunnel, &wire.DispatchRequest{Msg: chat("did:tg:ann", []string{"did:agent:bob"}, "y"),
		Aggregate: a, IdempotencyKey: "upd-1"})
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("key reused for another part: %v, want a conflict", err)
	}
}

// Bad aggregation requests are refused with the field named, and store
// nothing.
func TestMailBadRequests(t *testing.T) {
	t.Parallel()
	s := newService(t, newClock())
	ctx := context.Background()
	m := chat("did:tg:ann", []string{"did:agent:bob"}, "x")
	big := chat("did:tg:ann", []string{"did:agent:bob"}, strings.Repeat("x", 600_000))
	for _, tc := range []struct {
		name  string
		who   model.Identity
		req   wire.DispatchRequest
		kind  error
		field string
	}{
		{"no key", tunnel, wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{}}, model.ErrInvalid, "aggregate.key"},
		{"long key", tunnel, wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: strings.Repeat("k", 257)}}, model.ErrInvalid, "aggregate.key"},
		{"control key", tunnel, wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: "a\nb"}}, model.ErrInvalid, "aggregate.key"},
		{"zero window", tunnel, wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: "k", WindowMS: ptr(int64(0))}}, model.ErrInvalid, "aggregate.window_ms"},
		{"huge max wait", tunnel, wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: "k", MaxWaitMS: ptr(int64(25 * 3600_000))}}, model.ErrInvalid, "aggregate.max_wait_ms"},
		{"max wait below window", tunnel, wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: "k", WindowMS: ptr(int64(2000)), MaxWaitMS: ptr(int64(1000))}}, model.ErrInvalid, "aggregate.max_wait_ms"},
		{"with a delay", tunnel, wire.DispatchRequest{Msg: m, DelayMS: ptr(int64(1000)), Aggregate: &wire.Aggregate{Key: "k"}}, model.ErrInvalid, "aggregate"},
		{"part too big", tunnel, wire.DispatchRequest{Msg: big, Aggregate: &wire.Aggregate{Key: "k"}}, model.ErrTooLarge, "msg"},
		{"agent", agent("did:agent:x"), wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: "k"}}, model.ErrForbidden, ""},
	} {
		_, err := s.Dispatch(ctx, tc.who, &tc.req)
		var me *model.Error
		if !errors.Is(err, tc.kind) || !errors.As(err, &me) || me.Field != tc.field {
			t.Errorf("%s: %v, want %v on field %q", tc.name, err, tc.kind, tc.field)
		}
	}
	if p, err := s.PendingMail(ctx, admin, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 0 {
		t.Fatalf("refused parts left pending Mails: %+v, %v", p, err)
	}
}

// The pending list is the caller's own, unless it is an admin's; only an
// admin may flush, and a flush writes every pending Mail at once.
func TestMailPendingAndFlush(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	other := model.Identity{DID: "did:tunnel:slack", Role: model.RoleTunnel}
	aggDispatch(t, s, tunnel, chat("did:tg:ann", []string{"did:agent:bob"}, "x"), &wire.Aggregate{Key: "k"}, "")
	aggDispatch(t, s, other, chat("did:sl:ann", []string{"did:agent:bob"}, "y"), &wire.Aggregate{Key: "k"}, "")
	mine, err := s.PendingMail(ctx, tunnel, wire.PendingMailQuery{})
	if err != nil || len(mine.Mail) != 1 || mine.Mail[0].Sender != tunnel.DID || len(mine.Mail[0].PartMsgIDs) != 1 || !mine.Mail[0].Open {
		t.Fatalf("tunnel's pending = %+v, %v", mine, err)
	}
	if _, err := s.PendingMail(ctx, tunnel, wire.PendingMailQuery{Sender: other.DID}); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("listing another tunnel's pending Mails: %v", err)
	}
	all, err := s.PendingMail(ctx, admin, wire.PendingMailQuery{})
	if err != nil || len(all.Mail) != 2 {
		t.Fatalf("admin's pending = %+v, %v", all, err)
	}
	if _, err := s.FlushMail(ctx, tunnel); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("a tunnel's flush: %v", err)
	}
	res, err := s.FlushMail(ctx, admin)
	if err != nil || res.Flushed != 2 {
		t.Fatalf("admin flush = %+v, %v", res, err)
	}
	if n := len(syncAll(t, s, "did:agent:bob", model.Inbox)); n != 2 {
		t.Fatalf("bob has %d records after the flush, want 2", n)
	}
}

// A burst that reaches the most parts a Mail takes is written at once.
func TestMailMaxParts(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := New(openTestStore(t), Config{Now: clk.Now, MailMaxParts: 3})
	for _, text := range []string{"1", "2", "3", "4"} {
		aggDispatch(t, s, tunnel, chat("did:tg:ann", []string{"did:agent:bob"}, text), &wire.Aggregate{Key: "k"}, "")
	}
	if n := flushDue(t, s, clk); n != 1 {
		t.Fatalf("a full burst was not written at once (%d)", n)
	}
	items := syncAll(t, s, "did:agent:bob", model.Inbox)
	if len(items) != 1 {
		t.Fatalf("bob has %d records", len(items))
	}
	if m, _ := decodeMail(t, items[0]); m.Content.Content != "1\n2\n3" {
		t.Fatalf("full Mail text %q", m.Content.Content)
	}
}

// A Mail that no longer validates when its burst ends (here: the server
// came back with a smaller message limit) is dropped with a mail.dropped
// event instead of being retried for ever.
func TestMailDroppedWhenInvalid(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := openTestStore(t)
	ctx := context.Background()
	before := New(st, Config{Now: clk.Now})
	aggDispatch(t, before, tunnel, chat("did:tg:ann", []string{"did:agent:bob"}, strings.Repeat("x", 3000)), &wire.Aggregate{Key: "k"}, "")
	after := New(st, Config{Now: clk.Now, MaxMessageBytes: 2048})
	clk.Advance(time.Minute)
	if n := flushDue(t, after, clk); n != 1 {
		t.Fatalf("flushMail handled %d buckets, want the one dropped", n)
	}
	if p, err := after.PendingMail(ctx, admin, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 0 {
		t.Fatalf("pending after the drop: %+v, %v", p, err)
	}
	if n := len(syncAll(t, after, "did:agent:bob", model.Inbox)); n != 0 {
		t.Fatalf("bob got %d records from a dropped Mail", n)
	}
	evs, err := after.Events(ctx, admin, wire.EventQuery{Owner: tunnel.DID})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs.Items {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, []string{model.EventMailPartAdded, model.EventMailDropped}) {
		t.Fatalf("tunnel's events %v", types)
	}
}

// A key an aggregated dispatch bound: the same part again finds its bucket,
// and the same message dispatched without aggregate is not a repeat of it
// (it would be delivered twice, or be answered as delivered when it waits
// in its Mail): a conflict, which writes nothing.
func TestMailKeyedPartRepeatedWithoutAggregate(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	m := chat("did:tg:ann", []string{bob}, "hello")
	m.Stamp("k-1", clk.Now())
	first := aggDispatch(t, s, tunnel, m, &wire.Aggregate{Key: "chat"}, "k-1")
	again := aggDispatch(t, s, tunnel, m, &wire.Aggregate{Key: "chat"}, "k-1")
	if again.Aggregate == nil || !again.Aggregate.Duplicate || again.Aggregate.BucketID != first.Aggregate.BucketID {
		t.Fatalf("the part again: %+v, want the same bucket, a duplicate", again.Aggregate)
	}
	_, err := s.Dispatch(context.Background(), tunnel, &wire.DispatchRequest{Msg: m, IdempotencyKey: "k-1",
		IngressCtx: &model.Route{ChatID: "chat-1", Platform: "telegram"}})
	if !isField(err, model.ErrConflict, "idempotency_key") {
		t.Fatalf("the part's message without aggregate under its key: %v, want a conflict", err)
	}
	if items := syncAll(t, s, bob, model.Inbox); len(items) != 0 {
		t.Fatalf("bob has %d records before the Mail is written", len(items))
	}
}
