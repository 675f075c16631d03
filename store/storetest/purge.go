package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func purgeTests() []testCase {
	return []testCase{
		{"TerminalByFamilyCutoff", testPurgeTerminal},
		{"ConsumerFamily", testPurgeConsumerFamily},
		{"GroupLogByAge", testPurgeGroupLog},
		{"UnexaminedByConsumerKept", testPurgeConsumerProtects},
		{"AckedConsumerRecords", testPurgeAcked},
		{"AckedSparesQueueWork", testPurgeAckedSparesQueueWork},
		{"Bodies", testPurgeBodies},
		{"Events", testPurgeEvents},
		{"NothingToDo", testPurgeNothing},
		{"LimitAndMore", testPurgeLimit},
		{"EventLimit", testPurgeEventLimit},
		{"IdempotencyKeys", testPurgeKeys},
		{"SeqsNotReused", testPurgeSeqsNotReused},
	}
}

// Retention times of the purge tests: records are old (base) or fresh,
// the cutoff lies between, and the purge runs later still.
const (
	oldMS   = base
	cutMS   = base + 50_000
	freshMS = base + 60_000
	purgeMS = base + 100_000
)

func mustPurge(t *testing.T, s store.Store, p store.PurgeParams) store.PurgeResult {
	t.Helper()
	res, err := s.Purge(t.Context(), p)
	if err != nil {
		t.Fatalf("Purge(%+v): %v", p, err)
	}
	return res
}

// requirePurged checks a PurgeResult's counts (records by family).
func requirePurged(t *testing.T, got store.PurgeResult, records map[model.BoxKind]int64, messages, events int64, what string) {
	t.Helper()
	if len(got.Records) != len(records) || !maps.Equal(got.Records, records) || got.Messages != messages || got.Events != events {
		t.Fatalf("%s: Purge = records %v, messages %d, events %d; want records %v, messages %d, events %d",
			what, got.Records, got.Messages, got.Events, records, messages, events)
	}
}

// putRec applies a plan at atMS for a new message name carrying one record
// of owner's box in state st, created and last updated at atMS.
func putRec(t *testing.T, s store.Store, owner string, box model.BoxKind, name string, st model.State, atMS int64) model.Record {
	t.Helper()
	m := msgID(name)
	res := mustApply(t, s, newPlan(m, atMS, newRec(owner, box, m, atMS, withState(st))))
	if len(res.Created) != 1 {
		t.Fatalf("putRec(%s): created %d records", name, len(res.Created))
	}
	return res.Created[0]
}

func requireBody(t *testing.T, s store.Store, msg string, want bool, what string) {
	t.Helper()
	_, err := s.GetMessage(t.Context(), msg)
	switch {
	case want && err != nil:
		t.Fatalf("%s: body %s should stay: GetMessage: %v", what, short(msg), err)
	case !want && !errors.Is(err, model.ErrNotFound):
		t.Fatalf("%s: body %s should be gone: GetMessage err = %v", what, short(msg), err)
	}
}

// purgedEvents returns the retention.purged events, each with its detail
// decoded.
func purgedEvents(t *testing.T, s store.Store) ([]model.Event, []store.PurgeResult) {
	t.Helper()
	evs := eventsOf(allEvents(t, s, ""), model.EventPurged, "")
	out := make([]store.PurgeResult, len(evs))
	for i, e := range evs {
		if err := json.Unmarshal([]byte(e.Detail), &out[i]); err != nil {
			t.Fatalf("retention.purged detail %q is not a PurgeResult as JSON: %v", e.Detail, err)
		}
	}
	return evs, out
}

