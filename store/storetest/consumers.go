package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func consumerTests() []testCase {
	return []testCase{
		{"CreateGetList", testConsumerCreateGetList},
		{"CreateFromEnd", testConsumerFromEnd},
		{"AdvanceInsertsAsApply", testConsumerAdvance},
		{"AdvanceCompareAndSet", testConsumerAdvanceCAS},
		{"AdvanceDeleted", testConsumerAdvanceDeleted},
		{"AdvanceRecreated", testConsumerAdvanceRecreated},
		{"Ack", testConsumerAck},
		{"BoxLastSeq", testBoxLastSeq},
		{"DeleteRemovesRecordsAndBodies", testConsumerDelete},
		{"RecreatedCursorStartsAfterTheOldBox", testConsumerRecreatedCursor},
	}
}

// newConsumer builds owner's consumer name of (srcOwner, srcBox), created
// at base, with an empty filter.
func newConsumer(owner, name, srcOwner string, srcBox model.BoxKind) *model.Consumer {
	return &model.Consumer{Owner: owner, Name: name, SourceOwner: srcOwner, SourceBox: srcBox,
		CreatedAtMS: base, UpdatedAtMS: base}
}

func mustCreateConsumer(t *testing.T, s store.Store, c *model.Consumer, fromEnd bool) {
	t.Helper()
	if err := s.CreateConsumer(t.Context(), c, fromEnd); err != nil {
		t.Fatalf("CreateConsumer(%s %s, fromEnd %v): %v", c.Owner, c.Name, fromEnd, err)
	}
}

func mustGetConsumer(t *testing.T, s store.Store, owner, name string) model.Consumer {
	t.Helper()
	c, err := s.GetConsumer(t.Context(), owner, name)
	if err != nil {
		t.Fatalf("GetConsumer(%s %s): %v", owner, name, err)
	}
	return c
}

func requireConsumer(t *testing.T, got, want model.Consumer, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: consumer mismatch\n got: %s\nwant: %s", what, dump(got), dump(want))
	}
}

// consumerRec builds a record of msg in the box of owner's consumer name.
func consumerRec(owner, name, msg string, nowMS int64, opts ...recOpt) model.Record {
	return newRec(owner, model.ConsumerBox(name), msg, nowMS, opts...)
}

func mustAdvance(t *testing.T, s store.Store, a *store.ConsumerAdvance) *store.ApplyResult {
	t.Helper()
	res, err := s.AdvanceConsumer(t.Context(), a)
	if err != nil {
		t.Fatalf("AdvanceConsumer(%s %s %d→%d): %v", a.Owner, a.Name, a.FromSourceSeq, a.ToSourceSeq, err)
	}
	if res == nil {
		t.Fatalf("AdvanceConsumer(%s %s): nil result", a.Owner, a.Name)
	}
	return res
}

// feedConsumer stores n bodies (no records of their own) and advances the
// consumer from 0 to n with one record per body, at nowMS. It returns the
// created records.
func feedConsumer(t *testing.T, s store.Store, owner, name, prefix string, n int, nowMS int64) []model.Record {
	t.Helper()
	recs := make([]model.Record, n)
	for i := range recs {
		m := msgID(fmt.Sprintf("%s/%d", prefix, i))
		mustApply(t, s, newPlan(m, nowMS))
		recs[i] = consumerRec(owner, name, m, nowMS)
	}
	c := mustGetConsumer(t, s, owner, name)
	res := mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: owner, Name: name, FromSourceSeq: c.SourceSeq,
		ToSourceSeq: c.SourceSeq + int64(n), Records: recs, NowMS: nowMS})
	if len(res.Created) != n {
		t.Fatalf("feedConsumer: created %d records, want %d", len(res.Created), n)
	}
	return res.Created
}

func requireLastSeq(t *testing.T, s store.Store, owner string, box model.BoxKind, want int64) {
	t.Helper()
	got, err := s.BoxLastSeq(t.Context(), owner, box)
	requireNoError(t, err, "BoxLastSeq")
	if got != want {
		t.Fatalf("BoxLastSeq(%s %s) = %d, want %d", owner, box, got, want)
	}
}

