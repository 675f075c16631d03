package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func conversationTests() []testCase {
	return []testCase{
		{"UpdatedByApply", testConversationsApply},
		{"OnlyConversationBoxes", testConversationsBoxes},
		{"UnreadCountFollowsTransitions", testConversationsUnread},
		{"ForgetPurgedLastRecord", testConversationsPurged},
	}
}

// findConv returns owner's conversation for thread, if any.
func findConv(t *testing.T, s store.Store, owner, thread string) (model.Conversation, bool) {
	t.Helper()
	cs, err := s.ListConversations(t.Context(), store.ConversationQuery{Owner: owner, Limit: 1000})
	requireNoError(t, err, "ListConversations")
	var found []model.Conversation
	for _, c := range cs {
		if c.Owner != owner {
			t.Fatalf("ListConversations(%s) returned a conversation of %s", owner, c.Owner)
		}
		if c.ThreadKey == thread {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return model.Conversation{}, false
	case 1:
		return found[0], true
	}
	t.Fatalf("ListConversations(%s): %d conversations for thread %q, want one", owner, len(found), thread)
	return model.Conversation{}, false
}

func mustConv(t *testing.T, s store.Store, owner, thread string) model.Conversation {
	t.Helper()
	c, ok := findConv(t, s, owner, thread)
	if !ok {
		t.Fatalf("no conversation for %s thread %q", owner, thread)
	}
	return c
}

func requireConv(t *testing.T, got, want model.Conversation, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: conversation\n got: %s\nwant: %s", what, dump(got), dump(want))
	}
}

