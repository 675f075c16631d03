package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func scheduleTests() []testCase {
	return []testCase{
		{"StoresMessageAndEntry", testScheduleBasics},
		{"DuplicateOpAndMsg", testScheduleDuplicate},
		{"DueOrderAndFilters", testScheduleDueOrder},
		{"NextDue", testScheduleNextDue},
		{"ApplyConsumesOnce", testScheduleConsume},
		{"ConsumedIDNotReused", testScheduleIDNotReused},
		{"ConcurrentConsumeExactlyOnce", testScheduleConsumeConcurrent},
		{"IdempotencyKeyBound", testScheduleIdem},
		{"IdempotentRepeatAfterDue", testScheduleRepeatAfterDue},
		{"Cancel", testScheduleCancel},
	}
}

func newEntry(op, name string, due int64, recipients ...string) *store.ScheduleEntry {
	m := msgID(name)
	return &store.ScheduleEntry{
		Op: op, MsgID: m, MsgBody: msgBody(name),
		Ctx:         []byte(`{"caller":"did:test:alice","note":"` + name + `"}`),
		Recipients:  recipients,
		DueAtMS:     due,
		CreatedAtMS: base,
		Sender:      "did:test:sender",
	}
}

func mustSchedule(t *testing.T, s store.Store, e *store.ScheduleEntry, idem *store.Idempotency) int64 {
	t.Helper()
	id, created, err := s.Schedule(t.Context(), e, idem)
	requireNoError(t, err, "Schedule")
	if !created || id <= 0 {
		t.Fatalf("Schedule(%s %s) = id %d, created %v; want a new positive id", e.Op, short(e.MsgID), id, created)
	}
	e.ID = id
	return id
}

// requireEntry compares a listed entry with what was scheduled.
func requireEntry(t *testing.T, got store.ScheduleEntry, want *store.ScheduleEntry, what string) {
	t.Helper()
	var gc, wc any
	gerr, werr := json.Unmarshal(got.Ctx, &gc), json.Unmarshal(want.Ctx, &wc)
	sameCtx := gerr == nil && werr == nil && reflect.DeepEqual(gc, wc)
	gr, wr := slices.Clone(got.Recipients), slices.Clone(want.Recipients)
	slices.Sort(gr)
	slices.Sort(wr)
	if got.ID != want.ID || got.Op != want.Op || got.MsgID != want.MsgID || got.DueAtMS != want.DueAtMS || got.Sender != want.Sender ||
		got.CreatedAtMS != want.CreatedAtMS || !slices.Equal(gr, wr) || !sameCtx ||
		(len(got.MsgBody) != 0 && !bytes.Equal(got.MsgBody, want.MsgBody)) {
		t.Fatalf("%s: entry\n got: %s ctx=%s body=%q\nwant: %s ctx=%s", what, dump(got), got.Ctx, got.MsgBody, dump(want), want.Ctx)
	}
}