func requireConsumerNames(t *testing.T, s store.Store, q store.ConsumerQuery, want ...string) {
	t.Helper()
	got, err := s.ListConsumers(t.Context(), q)
	requireNoError(t, err, "ListConsumers")
	names := make([]string, len(got))
	for i, c := range got {
		names[i] = c.Owner + "/" + c.Name
	}
	if !slices.Equal(names, want) {
		t.Fatalf("ListConsumers(%+v) = %v, want (in order) %v", q, names, want)
	}
}

// Create stores the consumer as given (AckedSeq 0), Get returns it, a
// second one of the same name conflicts, and List filters and orders.
func testConsumerCreateGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := newConsumer(bob, "audit", alice, model.Inbox)
	c.Filter = model.ConsumerFilter{From: []string{carol, dave}, Kind: []string{"task"}, Text: "Invoice"}
	c.SourceSeq, c.AckedSeq = 4, 9 // AckedSeq is not the caller's to set
	mustCreateConsumer(t, s, c, false)
	want := *c
	want.AckedSeq = 0
	if c.SourceSeq != 4 {
		t.Fatalf("after CreateConsumer without fromEnd: SourceSeq %d, want 4 as given", c.SourceSeq)
	}
	requireConsumer(t, mustGetConsumer(t, s, bob, "audit"), want, "GetConsumer after create")
	if box := c.Box(); box != model.BoxKind("CONSUMER:audit") {
		t.Fatalf("Box() = %s", box)
	}

	dup := newConsumer(bob, "audit", carol, model.Outbox)
	dup.CreatedAtMS = base + 1
	requireErrIs(t, s.CreateConsumer(ctx, dup, true), model.ErrConflict, "CreateConsumer(duplicate)")
	requireConsumer(t, mustGetConsumer(t, s, bob, "audit"), want, "GetConsumer after rejected duplicate")

	_, err := s.GetConsumer(ctx, bob, "nope")
	requireErrIs(t, err, model.ErrNotFound, "GetConsumer(unknown name)")
	_, err = s.GetConsumer(ctx, carol, "audit")
	requireErrIs(t, err, model.ErrNotFound, "GetConsumer(other owner)")

	// The same name under another owner is another consumer.
	mustCreateConsumer(t, s, newConsumer(alice, "audit", alice, model.Inbox), false)
	mustCreateConsumer(t, s, newConsumer(alice, "a-tasks", bob, model.Inbox), false)
	mustCreateConsumer(t, s, newConsumer(carol, "watch", alice, model.Outbox), false)

	requireConsumerNames(t, s, store.ConsumerQuery{}, alice+"/a-tasks", alice+"/audit", bob+"/audit", carol+"/watch")
	requireConsumerNames(t, s, store.ConsumerQuery{Owner: alice}, alice+"/a-tasks", alice+"/audit")
	requireConsumerNames(t, s, store.ConsumerQuery{SourceOwner: alice}, alice+"/audit", bob+"/audit", carol+"/watch")
	requireConsumerNames(t, s, store.ConsumerQuery{SourceOwner: alice, SourceBox: model.Inbox}, alice+"/audit", bob+"/audit")
	requireConsumerNames(t, s, store.ConsumerQuery{SourceBox: model.Inbox}, alice+"/a-tasks", alice+"/audit", bob+"/audit")
	requireConsumerNames(t, s, store.ConsumerQuery{Owner: bob, SourceOwner: alice, SourceBox: model.Inbox}, bob+"/audit")
	requireConsumerNames(t, s, store.ConsumerQuery{Owner: dave})
	requireConsumerNames(t, s, store.ConsumerQuery{SourceOwner: alice, SourceBox: model.GroupInbox})

	all, err := s.ListConsumers(ctx, store.ConsumerQuery{Owner: bob})
	requireNoError(t, err, "ListConsumers")
	if len(all) != 1 {
		t.Fatalf("ListConsumers(bob) = %s", dump(all))
	}
	requireConsumer(t, all[0], want, "ListConsumers(bob)[0]")

	created := eventsOf(allEvents(t, s, ""), model.EventConsumerCreated, "")
	if len(created) != 4 {
		t.Fatalf("%d consumer.created events, want 4 (none for the duplicate): %s", len(created), dump(created))
	}
	if e := created[0]; e.Owner != bob || e.AtMS != base {
		t.Fatalf("first consumer.created event = %s; want owner %s at %d", dump(e), bob, base)
	}
}