// Terminal records older than their family's cutoff go; newer ones,
// non-terminal ones and families without a cutoff stay. A body goes with
// its last record.
func testPurgeTerminal(t *testing.T, s store.Store) {
	type c struct {
		r    model.Record
		gone bool
	}
	cases := []c{
		{putRec(t, s, alice, model.Inbox, "t-readed-old", model.Readed, oldMS), true},
		{putRec(t, s, alice, model.Inbox, "t-archived-old", model.Archived, oldMS), true},
		{putRec(t, s, alice, model.Inbox, "t-readed-at-cut", model.Readed, cutMS), false},
		{putRec(t, s, alice, model.Inbox, "t-readed-fresh", model.Readed, freshMS), false},
		{putRec(t, s, alice, model.Inbox, "t-unread-old", model.Unread, oldMS), false},
		{putRec(t, s, alice, model.Inbox, "t-reading-old", model.Reading, oldMS), false},
		{putRec(t, s, tunnel, model.TunnelOutbox, "t-dead-old", model.Dead, oldMS), true},
		{putRec(t, s, tunnel, model.TunnelOutbox, "t-sent-old", model.Sent, oldMS), true},
		{putRec(t, s, tunnel, model.TunnelOutbox, "t-failed-old", model.Failed, oldMS), false},
		{putRec(t, s, tunnel, model.TunnelOutbox, "t-wait-old", model.Wait, oldMS), false},
		{putRec(t, s, bob, model.Outbox, "t-outbox-old", model.Sent, oldMS), true},
		{putRec(t, s, bob, model.Outbox, "t-deleted-old", model.Deleted, oldMS), true},
		{putRec(t, s, carol, model.RequestBox, "t-request-old", model.Readed, oldMS), false}, // no cutoff
		{putRec(t, s, grp, model.GroupInbox, "t-group-old", model.Deleted, oldMS), false},    // cutoff == its time
	}
	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{
			model.Inbox: cutMS, model.TunnelOutbox: cutMS, model.Outbox: cutMS, model.GroupInbox: oldMS,
		}}
	res := mustPurge(t, s, p)
	want := map[model.BoxKind]int64{model.Inbox: 2, model.TunnelOutbox: 2, model.Outbox: 2}
	requirePurged(t, res, want, 6, 0, "first purge")
	if res.More {
		t.Fatal("More set although the limit was not reached")
	}
	for _, c := range cases {
		if c.gone {
			requireNoRecord(t, s, c.r.RecordID)
		} else {
			requireRecord(t, mustGet(t, s, c.r.RecordID), c.r, "record retention must keep")
		}
		requireBody(t, s, c.r.MsgID, !c.gone, fmt.Sprintf("%s %s %s", c.r.BoxKind, c.r.State, c.r.MsgID))
	}

	evs, details := purgedEvents(t, s)
	if len(evs) != 1 || evs[0].AtMS != purgeMS {
		t.Fatalf("retention.purged events = %s; want one at %d", dump(evs), purgeMS)
	}
	requirePurged(t, details[0], want, 6, 0, "retention.purged detail")

	// Nothing is left to go: an empty result, and no event.
	res = mustPurge(t, s, p)
	if !res.Empty() || res.More {
		t.Fatalf("second purge = %s, want nothing deleted", dump(res))
	}
	if evs, _ := purgedEvents(t, s); len(evs) != 1 {
		t.Fatalf("a purge that deleted nothing appended an event: %s", dump(evs))
	}
}