// Apply updates last_seq, last_msg_id, last box/record and unread_count.
func testConversationsApply(t *testing.T, s store.Store) {
	ctx := t.Context()
	const th = "chat:alice-bob"
	m1, m2, m3, m4, m5 := msgID("conv-1"), msgID("conv-2"), msgID("conv-3"), msgID("conv-4"), msgID("conv-5")

	if cs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: alice, Limit: 10}); err != nil || len(cs) != 0 {
		t.Fatalf("ListConversations on an empty store = %s, %v; want none", dump(cs), err)
	}

	r1 := newRec(alice, model.Inbox, m1, base, withThread(th))
	mustApply(t, s, newPlan(m1, base, r1, newRec(bob, model.Outbox, m1, base, withThread(th))))
	requireConv(t, mustConv(t, s, alice, th), model.Conversation{
		Owner: alice, ThreadKey: th, LastMsgID: m1, LastRecordID: r1.RecordID, LastBox: model.Inbox,
		LastSeq: 1, UnreadCount: 1, UpdatedAtMS: base,
	}, "after first inbound message")
	requireConv(t, mustConv(t, s, bob, th), model.Conversation{
		Owner: bob, ThreadKey: th, LastMsgID: m1, LastRecordID: model.RecordID(bob, model.Outbox, m1, ""),
		LastBox: model.Outbox, LastSeq: 1, UnreadCount: 0, UpdatedAtMS: base,
	}, "sender's conversation (outbox copy is not unread)")

	r2 := newRec(alice, model.Inbox, m2, base+10, withThread(th))
	mustApply(t, s, newPlan(m2, base+10, r2))
	requireConv(t, mustConv(t, s, alice, th), model.Conversation{
		Owner: alice, ThreadKey: th, LastMsgID: m2, LastRecordID: r2.RecordID, LastBox: model.Inbox,
		LastSeq: 2, UnreadCount: 2, UpdatedAtMS: base + 10,
	}, "after second inbound message")

	// alice replies: her OUTBOX copy (SENT) becomes the last message.
	r3 := newRec(alice, model.Outbox, m3, base+20, withThread(th))
	mustApply(t, s, newPlan(m3, base+20, r3))
	want := model.Conversation{
		Owner: alice, ThreadKey: th, LastMsgID: m3, LastRecordID: r3.RecordID, LastBox: model.Outbox,
		LastSeq: 1, UnreadCount: 2, UpdatedAtMS: base + 20,
	}
	requireConv(t, mustConv(t, s, alice, th), want, "after alice's reply")

	// Re-applying an old plan creates nothing and changes nothing.
	mustApply(t, s, newPlan(m1, base+30, r1))
	requireConv(t, mustConv(t, s, alice, th), want, "after repeating the first plan")

	// Other threads and group inboxes are separate conversations.
	r4 := newRec(alice, model.Inbox, m4, base+40, withThread("chat:alice-carol"))
	mustApply(t, s, newPlan(m4, base+40, r4))
	r5 := newRec(alice, model.GroupInbox, m5, base+50, withThread("group:"+grp))
	mustApply(t, s, newPlan(m5, base+50, r5))
	requireConv(t, mustConv(t, s, alice, th), want, "first thread after other threads got messages")
	requireConv(t, mustConv(t, s, alice, "chat:alice-carol"), model.Conversation{
		Owner: alice, ThreadKey: "chat:alice-carol", LastMsgID: m4, LastRecordID: r4.RecordID, LastBox: model.Inbox,
		LastSeq: 3, UnreadCount: 1, UpdatedAtMS: base + 40,
	}, "second thread")
	requireConv(t, mustConv(t, s, alice, "group:"+grp), model.Conversation{
		Owner: alice, ThreadKey: "group:" + grp, LastMsgID: m5, LastRecordID: r5.RecordID, LastBox: model.GroupInbox,
		LastSeq: 1, UnreadCount: 1, UpdatedAtMS: base + 50,
	}, "group thread")

	all, err := s.ListConversations(ctx, store.ConversationQuery{Owner: alice, Limit: 10})
	requireNoError(t, err, "ListConversations")
	if len(all) != 3 {
		t.Fatalf("alice has %d conversations, want 3: %s", len(all), dump(all))
	}
	limited, err := s.ListConversations(ctx, store.ConversationQuery{Owner: alice, Limit: 2})
	requireNoError(t, err, "ListConversations(limit 2)")
	if len(limited) != 2 {
		t.Fatalf("ListConversations(limit 2) returned %d", len(limited))
	}
	// Pages follow each other from the last of the page before, whatever
	// the page size, with two threads updated in the same millisecond.
	r6 := newRec(alice, model.Inbox, msgID("conv-6"), base+50, withThread("chat:alice-dave"))
	mustApply(t, s, newPlan(r6.MsgID, base+50, r6))
	all, err = s.ListConversations(ctx, store.ConversationQuery{Owner: alice, Limit: 10})
	requireNoError(t, err, "ListConversations")
	for size := 1; size <= 4; size++ {
		var paged []model.Conversation
		q := store.ConversationQuery{Owner: alice, Limit: size}
		for range 10 {
			page, err := s.ListConversations(ctx, q)
			requireNoError(t, err, "ListConversations(page)")
			paged = append(paged, page...)
			if len(page) < size {
				break
			}
			last := page[len(page)-1]
			q.CursorUpdatedAtMS, q.CursorThreadKey = last.UpdatedAtMS, last.ThreadKey
		}
		if !reflect.DeepEqual(paged, all) {
			t.Fatalf("pages of %d: %s\nwant %s", size, dump(paged), dump(all))
		}
	}
	if cs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: carol, Limit: 10}); err != nil || len(cs) != 0 {
		t.Fatalf("carol has conversations %s, %v; want none", dump(cs), err)
	}
}

// Only INBOX, OUTBOX and GROUP_INBOX feed conversations.
func testConversationsBoxes(t *testing.T, s store.Store) {
	for i, box := range model.BoxKinds {
		m := msgID(fmt.Sprintf("conv-box-%d", i))
		th := "thread-" + string(box)
		mustApply(t, s, newPlan(m, base+int64(i), newRec(dave, box, m, base+int64(i), withThread(th), withVariant("v"))))
		_, ok := findConv(t, s, dave, th)
		if ok != box.HasConversations() {
			t.Fatalf("record in %s: conversation exists = %v, want %v", box, ok, box.HasConversations())
		}
	}
}