// fromEnd starts the consumer at the source box's last seq, whatever
// SourceSeq the caller passed.
func testConsumerFromEnd(t *testing.T, s store.Store) {
	seedBox(t, s, "from-end", alice, model.Inbox, 3, base, nil)
	seedBox(t, s, "from-end-other", alice, model.Outbox, 5, base, nil)
	seedBox(t, s, "from-end-other", bob, model.Inbox, 7, base, nil)

	c := newConsumer(bob, "tail", alice, model.Inbox)
	c.SourceSeq = 1
	mustCreateConsumer(t, s, c, true)
	if c.SourceSeq != 3 {
		t.Fatalf("CreateConsumer(fromEnd) set SourceSeq %d, want 3 (the source's last seq)", c.SourceSeq)
	}
	if got := mustGetConsumer(t, s, bob, "tail"); got.SourceSeq != 3 || got.AckedSeq != 0 {
		t.Fatalf("GetConsumer after fromEnd = %s; want SourceSeq 3, AckedSeq 0", dump(got))
	}

	empty := newConsumer(bob, "empty", carol, model.Inbox)
	empty.SourceSeq = 6
	mustCreateConsumer(t, s, empty, true)
	if got := mustGetConsumer(t, s, bob, "empty"); got.SourceSeq != 0 || empty.SourceSeq != 0 {
		t.Fatalf("fromEnd on an empty box: SourceSeq %d (stored %d), want 0", empty.SourceSeq, got.SourceSeq)
	}

	given := newConsumer(bob, "given", alice, model.Inbox)
	given.SourceSeq = 2
	mustCreateConsumer(t, s, given, false)
	if got := mustGetConsumer(t, s, bob, "given"); got.SourceSeq != 2 {
		t.Fatalf("without fromEnd: SourceSeq %d, want 2 as given", got.SourceSeq)
	}
}