func entryIDs(es []store.ScheduleEntry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func requireDue(t *testing.T, s store.Store, p store.DueParams, want []int64) []store.ScheduleEntry {
	t.Helper()
	got, err := s.DueScheduled(t.Context(), p)
	requireNoError(t, err, "DueScheduled")
	if g := entryIDs(got); !slices.Equal(g, want) {
		t.Fatalf("DueScheduled(before base%+d, recipient %q, limit %d) = ids %v, want %v", p.BeforeMS-base, p.Recipient, p.Limit, g, want)
	}
	return got
}

func requireListed(t *testing.T, s store.Store, q store.ScheduleQuery, want []int64, wantTotal int64) {
	t.Helper()
	got, total, err := s.ListScheduled(t.Context(), q)
	requireNoError(t, err, "ListScheduled")
	if g := entryIDs(got); !slices.Equal(g, want) || total != wantTotal {
		t.Fatalf("ListScheduled(%+v) = ids %v, total %d; want %v, total %d", q, g, total, want, wantTotal)
	}
}

func requireNextDue(t *testing.T, s store.Store, want int64, wantOK bool, what string) {
	t.Helper()
	at, ok, err := s.NextDue(t.Context())
	requireNoError(t, err, "NextDue")
	if ok != wantOK || (ok && at != want) {
		t.Fatalf("%s: NextDue = base%+d, %v; want base%+d, %v", what, at-base, ok, want-base, wantOK)
	}
}

// Schedule stores the message and the entry, appends message.scheduled and
// materializes nothing early.
func testScheduleBasics(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := newEntry("post_send", "sched-basic", base+60_000, alice, bob)
	mustSchedule(t, s, e, nil)

	body, err := s.GetMessage(ctx, e.MsgID)
	requireNoError(t, err, "GetMessage of a scheduled message")
	if !bytes.Equal(body, e.MsgBody) {
		t.Fatalf("GetMessage = %q, want %q", body, e.MsgBody)
	}
	evs := allEvents(t, s, "")
	var sched []model.Event
	for _, ev := range evs {
		if ev.Type == model.EventMsgScheduled && ev.MsgID == e.MsgID {
			sched = append(sched, ev)
		}
	}
	if len(sched) != 1 || sched[0].Owner != e.Sender {
		t.Fatalf("message.scheduled events for the message: %s, want one, the sender's (all events: %s)", dump(sched), dump(evs))
	}
	if len(eventsOf(evs, model.EventRecordCreated, "")) != 0 {
		t.Fatal("Schedule created records")
	}
	for _, did := range []string{alice, bob} {
		if ok, err := s.CanReadMessage(ctx, did, e.MsgID); err != nil || ok {
			t.Fatalf("CanReadMessage(%s) before the entry is due = %v, %v; want false", did, ok, err)
		}
	}

	requireDue(t, s, store.DueParams{BeforeMS: base + 59_999, Limit: 10}, nil)
	got := requireDue(t, s, store.DueParams{BeforeMS: base + 60_000, Limit: 10}, []int64{e.ID})
	requireEntry(t, got[0], e, "DueScheduled")
	listed, total, err := s.ListScheduled(ctx, store.ScheduleQuery{Limit: 10})
	requireNoError(t, err, "ListScheduled")
	if len(listed) != 1 || total != 1 {
		t.Fatalf("ListScheduled = %d entries, total %d; want 1, 1", len(listed), total)
	}
	requireEntry(t, listed[0], e, "ListScheduled")
}

// A second Schedule of the same (op, msg_id) returns the first id.
func testScheduleDuplicate(t *testing.T, s store.Store) {
	e := newEntry("dispatch", "sched-dup", base+1_000, alice)
	id := mustSchedule(t, s, e, nil)
	again := newEntry("dispatch", "sched-dup", base+9_000, bob)
	id2, created, err := s.Schedule(t.Context(), again, nil)
	requireNoError(t, err, "Schedule duplicate")
	if created || id2 != id {
		t.Fatalf("duplicate Schedule = id %d, created %v; want id %d, created false", id2, created, id)
	}
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{id}, 1)
	got := requireDue(t, s, store.DueParams{BeforeMS: base + 100_000, Limit: 10}, []int64{id})
	requireEntry(t, got[0], e, "the first entry, unchanged by the duplicate")

	// Same message, other op: another entry.
	other := newEntry("post_send", "sched-dup", base+2_000, alice)
	id3 := mustSchedule(t, s, other, nil)
	if id3 == id {
		t.Fatal("entries for different ops share an id")
	}
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{id, id3}, 2)
}