// A group's log (GROUP_INBOX) goes by age, whatever its records' states:
// a record last changed before GroupLogBeforeMS goes unless it is held or
// a consumer of its box has not examined it. Fresh records stay, and so do
// unfinished records of other boxes; a body a member's record shares stays.
func testPurgeGroupLog(t *testing.T, s store.Store) {
	const other = "did:test:group-2"
	held := putRec(t, s, grp, model.GroupInbox, "g-held", model.Unread, oldMS)
	thread := func(r *model.Record) { r.ThreadKey = "group:" + grp }
	threaded := func(name string, st model.State, atMS int64) model.Record {
		m := msgID(name)
		return mustApply(t, s, newPlan(m, atMS, newRec(grp, model.GroupInbox, m, atMS, withState(st), thread))).Created[0]
	}
	if got := mustClaim(t, s, claimParams(grp, model.GroupInbox, oldMS, "L")); got.RecordID != held.RecordID {
		t.Fatalf("claimed %s, want %s", got.RecordID, held.RecordID)
	}
	unread := threaded("g-unread-old", model.Unread, oldMS)
	readed := threaded("g-readed-old", model.Readed, oldMS)
	fresh := threaded("g-unread-fresh", model.Unread, freshMS)
	if c := mustConv(t, s, grp, "group:"+grp); c.UnreadCount != 2 {
		t.Fatalf("the group's conversation counts %d unread, want 2", c.UnreadCount)
	}
	inbox := putRec(t, s, alice, model.Inbox, "g-inbox-old", model.Unread, oldMS)
	m := msgID("g-members")
	created := mustApply(t, s, newPlan(m, oldMS, newRec(grp, model.GroupInbox, m, oldMS), newRec(bob, model.Inbox, m, oldMS))).Created
	// other's log has a consumer that has examined its first record only.
	watched := seedBox(t, s, "g-watched", other, model.GroupInbox, 2, oldMS, nil)
	c := newConsumer(carol, "watch", other, model.GroupInbox)
	c.SourceSeq = watched[0].Seq
	mustCreateConsumer(t, s, c, false)

	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100}
	if res := mustPurge(t, s, p); !res.Empty() {
		t.Fatalf("a purge without GroupLogBeforeMS deleted %s", dump(res))
	}
	p.GroupLogBeforeMS = cutMS
	// unread, readed, the members-mode message's group record, other's first.
	requirePurged(t, mustPurge(t, s, p), map[model.BoxKind]int64{model.GroupInbox: 4}, 3, 0, "group log purge")
	for _, r := range []model.Record{unread, readed, created[0], watched[0]} {
		requireNoRecord(t, s, r.RecordID)
	}
	for _, r := range []model.Record{held, fresh, inbox, created[1], watched[1]} {
		mustGet(t, s, r.RecordID)
	}
	requireBody(t, s, unread.MsgID, false, "body of a purged group record")
	// The unread record that went no longer counts; the fresh one does.
	if c := mustConv(t, s, grp, "group:"+grp); c.UnreadCount != 1 {
		t.Fatalf("after the purge the group's conversation counts %d unread, want 1", c.UnreadCount)
	}
	requireBody(t, s, m, true, "body a member's record still refers to")
	if res := mustPurge(t, s, p); !res.Empty() {
		t.Fatalf("second group log purge deleted %s", dump(res))
	}

	// Limit: one at a time, with More while any is left.
	mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: carol, Name: "watch",
		FromSourceSeq: c.SourceSeq, ToSourceSeq: watched[1].Seq, NowMS: purgeMS})
	mustUpdate(t, s, &store.Update{RecordID: held.RecordID, From: model.Reading, ExpectLeaseID: "L",
		To: model.Unread, NowMS: oldMS + 1, VisibleAtMS: oldMS + 1})
	p.Limit = 1
	for i := range 2 {
		res := mustPurge(t, s, p)
		requirePurged(t, res, map[model.BoxKind]int64{model.GroupInbox: 1}, 1, 0, fmt.Sprintf("limited purge %d", i))
		if !res.More {
			t.Fatalf("limited purge %d: More not set", i)
		}
	}
	requireNoRecord(t, s, held.RecordID)
	requireNoRecord(t, s, watched[1].RecordID)
	if res := mustPurge(t, s, p); !res.Empty() || res.More {
		t.Fatalf("third limited purge = %s, want nothing", dump(res))
	}
	mustGet(t, s, fresh.RecordID)
}

// A consumer's box is purged under the CONSUMER family's cutoff and
// counted under that family, not under its own box.
func testPurgeConsumerFamily(t *testing.T, s store.Store) {
	mustCreateConsumer(t, s, newConsumer(alice, "c", bob, model.Inbox), false)
	recs := feedConsumer(t, s, alice, "c", "family", 2, oldMS)
	mustUpdate(t, s, transition(recs[0].RecordID, model.Unread, model.Readed, oldMS+1))

	res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS}})
	if !res.Empty() {
		t.Fatalf("a purge without a CONSUMER cutoff deleted %s", dump(res))
	}
	mustGet(t, s, recs[0].RecordID)

	res = mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.ConsumerFamily: cutMS}})
	requirePurged(t, res, map[model.BoxKind]int64{model.ConsumerFamily: 1}, 1, 0, "purge with a CONSUMER cutoff")
	requireNoRecord(t, s, recs[0].RecordID)
	mustGet(t, s, recs[1].RecordID) // UNREAD
	requireBody(t, s, recs[0].MsgID, false, "body of the purged consumer record")
	requireBody(t, s, recs[1].MsgID, true, "body of the kept consumer record")
}

// A record some consumer of its box has not examined yet (SourceSeq below
// its seq) stays, whatever its age; once every consumer moved past it, it
// goes.
func testPurgeConsumerProtects(t *testing.T, s store.Store) {
	src := seedBox(t, s, "protect", bob, model.Inbox, 3, oldMS, func(int) []recOpt { return []recOpt{withState(model.Readed)} })
	c := newConsumer(alice, "c", bob, model.Inbox)
	c.SourceSeq = 1
	mustCreateConsumer(t, s, c, false)
	lag := newConsumer(carol, "lag", bob, model.Inbox)
	lag.SourceSeq = 2
	mustCreateConsumer(t, s, lag, false)
	// Consumers of other boxes protect nothing here.
	mustCreateConsumer(t, s, newConsumer(dave, "other-box", bob, model.Outbox), false)
	mustCreateConsumer(t, s, newConsumer(dave, "other-owner", alice, model.Inbox), false)

	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS}}
	inbox := func(n int64) map[model.BoxKind]int64 { return map[model.BoxKind]int64{model.Inbox: n} }

	requirePurged(t, mustPurge(t, s, p), inbox(1), 1, 0, "consumers at 1 and 2")
	requireNoRecord(t, s, src[0].RecordID)
	mustGet(t, s, src[1].RecordID)
	mustGet(t, s, src[2].RecordID)

	mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: alice, Name: "c", FromSourceSeq: 1, ToSourceSeq: 3, NowMS: purgeMS})
	requirePurged(t, mustPurge(t, s, p), inbox(1), 1, 0, "consumers at 3 and 2")
	requireNoRecord(t, s, src[1].RecordID)
	mustGet(t, s, src[2].RecordID)

	requireNoError(t, s.DeleteConsumer(t.Context(), carol, "lag", purgeMS), "DeleteConsumer(lag)")
	requirePurged(t, mustPurge(t, s, p), inbox(1), 1, 0, "consumer at 3 only")
	requireNoRecord(t, s, src[2].RecordID)
}