// AdvanceConsumer inserts records as Apply does: seqs 1..n in order,
// record.created events, existing records reported and left alone, no
// conversations for a consumer's box.
func testConsumerAdvance(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := seedBox(t, s, "adv", alice, model.Inbox, 4, base, func(int) []recOpt { return []recOpt{withThread("t")} })
	mustCreateConsumer(t, s, newConsumer(bob, "c", alice, model.Inbox), false)
	box := model.ConsumerBox("c")

	now := base + 100
	var recs []model.Record
	for _, r := range src[:3] {
		recs = append(recs, consumerRec(bob, "c", r.MsgID, now, withThread("t"), withTags("x")))
	}
	res := mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", FromSourceSeq: 0, ToSourceSeq: 3, Records: recs, NowMS: now})
	if len(res.Existing) != 0 {
		t.Fatalf("Existing = %v, want none", res.Existing)
	}
	requireIDs(t, res.Created, recordIDs(recs), "AdvanceConsumer: Created in order")
	if got := seqs(res.Created); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("consumer box seqs = %v, want [1 2 3]", got)
	}
	for i, c := range res.Created {
		want := recs[i]
		want.Seq = int64(i + 1)
		requireRecord(t, c, want, "AdvanceConsumer Created")
		requireRecord(t, mustGet(t, s, c.RecordID), want, "GetRecord after AdvanceConsumer")
	}
	got := mustGetConsumer(t, s, bob, "c")
	if got.SourceSeq != 3 || got.UpdatedAtMS != now || got.AckedSeq != 0 {
		t.Fatalf("consumer after advance = %s; want SourceSeq 3, UpdatedAtMS %d", dump(got), now)
	}
	requireIDs(t, syncAll(t, s, store.SyncParams{Owner: bob, Box: box}, 2), recordIDs(recs), "Sync of the consumer box")

	evs := allEvents(t, s, bob)
	for _, r := range recs {
		es := eventsOf(evs, model.EventRecordCreated, r.RecordID)
		if len(es) != 1 || es[0].BoxKind != box || es[0].Owner != bob || es[0].AtMS != now || es[0].MsgID != r.MsgID {
			t.Fatalf("record.created events for %s = %s; want one in %s at %d", r.RecordID, dump(es), box, now)
		}
	}
	convs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: bob, Limit: 10})
	requireNoError(t, err, "ListConversations")
	if len(convs) != 0 {
		t.Fatalf("a consumer's box fed conversations: %s", dump(convs))
	}

	// A step that repeats a record and adds one: the old one is reported
	// as existing and untouched, the new one takes the next seq.
	mustUpdate(t, s, transition(recs[2].RecordID, model.Unread, model.Readed, now+1))
	now2 := base + 200
	again := consumerRec(bob, "c", recs[2].MsgID, now2)
	fresh := consumerRec(bob, "c", src[3].MsgID, now2)
	res = mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", FromSourceSeq: 3, ToSourceSeq: 4,
		Records: []model.Record{again, fresh}, NowMS: now2})
	requireSameSet(t, res.Existing, []string{again.RecordID}, "Existing")
	requireIDs(t, res.Created, []string{fresh.RecordID}, "Created")
	if res.Created[0].Seq != 4 {
		t.Fatalf("new record seq = %d, want 4", res.Created[0].Seq)
	}
	if r := mustGet(t, s, again.RecordID); r.State != model.Readed || r.Seq != 3 {
		t.Fatalf("existing record changed by AdvanceConsumer: %s", dump(r))
	}
	if n := len(eventsOf(allEvents(t, s, bob), model.EventRecordCreated, again.RecordID)); n != 1 {
		t.Fatalf("existing record got %d record.created events, want 1", n)
	}

	// A step that found nothing to take still moves SourceSeq.
	res = mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", FromSourceSeq: 4, ToSourceSeq: 9, NowMS: now2 + 1})
	if len(res.Created) != 0 || len(res.Existing) != 0 {
		t.Fatalf("empty step: %s", dump(res))
	}
	if got := mustGetConsumer(t, s, bob, "c"); got.SourceSeq != 9 {
		t.Fatalf("SourceSeq after empty step = %d, want 9", got.SourceSeq)
	}
	requireLastSeq(t, s, bob, box, 4)
}

// A stale FromSourceSeq conflicts and writes nothing.
func testConsumerAdvanceCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	src := seedBox(t, s, "cas", alice, model.Inbox, 3, base, nil)
	mustCreateConsumer(t, s, newConsumer(bob, "c", alice, model.Inbox), false)
	box := model.ConsumerBox("c")
	first := consumerRec(bob, "c", src[0].MsgID, base+10)
	mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", FromSourceSeq: 0, ToSourceSeq: 1,
		Records: []model.Record{first}, NowMS: base + 10})
	before := mustGetConsumer(t, s, bob, "c")
	evBefore := allEvents(t, s, "")

	for _, from := range []int64{0, 2} {
		stale := []model.Record{consumerRec(bob, "c", src[1].MsgID, base+20), consumerRec(bob, "c", src[2].MsgID, base+20)}
		res, err := s.AdvanceConsumer(ctx, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", FromSourceSeq: from,
			ToSourceSeq: 3, Records: stale, NowMS: base + 20})
		requireErrIs(t, err, model.ErrConflict, fmt.Sprintf("AdvanceConsumer(from %d, SourceSeq is 1)", from))
		if res != nil && len(res.Created) != 0 {
			t.Fatalf("conflicting advance reported created records: %s", dump(res))
		}
		for _, r := range stale {
			requireNoRecord(t, s, r.RecordID)
		}
		requireConsumer(t, mustGetConsumer(t, s, bob, "c"), before, "consumer after conflicting advance")
		requireLastSeq(t, s, bob, box, 1)
		if after := allEvents(t, s, ""); len(after) != len(evBefore) {
			t.Fatalf("conflicting advance appended %d events", len(after)-len(evBefore))
		}
	}

	// The winner's next step goes through, and seqs continue without a gap.
	next := consumerRec(bob, "c", src[1].MsgID, base+30)
	res := mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", FromSourceSeq: 1, ToSourceSeq: 2,
		Records: []model.Record{next}, NowMS: base + 30})
	if len(res.Created) != 1 || res.Created[0].Seq != 2 {
		t.Fatalf("advance after a conflict = %s, want one record with seq 2", dump(res))
	}
}