// DueScheduled orders by (due_at_ms, id): due time, then insertion order.
func testScheduleDueOrder(t *testing.T, s store.Store) {
	e0 := newEntry("dispatch", "due-0", base+3_000, alice)
	e1 := newEntry("dispatch", "due-1", base+1_000, bob)
	mustSchedule(t, s, e0, nil)
	mustSchedule(t, s, e1, nil)
	// Ten entries due at the same instant: they must come out in insertion
	// order (their msg ids, being hashes, are in no particular order).
	var same, sameAlice, sameCarol, byDave, byDaveToAlice []int64
	for i := range 10 {
		r := []string{alice}
		if i%2 == 1 {
			r = []string{bob, carol}
		}
		e := newEntry([]string{"dispatch", "post_send"}[i%2], fmt.Sprintf("due-same-%d", i), base+2_000, r...)
		if i%3 == 0 {
			e.Sender = dave
		}
		id := mustSchedule(t, s, e, nil)
		if i%3 == 0 {
			byDave = append(byDave, id)
			if i%2 == 0 {
				byDaveToAlice = append(byDaveToAlice, id)
			}
		}
		same = append(same, id)
		if i%2 == 0 {
			sameAlice = append(sameAlice, id)
		} else {
			sameCarol = append(sameCarol, id)
		}
	}
	e12 := newEntry("post_send", "due-12", base+5_000, alice)
	mustSchedule(t, s, e12, nil)

	cat := func(parts ...[]int64) []int64 { return slices.Concat(parts...) }
	requireDue(t, s, store.DueParams{BeforeMS: base + 999, Limit: 100}, nil)
	requireDue(t, s, store.DueParams{BeforeMS: base + 1_000, Limit: 100}, []int64{e1.ID})
	requireDue(t, s, store.DueParams{BeforeMS: base + 2_000, Limit: 100}, cat([]int64{e1.ID}, same))
	requireDue(t, s, store.DueParams{BeforeMS: base + 2_999, Limit: 100}, cat([]int64{e1.ID}, same))
	requireDue(t, s, store.DueParams{BeforeMS: base + 3_000, Limit: 100}, cat([]int64{e1.ID}, same, []int64{e0.ID}))
	requireDue(t, s, store.DueParams{BeforeMS: base + 3_000, Limit: 4}, cat([]int64{e1.ID}, same[:3]))
	requireDue(t, s, store.DueParams{BeforeMS: base + 3_000, Recipient: alice, Limit: 100}, cat(sameAlice, []int64{e0.ID}))
	requireDue(t, s, store.DueParams{BeforeMS: base + 3_000, Recipient: carol, Limit: 100}, sameCarol)
	requireDue(t, s, store.DueParams{BeforeMS: base + 3_000, Recipient: bob, Limit: 100}, cat([]int64{e1.ID}, sameCarol))
	requireDue(t, s, store.DueParams{BeforeMS: base + 3_000, Recipient: dave, Limit: 100}, nil)

	all := cat([]int64{e1.ID}, same, []int64{e0.ID, e12.ID})
	requireListed(t, s, store.ScheduleQuery{Limit: 100}, all, 13)
	requireListed(t, s, store.ScheduleQuery{Limit: 2}, all[:2], 13)
	requireListed(t, s, store.ScheduleQuery{Recipient: alice, Limit: 100}, cat(sameAlice, []int64{e0.ID, e12.ID}), int64(len(sameAlice)+2))
	requireListed(t, s, store.ScheduleQuery{Recipient: alice, Limit: 1}, sameAlice[:1], int64(len(sameAlice)+2))
	requireListed(t, s, store.ScheduleQuery{Recipient: dave, Limit: 10}, nil, 0)
	// By sender, and by sender and recipient at once.
	requireListed(t, s, store.ScheduleQuery{Sender: dave, Limit: 100}, byDave, int64(len(byDave)))
	requireListed(t, s, store.ScheduleQuery{Sender: dave, Limit: 1}, byDave[:1], int64(len(byDave)))
	requireListed(t, s, store.ScheduleQuery{Sender: dave, Recipient: alice, Limit: 100}, byDaveToAlice, int64(len(byDaveToAlice)))
	requireListed(t, s, store.ScheduleQuery{Sender: alice, Limit: 100}, nil, 0)
	// By op: entries of even index are dispatches.
	var daveDispatches []int64
	for i, id := range same {
		if i%3 == 0 && i%2 == 0 {
			daveDispatches = append(daveDispatches, id)
		}
	}
	requireListed(t, s, store.ScheduleQuery{Sender: dave, Op: "dispatch", Limit: 100}, daveDispatches, int64(len(daveDispatches)))
	requireListed(t, s, store.ScheduleQuery{Op: "post_send", Recipient: alice, Limit: 100}, []int64{e12.ID}, 1)
	listed, _, err := s.ListScheduled(t.Context(), store.ScheduleQuery{Sender: dave, Limit: 1})
	requireNoError(t, err, "ListScheduled")
	if listed[0].Sender != dave {
		t.Fatalf("listed entry's sender = %q, want %q", listed[0].Sender, dave)
	}
}

