package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// A plan far larger than one statement's worth of rows (a group fan-out)
// behaves exactly like many small ones: records that exist or repeat within
// the plan are reported, not written; seqs follow plan order per box, with
// no gaps; every new record gets one record.created event in plan order;
// conversations end at the box's last new record with one unread per new
// unread record.
func testApplyLargePlan(t *testing.T, s store.Store) {
	m0, m := msgID("large-0"), msgID("large-1")
	const owners, perBox = 150, 70
	owner := func(i int) string { return fmt.Sprintf("did:test:member-%03d", i) }
	const th = "group:" + grp

	// Some of the fan-out already exists, one box has earlier records.
	var pre []model.Record
	for i := 0; i < owners; i += 7 {
		pre = append(pre, newRec(owner(i), model.Inbox, m, base, withThread(th)))
	}
	for i := 1; i < owners; i += 5 { // boxes whose counters are not at 0
		pre = append(pre, newRec(owner(i), model.Inbox, m0, base, withThread(th)))
	}
	pre = append(pre, newRec(alice, model.Inbox, m0, base, withThread(th)), newRec(alice, model.Inbox, m0, base, withVariant("pre"), withThread(th)))
	mustApply(t, s, newPlan(m, base, pre...))

	var recs []model.Record
	for i := range owners {
		recs = append(recs, newRec(owner(i), model.Inbox, m, base+10, withThread(th)))
		if i%10 == 0 { // interleave records of one busy box with the fan-out
			for v := range perBox / 15 {
				recs = append(recs, newRec(alice, model.Inbox, m, base+10, withVariant(fmt.Sprintf("%d-%d", i, v)), withThread(th)))
			}
		}
	}
	recs = append(recs, recs[3], recs[len(recs)-1]) // repeated within the plan
	recs = append(recs, newRec(alice, model.Outbox, m, base+10, withThread(th)))
	p := newPlan(m, base+10, recs...)
	res := mustApply(t, s, p)

	existed := map[string]bool{}
	for _, r := range pre {
		existed[r.RecordID] = true
	}
	var wantCreated, wantExisting []string
	seen := map[string]bool{}
	for _, r := range recs {
		switch {
		case existed[r.RecordID] || seen[r.RecordID]:
			wantExisting = append(wantExisting, r.RecordID)
		default:
			wantCreated = append(wantCreated, r.RecordID)
		}
		seen[r.RecordID] = true
	}
	requireIDs(t, res.Created, wantCreated, "Apply(large plan): Created")
	requireSameSet(t, res.Existing, wantExisting, "Apply(large plan): Existing")

	next := map[string]int64{}
	for _, r := range pre {
		next[r.Owner+"/"+string(r.BoxKind)]++
	}
	last := map[string]model.Record{}
	unread := map[string]int64{}
	for _, c := range res.Created {
		k := c.Owner + "/" + string(c.BoxKind)
		next[k]++
		if c.Seq != next[k] {
			t.Fatalf("record %s in %s: seq %d, want %d (plan order, no gaps)", short(c.RecordID), k, c.Seq, next[k])
		}
		requireRecord(t, mustGet(t, s, c.RecordID), c, "GetRecord after a large Apply")
		last[c.Owner] = c
		if c.State.IsUnread() {
			unread[c.Owner]++
		}
	}
	for _, r := range pre {
		unread[r.Owner]++
	}
	for o, c := range last {
		requireConv(t, mustConv(t, s, o, th), model.Conversation{
			Owner: o, ThreadKey: th, LastMsgID: m, LastRecordID: c.RecordID, LastBox: c.BoxKind,
			LastSeq: c.Seq, UnreadCount: unread[o], UpdatedAtMS: base + 10,
		}, "conversation of "+o+" after a large Apply")
	}

	var createdEvents []string
	for _, e := range eventsOf(allEvents(t, s, ""), model.EventRecordCreated, "") {
		if e.AtMS == base+10 {
			createdEvents = append(createdEvents, e.RecordID)
		}
	}
	if !slices.Equal(createdEvents, wantCreated) {
		t.Fatalf("record.created events of the large Apply (%d) are not one per new record in plan order (%d)", len(createdEvents), len(wantCreated))
	}
}

// A fan-out's records, alike but for their owners, keep every field,
// tags and route included, whatever size of run they are written in;
// a record that differs in one field among them keeps its own.
func testApplyFanOutFields(t *testing.T, s store.Store) {
	m := msgID("fanout-fields")
	rt := model.Route{TunnelDID: tunnel, Platform: "telegram", ChatID: "-100", TargetDID: grp}
	var recs []model.Record
	for i := range 70 {
		r := newRec(fmt.Sprintf("did:test:fan-%02d", i), model.Inbox, m, base, withThread("group:"+grp), withTags("group:"+grp))
		r.Route = &rt
		recs = append(recs, r)
	}
	recs[66].SortKey = base - 1 // one unlike the rest, in the last run of four
	res := mustApply(t, s, newPlan(m, base, recs...))
	if len(res.Created) != len(recs) {
		t.Fatalf("Apply created %d records, want %d", len(res.Created), len(recs))
	}
	for _, want := range recs {
		want.Seq = 1
		// Read as a log: what the store wrote, not what a driver may
		// still hold in memory for GetRecord.
		got, err := s.Sync(t.Context(), store.SyncParams{Owner: want.Owner, Box: model.Inbox, Limit: 10})
		requireNoError(t, err, "Sync")
		if len(got) != 1 {
			t.Fatalf("%s's INBOX holds %d records, want 1", want.Owner, len(got))
		}
		requireRecord(t, got[0], want, "Sync("+want.Owner+")")
		evs := eventsOf(allEvents(t, s, want.Owner), model.EventRecordCreated, want.RecordID)
		if len(evs) != 1 || evs[0].MsgID != m || evs[0].BoxKind != model.Inbox || evs[0].ToState != want.State || evs[0].AtMS != base {
			t.Fatalf("%s's record.created events = %s; want one for %s", want.Owner, dump(evs), want.RecordID)
		}
		cs, err := s.ListConversations(t.Context(), store.ConversationQuery{Owner: want.Owner, Limit: 10})
		requireNoError(t, err, "ListConversations")
		if len(cs) != 1 || cs[0].ThreadKey != "group:"+grp || cs[0].LastRecordID != want.RecordID || cs[0].LastMsgID != m ||
			cs[0].LastSeq != 1 || cs[0].UnreadCount != 1 || cs[0].LastBox != model.Inbox {
			t.Fatalf("%s's conversations = %s; want its group's, at %s, one unread", want.Owner, dump(cs), want.RecordID)
		}
	}
}