// A deleted (or never created) consumer cannot be advanced.
func testConsumerAdvanceDeleted(t *testing.T, s store.Store) {
	ctx := t.Context()
	m := msgID("adv-deleted")
	mustApply(t, s, newPlan(m, base, newRec(alice, model.Inbox, m, base)))
	rec := consumerRec(bob, "c", m, base+10)
	_, err := s.AdvanceConsumer(ctx, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", ToSourceSeq: 1,
		Records: []model.Record{rec}, NowMS: base + 10})
	requireErrIs(t, err, model.ErrNotFound, "AdvanceConsumer(never created)")
	requireNoRecord(t, s, rec.RecordID)

	mustCreateConsumer(t, s, newConsumer(bob, "c", alice, model.Inbox), false)
	requireNoError(t, s.DeleteConsumer(ctx, bob, "c", base+5), "DeleteConsumer")
	_, err = s.AdvanceConsumer(ctx, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "c", ToSourceSeq: 1,
		Records: []model.Record{rec}, NowMS: base + 10})
	requireErrIs(t, err, model.ErrNotFound, "AdvanceConsumer(deleted)")
	requireNoRecord(t, s, rec.RecordID)
}

// A step examined for a consumer that was then deleted and created again
// under the same name (at the same source seq) must not land in the new
// one: CreatedAtMS in the compare-and-set tells them apart.
func testConsumerAdvanceRecreated(t *testing.T, s store.Store) {
	ctx := t.Context()
	m := msgID("adv-recreated")
	mustApply(t, s, newPlan(m, base, newRec(alice, model.Inbox, m, base)))
	old := newConsumer(bob, "c", alice, model.Inbox)
	mustCreateConsumer(t, s, old, false)
	requireNoError(t, s.DeleteConsumer(ctx, bob, "c", base+5), "DeleteConsumer")
	fresh := newConsumer(bob, "c", alice, model.Inbox)
	fresh.CreatedAtMS, fresh.UpdatedAtMS = base+6, base+6
	mustCreateConsumer(t, s, fresh, false)

	rec := consumerRec(bob, "c", m, base+10)
	_, err := s.AdvanceConsumer(ctx, &store.ConsumerAdvance{Owner: bob, Name: "c", CreatedAtMS: old.CreatedAtMS,
		ToSourceSeq: 1, Records: []model.Record{rec}, NowMS: base + 10})
	requireErrIs(t, err, model.ErrConflict, "AdvanceConsumer(step of the deleted consumer)")
	requireNoRecord(t, s, rec.RecordID)
	if c := mustGetConsumer(t, s, bob, "c"); c.SourceSeq != 0 {
		t.Fatalf("the new consumer moved to source seq %d on the old one's step", c.SourceSeq)
	}
	res := mustAdvance(t, s, &store.ConsumerAdvance{Owner: bob, Name: "c", CreatedAtMS: fresh.CreatedAtMS,
		ToSourceSeq: 1, Records: []model.Record{rec}, NowMS: base + 11})
	if len(res.Created) != 1 {
		t.Fatalf("the new consumer's own step: %+v", res)
	}
}