func testScheduleNextDue(t *testing.T, s store.Store) {
	requireNextDue(t, s, 0, false, "empty store")
	e1 := newEntry("dispatch", "next-1", base+7_000, alice)
	mustSchedule(t, s, e1, nil)
	requireNextDue(t, s, base+7_000, true, "one entry")
	e2 := newEntry("dispatch", "next-2", base+4_000, bob)
	mustSchedule(t, s, e2, nil)
	requireNextDue(t, s, base+4_000, true, "two entries")

	mustApply(t, s, consumePlan(e2, base+4_000))
	requireNextDue(t, s, base+7_000, true, "after the earliest was consumed")
	mustApply(t, s, consumePlan(e1, base+7_000))
	requireNextDue(t, s, 0, false, "after all were consumed")
}

// consumePlan materializes entry e into its recipients' inboxes.
func consumePlan(e *store.ScheduleEntry, nowMS int64) *store.Plan {
	p := &store.Plan{MsgID: e.MsgID, MsgBody: e.MsgBody, NowMS: nowMS, ConsumeSchedule: e.ID}
	for _, r := range e.Recipients {
		p.Records = append(p.Records, newRec(r, model.Inbox, e.MsgID, nowMS))
	}
	return p
}

// Apply with ConsumeSchedule deletes the entry in the same transaction;
// consuming it again is a conflict that writes nothing.
func testScheduleConsume(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := newEntry("dispatch", "consume", base+1_000, alice, bob)
	other := newEntry("dispatch", "consume-other", base+1_000, alice)
	mustSchedule(t, s, e, nil)
	mustSchedule(t, s, other, nil)

	p := consumePlan(e, base+1_000)
	res := mustApply(t, s, p)
	requireIDs(t, res.Created, recordIDs(p.Records), "Created")
	requireDue(t, s, store.DueParams{BeforeMS: base + 100_000, Limit: 10}, []int64{other.ID})
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{other.ID}, 1)

	before := allEvents(t, s, "")
	again := consumePlan(e, base+2_000)
	again.Records = append(again.Records, newRec(carol, model.Inbox, e.MsgID, base+2_000))
	_, err := s.Apply(ctx, again)
	requireErrIs(t, err, model.ErrConflict, "second Apply consuming the same entry")
	requireNoRecord(t, s, again.Records[2].RecordID)
	for _, c := range res.Created {
		requireRecord(t, mustGet(t, s, c.RecordID), c, "record after the rejected second consume")
	}
	if after := allEvents(t, s, ""); len(after) != len(before) {
		t.Fatalf("rejected consume appended %d events", len(after)-len(before))
	}
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{other.ID}, 1)

	// The same plan without ConsumeSchedule is an ordinary repeat.
	again.ConsumeSchedule = 0
	res2 := mustApply(t, s, again)
	requireSameSet(t, res2.Existing, recordIDs(res.Created), "Existing")
	requireIDs(t, res2.Created, []string{again.Records[2].RecordID}, "Created")
}

// A consumed entry's id is never given to a later entry: a late, repeated
// materialization of the old entry must conflict, not consume the new one.
func testScheduleIDNotReused(t *testing.T, s store.Store) {
	e1 := newEntry("dispatch", "reuse-1", base+1_000, alice)
	mustSchedule(t, s, e1, nil)
	mustApply(t, s, consumePlan(e1, base+1_000))
	e2 := newEntry("dispatch", "reuse-2", base+5_000, bob)
	mustSchedule(t, s, e2, nil)
	if e2.ID == e1.ID {
		t.Fatalf("the consumed entry's id %d was reused for a new entry", e1.ID)
	}
	_, err := s.Apply(t.Context(), consumePlan(e1, base+2_000))
	requireErrIs(t, err, model.ErrConflict, "late second consume of the first entry")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{e2.ID}, 1)
}

