package storetest

import (
	"fmt"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Record ids carry their message's locator (model.RecordID); a store may
// use it to find a record, but must also hold records whose ids carry
// none: those a store of an earlier version wrote (the same id without
// the locator, model.LegacyRecordID), and any a caller names its own way.
func recordIDTests() []testCase {
	return []testCase{
		{"OldIDsFoundByNewIDs", testOldIDsFoundByNewIDs},
		{"IDsThatLocateNoMessage", testIDsThatLocateNoMessage},
	}
}

// asStoredBefore gives recs the ids an earlier version derived.
func asStoredBefore(t *testing.T, recs []model.Record) []model.Record {
	t.Helper()
	out := make([]model.Record, len(recs))
	for i, r := range recs {
		old, ok := model.LegacyRecordID(r.RecordID)
		if !ok {
			t.Fatalf("model.RecordID made %q, which has no legacy form", r.RecordID)
		}
		r.RecordID = old
		out[i] = r
	}
	return out
}

// A store holding records under their old ids (as after an upgrade): the
// same message written again with today's ids makes nothing new, and the
// records are read and changed by either id. One plan small, one large, as
// drivers may write the two differently.
func testOldIDsFoundByNewIDs(t *testing.T, s store.Store) {
	for _, n := range []int{1, 12} {
		m := msgID(fmt.Sprintf("stored-before-%d", n))
		recs := make([]model.Record, n)
		for i := range recs {
			recs[i] = newRec(fmt.Sprintf("did:test:reader-%d-%d", n, i), model.Inbox, m, base)
		}
		old := asStoredBefore(t, recs)
		first := mustApply(t, s, newPlan(m, base, old...))
		requireIDs(t, first.Created, recordIDs(old), "Created under the old ids")

		again := mustApply(t, s, newPlan(m, base+10, recs...))
		if len(again.Created) != 0 {
			t.Fatalf("n=%d: the message written again with today's ids created %v", n, recordIDs(again.Created))
		}
		requireSameSet(t, again.Existing, recordIDs(recs), fmt.Sprintf("n=%d: Existing", n))

		got := mustGet(t, s, recs[0].RecordID)
		if got.RecordID != old[0].RecordID || got.Seq != 1 {
			t.Fatalf("n=%d: GetRecord(today's id) = %s seq %d, want the record stored as %s, seq 1", n, got.RecordID, got.Seq, old[0].RecordID)
		}
		// Changed by today's id, then read by both at once (a driver that
		// answers recent writes from memory must find them either way).
		mustUpdate(t, s, transition(recs[0].RecordID, model.Unread, model.Readed, base+20))
		for _, id := range []string{recs[0].RecordID, old[0].RecordID} {
			if r := mustGet(t, s, id); r.State != model.Readed {
				t.Fatalf("n=%d: GetRecord(%s) after the change by today's id: state %s, want %s", n, short(id), r.State, model.Readed)
			}
		}
		mustUpdate(t, s, transition(old[0].RecordID, model.Readed, model.Unread, base+30))
		if r := mustGet(t, s, recs[0].RecordID); r.State != model.Unread {
			t.Fatalf("n=%d: GetRecord(today's id) after the change by the old id: state %s, want %s", n, r.State, model.Unread)
		}
		_, err := s.Update(t.Context(), transition(recs[0].RecordID, model.Readed, model.Unread, base+40))
		requireErrIs(t, err, model.ErrConflict, fmt.Sprintf("n=%d: Update(today's id) from a state the record is not in", n))
	}
}

// Ids that do not carry their record's message (another message's
// locator, or no locator at all) are stored, found, changed and written
// idempotently like any other.
func testIDsThatLocateNoMessage(t *testing.T, s store.Store) {
	m, other := msgID("odd-ids"), msgID("odd-ids-other")
	a := newRec(alice, model.Inbox, m, base)
	a.RecordID = model.RecordID(alice, model.Inbox, other, "") // another message's locator
	b := newRec(bob, model.Inbox, m, base)
	b.RecordID = "cyrec:named-by-the-caller"
	p := newPlan(m, base, a, b)
	requireCreatedSeqs(t, mustApply(t, s, p), p, 1, 1)
	again := mustApply(t, s, newPlan(m, base+1, a, b))
	if len(again.Created) != 0 || len(again.Existing) != 2 {
		t.Fatalf("written again: Created %v, Existing %v; want none and both", recordIDs(again.Created), again.Existing)
	}
	for _, r := range []model.Record{a, b} {
		if got := mustGet(t, s, r.RecordID); got.RecordID != r.RecordID || got.MsgID != m {
			t.Fatalf("GetRecord(%s) = %s of %s", r.RecordID, got.RecordID, short(got.MsgID))
		}
		mustUpdate(t, s, transition(r.RecordID, model.Unread, model.Readed, base+2))
	}
	// The message the first id's locator names knows nothing of it.
	requireNoRecord(t, s, model.RecordID(alice, model.Inbox, m, ""))

	// A plan's record of another message belongs to that message.
	third := msgID("odd-ids-third")
	c := newRec(carol, model.Inbox, third, base+3)
	res := mustApply(t, s, newPlan(m, base+3, c))
	requireIDs(t, res.Created, []string{c.RecordID}, "Created (a record of another message)")
	if got := mustGet(t, s, c.RecordID); got.MsgID != third {
		t.Fatalf("GetRecord(a record of another message): msg %s, want %s", short(got.MsgID), short(third))
	}
	again = mustApply(t, s, newPlan(third, base+4, c))
	requireSameSet(t, again.Existing, []string{c.RecordID}, "Existing (that record, written with its own message)")
}