func mustAck(t *testing.T, s store.Store, owner, name string, seq, nowMS, want int64) model.Consumer {
	t.Helper()
	c, err := s.AckConsumer(t.Context(), owner, name, seq, nowMS)
	requireNoError(t, err, fmt.Sprintf("AckConsumer(%d)", seq))
	if c.AckedSeq != want || c.Owner != owner || c.Name != name {
		t.Fatalf("AckConsumer(%d) returned %s; want AckedSeq %d", seq, dump(c), want)
	}
	if got := mustGetConsumer(t, s, owner, name); got.AckedSeq != want {
		t.Fatalf("after AckConsumer(%d): stored AckedSeq %d, want %d", seq, got.AckedSeq, want)
	}
	return c
}

// Acks only move the cursor forward, are idempotent, and cannot pass the
// last seq of the consumer's box.
func testConsumerAck(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateConsumer(t, s, newConsumer(bob, "c", alice, model.Inbox), false)

	var e *model.Error
	_, err := s.AckConsumer(ctx, bob, "c", 1, base+1)
	if !errors.As(err, &e) || !errors.Is(err, model.ErrInvalid) || e.Field != "seq" {
		t.Fatalf("AckConsumer(1) on an empty box = %v; want model.ErrInvalid on field seq", err)
	}
	mustAck(t, s, bob, "c", 0, base+1, 0)

	feedConsumer(t, s, bob, "c", "ack", 3, base+10)
	c := mustAck(t, s, bob, "c", 2, base+20, 2)
	if c.UpdatedAtMS != base+20 || c.SourceSeq != 3 {
		t.Fatalf("AckConsumer(2) returned %s; want UpdatedAtMS %d and SourceSeq 3", dump(c), base+20)
	}
	mustAck(t, s, bob, "c", 2, base+21, 2) // idempotent
	mustAck(t, s, bob, "c", 1, base+22, 2) // never back

	e = nil
	_, err = s.AckConsumer(ctx, bob, "c", 4, base+23)
	if !errors.As(err, &e) || !errors.Is(err, model.ErrInvalid) || e.Field != "seq" {
		t.Fatalf("AckConsumer(4) with last seq 3 = %v; want model.ErrInvalid on field seq", err)
	}
	if got := mustGetConsumer(t, s, bob, "c"); got.AckedSeq != 2 {
		t.Fatalf("rejected ack moved the cursor to %d", got.AckedSeq)
	}
	mustAck(t, s, bob, "c", 3, base+24, 3)

	_, err = s.AckConsumer(ctx, bob, "unknown", 1, base+25)
	requireErrIs(t, err, model.ErrNotFound, "AckConsumer(unknown consumer)")
	_, err = s.AckConsumer(ctx, carol, "c", 0, base+25)
	requireErrIs(t, err, model.ErrNotFound, "AckConsumer(other owner)")
}

// BoxLastSeq follows the seqs handed out, per (owner, box).
func testBoxLastSeq(t *testing.T, s store.Store) {
	requireLastSeq(t, s, alice, model.Inbox, 0)
	seedBox(t, s, "lastseq", alice, model.Inbox, 3, base, nil)
	seedBox(t, s, "lastseq", bob, model.TunnelOutbox, 2, base, nil)
	requireLastSeq(t, s, alice, model.Inbox, 3)
	requireLastSeq(t, s, bob, model.TunnelOutbox, 2)
	requireLastSeq(t, s, alice, model.Outbox, 0)
	requireLastSeq(t, s, bob, model.Inbox, 0)

	// A repeated plan consumes no seq.
	m := msgID("lastseq/" + alice + "/" + string(model.Inbox) + "/0")
	mustApply(t, s, newPlan(m, base+5, newRec(alice, model.Inbox, m, base)))
	requireLastSeq(t, s, alice, model.Inbox, 3)

	mustCreateConsumer(t, s, newConsumer(carol, "c", alice, model.Inbox), false)
	requireLastSeq(t, s, carol, model.ConsumerBox("c"), 0)
	feedConsumer(t, s, carol, "c", "lastseq-c", 2, base+10)
	requireLastSeq(t, s, carol, model.ConsumerBox("c"), 2)
	requireLastSeq(t, s, carol, model.ConsumerBox("d"), 0)
}