// Several schedulers racing to materialize one entry: exactly one succeeds.
func testScheduleConsumeConcurrent(t *testing.T, s store.Store) {
	e := newEntry("dispatch", "consume-race", base+1_000, alice, bob)
	mustSchedule(t, s, e, nil)
	const workers = 8
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			_, errs[w] = s.Apply(t.Context(), consumePlan(e, base+1_000+int64(w)))
		})
	}
	wg.Wait()
	ok := 0
	for w, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, model.ErrConflict):
			t.Fatalf("worker %d: %v; want nil or model.ErrConflict", w, err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d Applies consumed the entry, want exactly 1", ok)
	}
	if n := len(eventsOf(allEvents(t, s, ""), model.EventRecordCreated, "")); n != 2 {
		t.Fatalf("%d record.created events, want 2", n)
	}
	requireNextDue(t, s, 0, false, "after the race")
}

// The idempotency key given to Schedule is bound to the scheduled message.
func testScheduleIdem(t *testing.T, s store.Store) {
	key := &store.Idempotency{Scope: alice + "/post_send", Key: "sched-key"}
	e := newEntry("post_send", "sched-idem", base+1_000, bob)
	mustSchedule(t, s, e, key)

	mB := msgID("sched-idem-other")
	pb := newPlan(mB, base+10, newRec(bob, model.Inbox, mB, base+10))
	pb.Idem = key
	_, err := s.Apply(t.Context(), pb)
	requireErrIs(t, err, model.ErrConflict, "Apply of another message with the key bound by Schedule")
	requireNoRecord(t, s, pb.Records[0].RecordID)

	p := consumePlan(e, base+1_000)
	p.Idem = key
	if res := mustApply(t, s, p); len(res.Created) != 1 {
		t.Fatalf("materializing the entry with its own key created %d records, want 1", len(res.Created))
	}
}

// A repeat of a keyed Schedule answers the entry the key made, before it
// is due, after it came due and after it was cancelled, and never
// schedules the message again; a key bound by an immediate send answers
// zeros and schedules nothing either.
func testScheduleRepeatAfterDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	repeat := func(e *store.ScheduleEntry, key *store.Idempotency, wantID, wantDue int64, when string) {
		t.Helper()
		again := *e
		again.ID, again.DueAtMS, again.CreatedAtMS = 0, e.DueAtMS+60_000, e.CreatedAtMS+500
		id, created, err := s.Schedule(ctx, &again, key)
		requireNoError(t, err, "Schedule repeated "+when)
		if created || id != wantID || again.ID != wantID || again.DueAtMS != wantDue {
			t.Fatalf("Schedule repeated %s = id %d (entry %d, due %d), created %v; want id %d, due %d, not created",
				when, id, again.ID, again.DueAtMS, created, wantID, wantDue)
		}
	}
	key := &store.Idempotency{Scope: alice + "|post_send", Key: "repeat-key"}
	e := newEntry("post_send", "repeat-due", base+1_000, bob)
	mustSchedule(t, s, e, key)
	repeat(e, key, e.ID, base+1_000, "while pending")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{e.ID}, 1)
	mustApply(t, s, consumePlan(e, base+1_000))
	repeat(e, key, e.ID, base+1_000, "after it came due")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, nil, 0)
	requireNextDue(t, s, 0, false, "after the repeat of a delivered entry")
	// A repeat made at or after the due time is sent now (deliver_at_ms no
	// longer in the future): Apply answers with the key's entry instead.
	late := newPlan(e.MsgID, base+2_000, newRec(carol, model.Inbox, e.MsgID, base+2_000))
	late.Idem = key
	_, err := s.Apply(ctx, late)
	requireErrIs(t, err, model.ErrConflict, "Apply of a plan whose key a delayed send bound")
	if ks, ok := errors.AsType[*store.KeyScheduled](err); !ok || ks.ID != e.ID || ks.DueAtMS != base+1_000 {
		t.Fatalf("Apply of a plan whose key a delayed send bound = %v; want KeyScheduled{%d, %d}", err, e.ID, base+1_000)
	}
	requireNoRecord(t, s, late.Records[0].RecordID)

	other := &store.Idempotency{Scope: alice + "|post_send", Key: "repeat-cancelled"}
	c := newEntry("post_send", "repeat-cancelled", base+2_000, carol)
	mustSchedule(t, s, c, other)
	requireNoError(t, s.CancelScheduled(ctx, c.ID, base+100, ""), "CancelScheduled")
	repeat(c, other, c.ID, base+2_000, "after it was cancelled")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, nil, 0)

	wrong := newEntry("post_send", "repeat-other-message", base+3_000, bob)
	_, _, err = s.Schedule(ctx, wrong, key)
	requireErrIs(t, err, model.ErrConflict, "Schedule of another message with a key a delayed send bound")

	now := &store.Idempotency{Scope: alice + "|post_send", Key: "repeat-immediate"}
	m := msgID("repeat-immediate")
	p := newPlan(m, base+10, newRec(bob, model.Inbox, m, base+10))
	p.Idem = now
	mustApply(t, s, p)
	i := newEntry("post_send", "repeat-immediate", base+4_000, bob)
	repeat(i, now, 0, 0, "of a key an immediate send bound")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, nil, 0)
}

