package storetest

// Retention of what is not a record: message bodies, the event log and
// idempotency keys (purge.go lists these tests and has their helpers).

import (
	"fmt"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// A body goes only when no record and no scheduled entry refers to it and
// it was last stored before MessagesBeforeMS; its receipts go with it.
func testPurgeBodies(t *testing.T, s store.Store) {
	ctx := t.Context()
	gone := func(owner string, box model.BoxKind, m string, st model.State) model.Record {
		return newRec(owner, box, m, oldMS, withState(st))
	}
	mShared, mSched, mFresh, mRestored, mOrphan, mPair :=
		msgID("b-shared"), msgID("b-sched"), msgID("b-fresh"), msgID("b-restored"), msgID("b-orphan"), msgID("b-pair")
	var purged []model.Record
	add := func(p *store.Plan) {
		mustApply(t, s, p)
		for _, r := range p.Records {
			if r.State.IsTerminal() {
				purged = append(purged, r)
			}
		}
	}
	// Another record, still unread, refers to the body.
	add(newPlan(mShared, oldMS, gone(alice, model.Inbox, mShared, model.Readed), newRec(bob, model.Inbox, mShared, oldMS)))
	// A scheduled entry refers to the body.
	e := newEntry("dispatch", "b-sched", purgeMS+1_000, carol)
	mustSchedule(t, s, e, nil)
	add(newPlan(mSched, oldMS, gone(alice, model.Inbox, mSched, model.Readed)))
	// The body was stored after MessagesBeforeMS.
	add(newPlan(mFresh, freshMS, gone(alice, model.Inbox, mFresh, model.Readed)))
	// The body was stored long ago and stored again recently.
	restored := newPlan(mRestored, oldMS, gone(alice, model.Inbox, mRestored, model.Readed))
	add(restored)
	again := *restored
	again.NowMS = freshMS
	if res := mustApply(t, s, &again); len(res.Created) != 0 {
		t.Fatal("repeated plan created records")
	}
	// Nothing refers to these any more once their records go.
	add(newPlan(mOrphan, oldMS, gone(alice, model.Inbox, mOrphan, model.Readed)))
	add(newPlan(mPair, oldMS, gone(alice, model.Inbox, mPair, model.Readed), gone(bob, model.Outbox, mPair, model.Sent)))

	rc := func(m, reader string) model.Receipt {
		return model.Receipt{MsgID: m, Iss: reader, Reader: reader, AtMS: oldMS + 5, Status: model.ReceiptReaded}
	}
	for _, r := range []model.Receipt{rc(mOrphan, alice), rc(mOrphan, bob), rc(mShared, alice), rc(mFresh, alice)} {
		mustPutReceipt(t, s, r, r)
	}

	res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: cutMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS, model.Outbox: cutMS}})
	requirePurged(t, res, map[model.BoxKind]int64{model.Inbox: 6, model.Outbox: 1}, 2, 0, "purge")
	for _, r := range purged {
		requireNoRecord(t, s, r.RecordID)
	}
	mustGet(t, s, model.RecordID(bob, model.Inbox, mShared, ""))
	for m, want := range map[string]bool{mShared: true, mSched: true, mFresh: true, mRestored: true, mOrphan: false, mPair: false} {
		requireBody(t, s, m, want, "after purge")
	}
	requireReceipts(t, s, store.ReceiptFilter{MsgID: mOrphan, Limit: 10})
	requireReceipts(t, s, store.ReceiptFilter{MsgID: mShared, Limit: 10}, rc(mShared, alice))
	requireReceipts(t, s, store.ReceiptFilter{MsgID: mFresh, Limit: 10}, rc(mFresh, alice))
	due, err := s.DueScheduled(ctx, store.DueParams{BeforeMS: purgeMS + 1_000, Limit: 10})
	requireNoError(t, err, "DueScheduled")
	if len(due) != 1 || string(due[0].MsgBody) != string(e.MsgBody) {
		t.Fatalf("scheduled entry after purge = %s, want it with its body", dump(due))
	}

	// The bodies too young to go wait for a later pass, which deletes them
	// once they are old enough though it deletes no record: mFresh now;
	// mRestored not, as a new record refers to it meanwhile.
	add(newPlan(mRestored, freshMS+1, newRec(carol, model.Inbox, mRestored, freshMS+1)))
	later := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: freshMS, Limit: 100}
	if res := mustPurge(t, s, later); !res.Empty() {
		t.Fatalf("a pass before the young bodies' time deleted %s", dump(res))
	}
	later.MessagesBeforeMS = purgeMS
	requirePurged(t, mustPurge(t, s, later), nil, 1, 0, "pass once the young bodies are old enough")
	for m, want := range map[string]bool{mShared: true, mSched: true, mFresh: false, mRestored: true} {
		requireBody(t, s, m, want, "after the later pass")
	}
	requireReceipts(t, s, store.ReceiptFilter{MsgID: mFresh, Limit: 10})
	if res := mustPurge(t, s, later); !res.Empty() {
		t.Fatalf("nothing is waiting any more, yet a pass deleted %s", dump(res))
	}
}