// With Acked, a consumer's records at or below its cursor go unless held;
// a consumer reading that consumer's box protects what it has not
// examined.
func testPurgeAcked(t *testing.T, s store.Store) {
	ctx := t.Context()
	others := seedBox(t, s, "acked-other", alice, model.Inbox, 3, oldMS, nil)
	mustCreateConsumer(t, s, newConsumer(alice, "c", bob, model.Inbox), false)
	recs := feedConsumer(t, s, alice, "c", "acked", 5, oldMS)
	box := model.ConsumerBox("c")
	// carol consumes alice's consumer box and has examined seq 1 and 2.
	d := newConsumer(carol, "d", alice, box)
	d.SourceSeq = 2
	mustCreateConsumer(t, s, d, false)

	held := mustClaim(t, s, claimParams(alice, box, oldMS+1, "L"))
	if held.RecordID != recs[0].RecordID {
		t.Fatalf("claimed %s, want the first record", held.RecordID)
	}
	mustUpdate(t, s, transition(recs[1].RecordID, model.Unread, model.Readed, oldMS+2))
	if _, err := s.AckConsumer(ctx, alice, "c", 4, oldMS+3); err != nil {
		t.Fatalf("AckConsumer: %v", err)
	}

	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100}
	if res := mustPurge(t, s, p); !res.Empty() {
		t.Fatalf("purge without Acked deleted %s", dump(res))
	}
	p.Acked = true
	cons := func(n int64) map[model.BoxKind]int64 { return map[model.BoxKind]int64{model.ConsumerFamily: n} }
	requirePurged(t, mustPurge(t, s, p), cons(1), 1, 0, "acked purge, d at 2")
	mustGet(t, s, recs[0].RecordID) // READING
	requireNoRecord(t, s, recs[1].RecordID)
	for _, r := range recs[2:] {
		mustGet(t, s, r.RecordID) // 3, 4: unexamined by d; 5: beyond the cursor
	}

	mustAdvance(t, s, &store.ConsumerAdvance{CreatedAtMS: base, Owner: carol, Name: "d", FromSourceSeq: 2, ToSourceSeq: 5, NowMS: purgeMS})
	requirePurged(t, mustPurge(t, s, p), cons(2), 2, 0, "acked purge, d at 5")
	requireNoRecord(t, s, recs[2].RecordID)
	requireNoRecord(t, s, recs[3].RecordID)
	mustGet(t, s, recs[0].RecordID)
	mustGet(t, s, recs[4].RecordID)

	// Released, the first record goes too; the unacked one never does.
	mustUpdate(t, s, &store.Update{RecordID: recs[0].RecordID, From: model.Reading, ExpectLeaseID: "L",
		To: model.Readed, NowMS: purgeMS, VisibleAtMS: purgeMS})
	requirePurged(t, mustPurge(t, s, p), cons(1), 1, 0, "acked purge after release")
	requireNoRecord(t, s, recs[0].RecordID)
	mustGet(t, s, recs[4].RecordID)
	if res := mustPurge(t, s, p); !res.Empty() {
		t.Fatalf("nothing acked is left, yet purge deleted %s", dump(res))
	}
	for _, r := range others {
		mustGet(t, s, r.RecordID) // Acked concerns consumers' boxes only
	}
}

// A purge with nothing eligible deletes nothing and appends nothing.
func testPurgeNothing(t *testing.T, s store.Store) {
	seedBox(t, s, "nothing", alice, model.Inbox, 2, freshMS, func(int) []recOpt { return []recOpt{withState(model.Readed)} })
	n := len(allEvents(t, s, ""))
	res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, EventsBeforeMS: base, Acked: true,
		Limit: 1, TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS}})
	if !res.Empty() || res.More || len(res.Records) != 0 {
		t.Fatalf("Purge = %s (More %v), want nothing", dump(res), res.More)
	}
	if got := len(allEvents(t, s, "")); got != n {
		t.Fatalf("a purge that deleted nothing changed the event log: %d events, want %d", got, n)
	}
}