// unreadTruth counts the records (of ids) whose state is unread, reading
// them back from the store.
func unreadTruth(t *testing.T, s store.Store, ids []string) int64 {
	t.Helper()
	var n int64
	for _, id := range ids {
		r := mustGet(t, s, id)
		if r.BoxKind.HasConversations() && r.State.IsUnread() {
			n++
		}
	}
	return n
}

// unread_count stays exact through claims and updates in every direction.
func testConversationsUnread(t *testing.T, s store.Store) {
	const th, other = "chat:unread", "chat:other"
	in := seedBox(t, s, "unread", alice, model.Inbox, 6, base, func(int) []recOpt { return []recOpt{withThread(th)} })
	out := seedBox(t, s, "unread", alice, model.Outbox, 2, base+100, func(int) []recOpt { return []recOpt{withThread(th)} })
	gin := seedBox(t, s, "unread", alice, model.GroupInbox, 2, base+200, func(int) []recOpt { return []recOpt{withThread(th)} })
	seedBox(t, s, "unread-other", alice, model.Inbox, 2, base+300, func(int) []recOpt { return []recOpt{withThread(other)} })
	ids := recordIDs(append(append(append([]model.Record{}, in...), out...), gin...))

	check := func(step string) {
		t.Helper()
		want := unreadTruth(t, s, ids)
		if got := mustConv(t, s, alice, th).UnreadCount; got != want {
			t.Fatalf("after %s: unread_count = %d, but %d records are unread", step, got, want)
		}
		if got := mustConv(t, s, alice, other).UnreadCount; got != 2 {
			t.Fatalf("after %s: the other thread's unread_count = %d, want 2 (untouched)", step, got)
		}
	}
	check("seeding")
	if got := mustConv(t, s, alice, th).UnreadCount; got != 8 {
		t.Fatalf("unread_count after seeding = %d, want 8", got)
	}

	now := base + 1_000
	c := mustClaim(t, s, claimParams(alice, model.Inbox, now, "L1"))
	if c.RecordID != in[0].RecordID {
		t.Fatalf("claimed %s, want %s", c.RecordID, in[0].RecordID)
	}
	check("claim UNREAD→READING")

	steps := []struct {
		id       string
		from, to model.State
	}{
		{in[0].RecordID, model.Reading, model.Readed},
		{in[1].RecordID, model.Unread, model.Readed},
		{in[2].RecordID, model.Unread, model.Archived},
		{in[1].RecordID, model.Readed, model.Unread},
		{in[3].RecordID, model.Unread, model.Deleted},
		{in[2].RecordID, model.Archived, model.Readed},
		{gin[0].RecordID, model.Unread, model.Readed},
		{out[0].RecordID, model.Sent, model.Archived},
		{in[4].RecordID, model.Unread, model.Reading},
		{in[4].RecordID, model.Reading, model.Unread},
		{in[5].RecordID, model.Unread, model.Dead},
		{in[5].RecordID, model.Dead, model.Unread},
		{in[0].RecordID, model.Readed, model.Unread},
	}
	for i, st := range steps {
		now += 10
		mustUpdate(t, s, transition(st.id, st.from, st.to, now))
		check(fmt.Sprintf("step %d (%s→%s)", i, st.from, st.to))
	}
	// A claim that changes whether a record is unread moves the count too.
	p := store.ClaimParams{Owner: alice, Box: model.Inbox, From: model.Readed, To: model.Reading,
		NowMS: now + 1, LeaseID: "L2", Holder: "h", LeaseUntilMS: now + 1_000}
	if c := mustClaim(t, s, p); c.RecordID != in[2].RecordID {
		t.Fatalf("claimed %s, want the READED record %s", c.RecordID, in[2].RecordID)
	}
	check("claim READED→READING")
	now += 10
	mustUpdate(t, s, transition(in[2].RecordID, model.Reading, model.Readed, now))
	check("READING→READED")

	// A failed compare-and-set changes no count either.
	if _, err := s.Update(t.Context(), transition(in[1].RecordID, model.Readed, model.Unread, now+1)); err == nil {
		t.Fatal("Update with a stale From succeeded")
	}
	check("failed update")
	if got := mustConv(t, s, alice, th).UnreadCount; got != 5 {
		t.Fatalf("final unread_count = %d, want 5", got)
	}
}