// A cancelled entry is gone, once: not listed, not due, not found, and a
// late materialization of it conflicts; the cancellation is an event, and
// another entry is untouched.
func testScheduleCancel(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := newEntry("post_send", "cancel-me", base+1_000, alice, bob)
	mustSchedule(t, s, e, nil)
	keep := newEntry("post_send", "keep-me", base+2_000, carol)
	mustSchedule(t, s, keep, nil)
	got, err := s.GetScheduled(ctx, e.ID)
	requireNoError(t, err, "GetScheduled")
	requireEntry(t, got, e, "GetScheduled")
	if !bytes.Equal(got.MsgBody, e.MsgBody) {
		t.Fatalf("GetScheduled body = %q, want %q", got.MsgBody, e.MsgBody)
	}
	requireNoError(t, s.CancelScheduled(ctx, e.ID, base+500, ""), "CancelScheduled")
	_, err = s.GetScheduled(ctx, e.ID)
	requireErrIs(t, err, model.ErrNotFound, "GetScheduled after the cancel")
	requireErrIs(t, s.CancelScheduled(ctx, e.ID, base+600, ""), model.ErrNotFound, "a second cancel")
	requireErrIs(t, s.CancelScheduled(ctx, 1<<40, base+600, "why"), model.ErrNotFound, "cancel of an entry that never was")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, []int64{keep.ID}, 1)
	requireListed(t, s, store.ScheduleQuery{Recipient: alice, Limit: 10}, nil, 0)
	due, err := s.DueScheduled(ctx, store.DueParams{BeforeMS: base + 10_000, Limit: 10})
	requireNoError(t, err, "DueScheduled")
	if len(due) != 1 || due[0].ID != keep.ID {
		t.Fatalf("due after the cancel = %s; want only %d", dump(due), keep.ID)
	}
	_, err = s.Apply(ctx, consumePlan(e, base+1_000))
	requireErrIs(t, err, model.ErrConflict, "materializing a cancelled entry")
	// Nothing refers to the cancelled message's body any more, and
	// retention looks only at the bodies of the records it deletes.
	requireBody(t, s, e.MsgID, false, "the cancelled message")
	requireBody(t, s, keep.MsgID, true, "the entry kept")
	evs := eventsOf(allEvents(t, s, ""), model.EventMsgCancelled, "")
	if len(evs) != 1 || evs[0].MsgID != e.MsgID || evs[0].AtMS != base+500 || evs[0].Detail != fmt.Sprintf("id=%d", e.ID) || evs[0].Owner != e.Sender {
		t.Fatalf("cancel events = %s; want one for %s at %d", dump(evs), short(e.MsgID), base+500)
	}

	// Dropped by the server, an entry goes the same way, with its reason.
	requireNoError(t, s.CancelScheduled(ctx, keep.ID, base+700, "its author left"), "CancelScheduled, dropped")
	requireListed(t, s, store.ScheduleQuery{Limit: 10}, nil, 0)
	requireBody(t, s, keep.MsgID, false, "the dropped message")
	evs = eventsOf(allEvents(t, s, ""), model.EventMsgDropped, "")
	if len(evs) != 1 || evs[0].MsgID != keep.MsgID || evs[0].AtMS != base+700 || evs[0].Detail != fmt.Sprintf("id=%d: its author left", keep.ID) || evs[0].Owner != keep.Sender {
		t.Fatalf("drop events = %s; want one for %s with its reason", dump(evs), short(keep.MsgID))
	}
	if n := len(eventsOf(allEvents(t, s, ""), model.EventMsgCancelled, "")); n != 1 {
		t.Fatalf("%d cancel events after a drop, want still 1", n)
	}
}