// Purge deletes at most Limit records and sets More when it reached the
// limit; looping until More is clear deletes everything eligible.
func testPurgeLimit(t *testing.T, s store.Store) {
	old := seedBox(t, s, "limit", alice, model.Inbox, 7, oldMS, func(int) []recOpt { return []recOpt{withState(model.Readed)} })
	keep := seedBox(t, s, "limit-keep", alice, model.Inbox, 2, oldMS, nil)
	mustCreateConsumer(t, s, newConsumer(bob, "c", carol, model.Inbox), false)
	acked := feedConsumer(t, s, bob, "c", "limit-c", 4, oldMS)
	if _, err := s.AckConsumer(t.Context(), bob, "c", 3, oldMS); err != nil {
		t.Fatalf("AckConsumer: %v", err)
	}

	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Acked: true, Limit: 3,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS}}
	total := map[model.BoxKind]int64{}
	var msgs int64
	calls := 0
	for {
		calls++
		if calls > 20 {
			t.Fatal("Purge keeps setting More")
		}
		res := mustPurge(t, s, p)
		var n int64
		for f, c := range res.Records {
			total[f] += c
			n += c
		}
		msgs += res.Messages
		if n > 3 {
			t.Fatalf("Purge(limit 3) deleted %d records", n)
		}
		if res.More != (n == 3) {
			t.Fatalf("Purge(limit 3) deleted %d records with More %v; want More exactly when the limit was reached", n, res.More)
		}
		if !res.More {
			break
		}
	}
	if calls != 4 {
		t.Fatalf("10 eligible records took %d calls of limit 3, want 4", calls)
	}
	if want := map[model.BoxKind]int64{model.Inbox: 7, model.ConsumerFamily: 3}; !maps.Equal(total, want) || msgs != 10 {
		t.Fatalf("batched purge deleted %v and %d bodies, want %v and 10", total, msgs, want)
	}
	for _, r := range append(old, acked[:3]...) {
		requireNoRecord(t, s, r.RecordID)
	}
	for _, r := range append(keep, acked[3]) {
		mustGet(t, s, r.RecordID)
	}
	if evs, _ := purgedEvents(t, s); len(evs) != 4 {
		t.Fatalf("%d retention.purged events, want one per call that deleted something (4)", len(evs))
	}
}

// A box's last seq stays where it was when retention deletes its newest
// records, or all of them, and the next record takes the seq after it: a
// client syncing after seq 3 must never be handed a new record as seq 2.
func testPurgeSeqsNotReused(t *testing.T, s store.Store) {
	putRec(t, s, alice, model.Inbox, "seq-unread", model.Unread, oldMS)
	putRec(t, s, alice, model.Inbox, "seq-readed-1", model.Readed, oldMS)
	putRec(t, s, alice, model.Inbox, "seq-readed-2", model.Readed, oldMS)
	putRec(t, s, bob, model.Outbox, "seq-sent-1", model.Sent, oldMS)
	putRec(t, s, bob, model.Outbox, "seq-sent-2", model.Sent, oldMS)
	res := mustPurge(t, s, store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: cutMS, model.Outbox: cutMS}})
	requirePurged(t, res, map[model.BoxKind]int64{model.Inbox: 2, model.Outbox: 2}, 4, 0, "purge of the newest records")
	for _, c := range []struct {
		owner string
		box   model.BoxKind
		last  int64
	}{{alice, model.Inbox, 3}, {bob, model.Outbox, 2}} {
		if got, err := s.BoxLastSeq(t.Context(), c.owner, c.box); err != nil || got != c.last {
			t.Fatalf("BoxLastSeq(%s %s) after its newest records went = %d, %v; want %d", c.owner, c.box, got, err, c.last)
		}
		r := putRec(t, s, c.owner, c.box, "seq-after-"+string(c.box), model.Unread, freshMS)
		if r.Seq != c.last+1 {
			t.Fatalf("record in %s's %s after the purge has seq %d, want %d", c.owner, c.box, r.Seq, c.last+1)
		}
		if got, err := s.BoxLastSeq(t.Context(), c.owner, c.box); err != nil || got != c.last+1 {
			t.Fatalf("BoxLastSeq(%s %s) after the next record = %d, %v; want %d", c.owner, c.box, got, err, c.last+1)
		}
	}
}