// A conversation whose last record retention deletes no longer names it
// (nor its message): its last_record_id and last_msg_id are empty, the rest
// stays. One whose older records go, but not its last, is unchanged.
func testConversationsPurged(t *testing.T, s store.Store) {
	const erin, gone, kept = "did:test:erin", "chat:purged", "chat:kept"
	read := func(r model.Record) {
		t.Helper()
		mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Unread, To: model.Readed, NowMS: oldMS + 10})
	}
	for i, th := range []string{gone, gone, kept} {
		m := msgID(fmt.Sprintf("conv-purge-%d", i))
		r := newRec(erin, model.Inbox, m, oldMS+int64(i), withThread(th))
		mustApply(t, s, newPlan(m, oldMS+int64(i), r))
		read(r)
	}
	m := msgID("conv-purge-fresh")
	fresh := newRec(erin, model.Inbox, m, freshMS, withThread(kept))
	mustApply(t, s, newPlan(m, freshMS, fresh))
	before := mustConv(t, s, erin, gone)
	keptBefore := mustConv(t, s, erin, kept)

	res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS}})
	if res.Records[model.Inbox] != 3 {
		t.Fatalf("purge removed %v, want 3 INBOX records", res.Records)
	}
	want := before
	want.LastRecordID, want.LastMsgID = "", ""
	requireConv(t, mustConv(t, s, erin, gone), want, "the conversation whose records all went")
	requireConv(t, mustConv(t, s, erin, kept), keptBefore, "the conversation whose last record stayed")
	if keptBefore.LastRecordID != fresh.RecordID {
		t.Fatalf("the kept conversation names %s, want the fresh record %s", keptBefore.LastRecordID, fresh.RecordID)
	}
}

// GoneRecordCase is a conversation as a server left it before retention
// cleared the last record of the conversations whose record it deleted.
type GoneRecordCase struct {
	Owner, Thread string
	// Stored: the conversation's last record (of message Name, id
	// GoneRecordID(Owner, Name)) is still there.
	Stored bool
	Name   string
}

// GoneRecordCases are the conversations the drivers' repair migrations
// (SQLite 0013, PostgreSQL 0012) are tested with: one whose record is
// there, one whose record and message are gone, one whose message is
// there but its record is gone (another owner's record of it stays).
var GoneRecordCases = []GoneRecordCase{
	{alice, "t-kept", true, "gone-kept"},
	{alice, "t-gone", false, "gone-all"},
	{bob, "t-gone-record", false, "gone-kept"},
}

// GoneRecordMsgID is the id of case name's message.
func GoneRecordMsgID(name string) string { return msgID(name) }

// GoneRecordID is the id of owner's record of case name's message.
func GoneRecordID(owner, name string) string {
	return model.RecordID(owner, model.Inbox, msgID(name), "")
}

// RequireGoneRecordsForgotten checks a store migrated from GoneRecordCases:
// a conversation whose record is gone names no last record or message,
// and keeps its thread; the others are as they were.
func RequireGoneRecordsForgotten(t *testing.T, s store.Store) {
	t.Helper()
	for _, c := range GoneRecordCases {
		cs, err := s.ListConversations(t.Context(), store.ConversationQuery{Owner: c.Owner, Limit: 100})
		requireNoError(t, err, "ListConversations")
		i := slices.IndexFunc(cs, func(v model.Conversation) bool { return v.ThreadKey == c.Thread })
		if i < 0 {
			t.Fatalf("%s's conversation %s is gone; want it kept", c.Owner, c.Thread)
		}
		got := cs[i]
		wantMsg, wantRec := "", ""
		if c.Stored {
			wantMsg, wantRec = msgID(c.Name), GoneRecordID(c.Owner, c.Name)
		}
		if got.LastMsgID != wantMsg || got.LastRecordID != wantRec || got.LastSeq != 1 {
			t.Errorf("%s's conversation %s = %s; want last message %q, record %q, seq 1", c.Owner, c.Thread, dump(got), wantMsg, wantRec)
		}
	}
}