// Events older than EventsBeforeMS go (none when it is 0), and ids keep
// increasing past the deleted ones, even the newest.
func testPurgeEvents(t *testing.T, s store.Store) {
	seedBox(t, s, "events", alice, model.Inbox, 3, base, nil) // events at base, base+1, base+2
	before := allEvents(t, s, "")
	if len(before) != 3 {
		t.Fatalf("seeded %d events, want 3", len(before))
	}

	res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, EventsBeforeMS: base + 1, Limit: 100})
	requirePurged(t, res, nil, 0, 1, "purge of events before base+1")
	after := allEvents(t, s, "")
	if len(after) != 3 || after[0].EventID != before[1].EventID || after[1].EventID != before[2].EventID ||
		after[2].Type != model.EventPurged || after[2].EventID <= before[2].EventID || after[2].AtMS != purgeMS {
		t.Fatalf("events after purge = %s; want the two newer ones, then retention.purged", dump(after))
	}
	_, details := purgedEvents(t, s)
	requirePurged(t, details[0], nil, 0, 1, "retention.purged detail")

	// Delete everything, the newest event included.
	maxID := after[2].EventID
	res = mustPurge(t, s, store.PurgeParams{NowMS: purgeMS + 1, EventsBeforeMS: purgeMS + 1, Limit: 100})
	requirePurged(t, res, nil, 0, 3, "purge of every event")
	after = allEvents(t, s, "")
	if len(after) != 1 || after[0].Type != model.EventPurged || after[0].EventID <= maxID {
		t.Fatalf("events after purging all = %s; want only a new retention.purged with an id above %d", dump(after), maxID)
	}
	maxID = after[0].EventID
	res = mustPurge(t, s, store.PurgeParams{NowMS: purgeMS + 2, EventsBeforeMS: purgeMS + 2, Limit: 100})
	requirePurged(t, res, nil, 0, 1, "purge of the last event")
	maxID = max(maxID, allEvents(t, s, "")[0].EventID)
	requireLastEventID(t, s, maxID, "after retention deleted every event but its own")
	mustApply(t, s, newPlan(msgID("events-new"), purgeMS+3, newRec(bob, model.Inbox, msgID("events-new"), purgeMS+3)))
	last := allEvents(t, s, "")
	if e := last[len(last)-1]; e.Type != model.EventRecordCreated || e.EventID <= maxID {
		t.Fatalf("new event after purges = %s; want an id above %d (ids are never reused)", dump(e), maxID)
	}

	// EventsBeforeMS 0 keeps every event.
	n := len(last)
	if res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS + 10, Limit: 100}); !res.Empty() {
		t.Fatalf("purge with EventsBeforeMS 0 = %s", dump(res))
	}
	if got := len(allEvents(t, s, "")); got != n {
		t.Fatalf("purge with EventsBeforeMS 0: %d events, want %d", got, n)
	}
}

// Idempotency keys bound before KeysBeforeMS go, oldest first, Limit at
// a time; once gone, the key binds to whatever message comes with it next,
// while a kept key still refuses another message.
func testPurgeKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	keyed := func(name, key string, atMS int64) *store.Plan {
		m := msgID(name)
		p := newPlan(m, atMS, newRec(alice, model.Outbox, m, atMS))
		p.Idem = &store.Idempotency{Scope: alice + "/post_send", Key: key}
		return p
	}
	mustApply(t, s, keyed("k-old-1", "old-1", oldMS))
	mustApply(t, s, keyed("k-old-2", "old-2", oldMS+1))
	mustApply(t, s, keyed("k-fresh", "fresh", freshMS))

	p := store.PurgeParams{NowMS: purgeMS, Limit: 100}
	if res := mustPurge(t, s, p); !res.Empty() {
		t.Fatalf("a purge without KeysBeforeMS deleted %s", dump(res))
	}
	p.KeysBeforeMS, p.Limit = cutMS, 1
	for i, wantMore := range []bool{true, true, false} {
		res := mustPurge(t, s, p)
		want := int64(1)
		if i == 2 {
			want = 0
		}
		if res.Keys != want || res.More != wantMore || len(res.Records) != 0 || res.Messages != 0 {
			t.Fatalf("key purge %d = %s (More %v); want %d key, More %v", i, dump(res), res.More, want, wantMore)
		}
	}
	evs, details := purgedEvents(t, s)
	if len(evs) != 2 || details[0].Keys != 1 || details[1].Keys != 1 {
		t.Fatalf("retention.purged events %s, details %s; want two of one key each", dump(evs), dump(details))
	}

	// The old key is free: another message binds it. The fresh one is not.
	mustApply(t, s, keyed("k-old-1, another message", "old-1", purgeMS))
	_, err := s.Apply(ctx, keyed("k-fresh, another message", "fresh", purgeMS))
	requireErrIs(t, err, model.ErrConflict, "Apply of another message with a key retention kept")
}

// Events are batched by Limit too, with More.
func testPurgeEventLimit(t *testing.T, s store.Store) {
	seedBox(t, s, "event-limit", alice, model.Inbox, 5, base, nil) // 5 events, base..base+4
	p := store.PurgeParams{NowMS: purgeMS, EventsBeforeMS: base + 5, Limit: 2}
	var got []int64
	var mores []bool
	for range 10 {
		res := mustPurge(t, s, p)
		got, mores = append(got, res.Events), append(mores, res.More)
		if !res.More {
			break
		}
	}
	if fmt.Sprint(got, mores) != fmt.Sprint([]int64{2, 2, 1}, []bool{true, true, false}) {
		t.Fatalf("event purges of limit 2 deleted %v with More %v; want [2 2 1], [true true false]", got, mores)
	}
	evs := allEvents(t, s, "")
	if len(evs) != 3 || len(eventsOf(evs, model.EventPurged, "")) != 3 {
		t.Fatalf("events left = %s; want only the 3 retention.purged events", dump(evs))
	}
}

func requireLastEventID(t *testing.T, s store.Store, want int64, when string) {
	t.Helper()
	got, err := s.LastEventID(t.Context())
	requireNoError(t, err, "LastEventID")
	if got != want {
		t.Fatalf("LastEventID %s = %d, want %d", when, got, want)
	}
}