// ScheduledSenderCase is a scheduled entry as a server stored it before
// entries had a sender column, and the sender a migration must give it.
type ScheduledSenderCase struct {
	Op, Name, Body, Ctx, Want string // Ctx "" is SQL NULL
}

// ScheduledSenderCases are the entries the drivers' sender migrations are
// tested with (SQLite 0009, PostgreSQL 0008): a post_send's source, else
// its from; a dispatch's ingress tunnel; nobody when neither is there; and
// texts with an escaped NUL, which PostgreSQL's JSON types refuse.
var ScheduledSenderCases = []ScheduledSenderCase{
	{"post_send", "from", `{"from":"did:a","to":["did:b"]}`, `{}`, "did:a"},
	{"post_send", "source", `{"from":"did:grp","source":"did:m","to":[]}`, `null`, "did:m"},
	{"dispatch", "tunnel", `{"from":"did:ext","to":["did:b"]}`, `{"tunnel_did":"did:tun","platform":"tg"}`, "did:tun"},
	{"dispatch", "no ingress", `{"from":"did:ext","to":["did:b"]}`, ``, ""},
	{"dispatch", "null ingress", `{"from":"did:ext","to":["did:b"]}`, `null`, ""},
	{"post_send", "a NUL in its text", `{"content":{"content":"a\u0000b"},"from":"did:nul","to":["did:b"]}`, `{}`, "did:nul"},
	{"dispatch", "a NUL in its ingress", `{"from":"did:ext","to":["did:b"]}`, `{"tunnel_did":"did:tun2","address":"a\u0000b"}`, "did:tun2"},
}

// ScheduledSenderMsgID is the id a driver's test stores case name's
// message under.
func ScheduledSenderMsgID(name string) string { return msgID(name) }

// RequireScheduledSenders checks a store migrated from the
// ScheduledSenderCases, stored in that order under ScheduledSenderMsgID:
// each entry has its sender, and a sender's listing finds its own.
func RequireScheduledSenders(t *testing.T, s store.Store) {
	t.Helper()
	got, _, err := s.ListScheduled(t.Context(), store.ScheduleQuery{Limit: 100})
	if err != nil || len(got) != len(ScheduledSenderCases) {
		t.Fatalf("ListScheduled = %d entries, %v; want %d", len(got), err, len(ScheduledSenderCases))
	}
	for i, e := range ScheduledSenderCases {
		if got[i].Sender != e.Want {
			t.Errorf("%s entry %q: sender %q, want %q", e.Op, e.Name, got[i].Sender, e.Want)
		}
	}
	mine, n, err := s.ListScheduled(t.Context(), store.ScheduleQuery{Sender: "did:tun", Limit: 10})
	if err != nil || n != 1 || len(mine) != 1 || mine[0].MsgID != msgID("tunnel") {
		t.Fatalf("the tunnel's entries: %d of %d, %v", len(mine), n, err)
	}
}