// DeleteConsumer removes the consumer, its box's records and the bodies
// only they referred to, and nothing else.
func testConsumerDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	mShared, mOnly, mSched := msgID("del-shared"), msgID("del-only"), msgID("del-sched")
	mustApply(t, s, newPlan(mShared, base, newRec(alice, model.Inbox, mShared, base)))
	mustApply(t, s, newPlan(mOnly, base)) // a body no record of its own refers to
	e := newEntry("dispatch", "del-sched", base+1_000_000, carol)
	mustSchedule(t, s, e, nil)
	if e.MsgID != mSched {
		t.Fatal("newEntry's message id changed")
	}

	mustCreateConsumer(t, s, newConsumer(bob, "gone", alice, model.Inbox), false)
	mustCreateConsumer(t, s, newConsumer(bob, "keep", alice, model.Inbox), false)
	goneRecs := []model.Record{consumerRec(bob, "gone", mShared, base+10), consumerRec(bob, "gone", mOnly, base+10),
		consumerRec(bob, "gone", mSched, base+10)}
	mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "gone", ToSourceSeq: 3, Records: goneRecs, NowMS: base + 10})
	kept := consumerRec(bob, "keep", mShared, base+10)
	mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: bob, Name: "keep", ToSourceSeq: 1, Records: []model.Record{kept}, NowMS: base + 10})
	// Read once, so that a store remembering bodies holds it when it goes.
	if _, err := s.GetMessage(ctx, mOnly); err != nil {
		t.Fatalf("body of a consumer's record before the delete: %v", err)
	}

	requireNoError(t, s.DeleteConsumer(ctx, bob, "gone", base+20), "DeleteConsumer")
	_, err := s.GetConsumer(ctx, bob, "gone")
	requireErrIs(t, err, model.ErrNotFound, "GetConsumer after delete")
	requireConsumerNames(t, s, store.ConsumerQuery{}, bob+"/keep")
	for _, r := range goneRecs {
		requireNoRecord(t, s, r.RecordID)
	}
	if recs := syncAll(t, s, store.SyncParams{Owner: bob, Box: model.ConsumerBox("gone")}, 10); len(recs) != 0 {
		t.Fatalf("deleted consumer's box still holds %s", dump(recs))
	}
	mustGet(t, s, kept.RecordID)
	mustGet(t, s, model.RecordID(alice, model.Inbox, mShared, ""))

	if b, err := s.GetMessage(ctx, mOnly); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("body only the deleted consumer referred to: GetMessage = %q, %v; want model.ErrNotFound", b, err)
	}
	for _, m := range []string{mShared, mSched} {
		if _, err := s.GetMessage(ctx, m); err != nil {
			t.Fatalf("body still referred to (%s) was deleted: %v", short(m), err)
		}
	}
	deleted := eventsOf(allEvents(t, s, bob), model.EventConsumerDeleted, "")
	if len(deleted) != 1 || deleted[0].AtMS != base+20 || deleted[0].Owner != bob {
		t.Fatalf("consumer.deleted events = %s; want one for %s at %d", dump(deleted), bob, base+20)
	}

	requireErrIs(t, s.DeleteConsumer(ctx, bob, "gone", base+30), model.ErrNotFound, "DeleteConsumer(again)")
	requireErrIs(t, s.DeleteConsumer(ctx, carol, "keep", base+30), model.ErrNotFound, "DeleteConsumer(other owner)")
	mustGetConsumer(t, s, bob, "keep")
}
