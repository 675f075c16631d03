package storetest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func listTests() []testCase {
	return []testCase{
		{"KeysetPaging", testListPaging},
		{"StateAndTagFilters", testListFilters},
	}
}

func syncTests() []testCase {
	return []testCase{
		{"AfterSeqPaging", testSyncPaging},
		{"ThreadAndStateFilters", testSyncFilters},
	}
}

func countTests() []testCase {
	return []testCase{
		{"ByBoxAndState", testCountRecords},
	}
}

// listAll pages through ListRecords with the given page size and checks
// every page's size.
func listAll(t *testing.T, s store.Store, p store.ListParams) []model.Record {
	t.Helper()
	var out []model.Record
	p.CursorSortKey, p.CursorRecordID = 0, ""
	for range 10_000 {
		page, err := s.ListRecords(t.Context(), p)
		requireNoError(t, err, "ListRecords")
		if len(page) > p.Limit {
			t.Fatalf("ListRecords(limit %d) returned %d records", p.Limit, len(page))
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		last := page[len(page)-1]
		p.CursorSortKey, p.CursorRecordID = last.SortKey, last.RecordID
	}
	t.Fatal("ListRecords: paging does not terminate")
	return nil
}

// syncAll pages through Sync by after_seq, checking that seqs ascend.
func syncAll(t *testing.T, s store.Store, p store.SyncParams, limit int) []model.Record {
	t.Helper()
	var out []model.Record
	p.Limit = limit
	for range 10_000 {
		page, err := s.Sync(t.Context(), p)
		requireNoError(t, err, "Sync")
		if len(page) > limit {
			t.Fatalf("Sync(limit %d) returned %d records", limit, len(page))
		}
		if len(page) == 0 {
			return out
		}
		for _, r := range page {
			if r.Seq <= p.AfterSeq {
				t.Fatalf("Sync(after %d) returned seq %d: seqs must ascend past the cursor", p.AfterSeq, r.Seq)
			}
			if r.Owner != p.Owner || r.BoxKind != p.Box {
				t.Fatalf("Sync(%s %s) returned a record of %s %s", p.Owner, p.Box, r.Owner, r.BoxKind)
			}
			p.AfterSeq = r.Seq
		}
		out = append(out, page...)
	}
	t.Fatal("Sync: paging does not terminate")
	return nil
}

// byKey sorts records by (sort_key, record_id).
func byKey(recs []model.Record, desc bool) []string {
	c := slices.Clone(recs)
	slices.SortFunc(c, func(a, b model.Record) int {
		return cmp.Or(cmp.Compare(a.SortKey, b.SortKey), cmp.Compare(a.RecordID, b.RecordID))
	})
	if desc {
		slices.Reverse(c)
	}
	return recordIDs(c)
}

func filter(recs []model.Record, keep func(model.Record) bool) []model.Record {
	var out []model.Record
	for _, r := range recs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// Keyset paging covers every record exactly once in (sort_key, record_id)
// order, both directions, whatever the page size; ties on sort_key are
// broken by record_id.
func testListPaging(t *testing.T, s store.Store) {
	// Four distinct sort keys for 23 records: many ties. Record ids are
	// hashes, so their order is unrelated to seq or insertion.
	recs := seedBox(t, s, "paging", alice, model.Inbox, 23, base, func(i int) []recOpt {
		return []recOpt{withSortKey(base + int64(i%4)*10)}
	})
	// Noise in other owners and boxes, with the same sort keys.
	seedBox(t, s, "paging", bob, model.Inbox, 3, base, func(i int) []recOpt { return []recOpt{withSortKey(base + int64(i%4)*10)} })
	seedBox(t, s, "paging", alice, model.Outbox, 3, base, func(i int) []recOpt { return []recOpt{withSortKey(base + int64(i%4)*10)} })

	for _, desc := range []bool{false, true} {
		want := byKey(recs, desc)
		for _, size := range []int{1, 2, 3, 5, 7, 22, 23, 24, 100} {
			got := listAll(t, s, store.ListParams{Owner: alice, Box: model.Inbox, Desc: desc, Limit: size})
			requireIDs(t, got, want, fmt.Sprintf("ListRecords(desc=%v, page size %d)", desc, size))
		}
	}

	// The records come back whole.
	page, err := s.ListRecords(t.Context(), store.ListParams{Owner: alice, Box: model.Inbox, Limit: 100})
	requireNoError(t, err, "ListRecords")
	bySeq := map[string]model.Record{}
	for _, r := range recs {
		bySeq[r.RecordID] = r
	}
	for _, r := range page {
		requireRecord(t, r, bySeq[r.RecordID], "ListRecords record")
	}

	// Paging resumes from a cursor taken in the middle, in both directions.
	asc := byKey(recs, false)
	mid := bySeq[asc[10]]
	got, err := s.ListRecords(t.Context(), store.ListParams{Owner: alice, Box: model.Inbox, CursorSortKey: mid.SortKey, CursorRecordID: mid.RecordID, Limit: 100})
	requireNoError(t, err, "ListRecords after cursor")
	requireIDs(t, got, asc[11:], "ListRecords ascending after the 11th record")
	got, err = s.ListRecords(t.Context(), store.ListParams{Owner: alice, Box: model.Inbox, Desc: true, CursorSortKey: mid.SortKey, CursorRecordID: mid.RecordID, Limit: 100})
	requireNoError(t, err, "ListRecords before cursor")
	wantDesc := slices.Clone(asc[:10])
	slices.Reverse(wantDesc)
	requireIDs(t, got, wantDesc, "ListRecords descending before the 11th record")

	if got := listAll(t, s, store.ListParams{Owner: carol, Box: model.Inbox, Limit: 10}); len(got) != 0 {
		t.Fatalf("ListRecords of an empty box returned %d records", len(got))
	}
}

func testListFilters(t *testing.T, s store.Store) {
	recs := seedBox(t, s, "filters", alice, model.Inbox, 12, base, func(i int) []recOpt {
		var tags []string
		if i%3 == 0 {
			tags = append(tags, "red")
		}
		if i%4 == 0 {
			tags = append(tags, "blue")
		}
		o := []recOpt{withTags(tags...), withSortKey(base + int64(i%5))}
		if i%2 == 0 && i < 8 {
			o = append(o, withState(model.Readed))
		}
		return o
	})
	seedBox(t, s, "filters", bob, model.Inbox, 3, base, func(int) []recOpt { return []recOpt{withTags("red")} })
	// Some state changes go through Update, so indexes must follow them.
	for _, i := range []int{8, 10} {
		recs[i] = mustUpdate(t, s, transition(recs[i].RecordID, model.Unread, model.Readed, base+100))
	}
	recs[0] = mustUpdate(t, s, transition(recs[0].RecordID, model.Readed, model.Archived, base+100))

	hasTag := func(tag string) func(model.Record) bool {
		return func(r model.Record) bool { return slices.Contains(r.Tags, tag) }
	}
	inState := func(sts ...model.State) func(model.Record) bool {
		return func(r model.Record) bool { return slices.Contains(sts, r.State) }
	}
	cases := []struct {
		name   string
		states []model.State
		tag    string
		keep   func(model.Record) bool
	}{
		{"READED", []model.State{model.Readed}, "", inState(model.Readed)},
		{"UNREAD", []model.State{model.Unread}, "", inState(model.Unread)},
		{"UNREAD,ARCHIVED", []model.State{model.Unread, model.Archived}, "", inState(model.Unread, model.Archived)},
		{"DEAD", []model.State{model.Dead}, "", inState(model.Dead)},
		{"tag red", nil, "red", hasTag("red")},
		{"tag blue", nil, "blue", hasTag("blue")},
		{"tag none", nil, "green", hasTag("green")},
		{"tag red, READED", []model.State{model.Readed}, "red", func(r model.Record) bool { return hasTag("red")(r) && r.State == model.Readed }},
	}
	for _, c := range cases {
		want := filter(recs, c.keep)
		for _, desc := range []bool{false, true} {
			for _, size := range []int{2, 100} {
				got := listAll(t, s, store.ListParams{Owner: alice, Box: model.Inbox, States: c.states, Tag: c.tag, Desc: desc, Limit: size})
				requireIDs(t, got, byKey(want, desc), fmt.Sprintf("ListRecords(%s, desc=%v, size %d)", c.name, desc, size))
			}
		}
	}
	// Sanity: the filters above are not vacuous.
	if len(filter(recs, inState(model.Readed))) != 5 || len(filter(recs, hasTag("red"))) != 4 {
		t.Fatal("storetest: filter fixture is wrong")
	}
}

// Sync pages a box by seq with no gaps or duplicates.
func testSyncPaging(t *testing.T, s store.Store) {
	recs := seedBox(t, s, "sync", alice, model.Inbox, 17, base, func(i int) []recOpt {
		return []recOpt{withSortKey(base - int64(i))} // sort key order is not seq order
	})
	seedBox(t, s, "sync", bob, model.Inbox, 3, base, nil)
	seedBox(t, s, "sync", alice, model.Outbox, 3, base, nil)

	want := recordIDs(recs)
	for _, size := range []int{1, 4, 16, 17, 100} {
		got := syncAll(t, s, store.SyncParams{Owner: alice, Box: model.Inbox}, size)
		requireIDs(t, got, want, fmt.Sprintf("Sync(page size %d)", size))
		for i, r := range got {
			if r.Seq != int64(i+1) {
				t.Fatalf("Sync(page size %d): seqs %v, want 1..17", size, seqs(got))
			}
		}
	}
	got, err := s.Sync(t.Context(), store.SyncParams{Owner: alice, Box: model.Inbox, AfterSeq: 10, Limit: 100})
	requireNoError(t, err, "Sync")
	requireIDs(t, got, want[10:], "Sync(after 10)")
	for i, r := range got {
		requireRecord(t, r, recs[10+i], "Sync record")
	}
	got, err = s.Sync(t.Context(), store.SyncParams{Owner: alice, Box: model.Inbox, AfterSeq: 17, Limit: 100})
	requireNoError(t, err, "Sync")
	if len(got) != 0 {
		t.Fatalf("Sync(after the last seq) returned %d records", len(got))
	}

	// New records appear after the cursor.
	more := seedBox(t, s, "sync-more", alice, model.Inbox, 2, base+100, nil)
	got, err = s.Sync(t.Context(), store.SyncParams{Owner: alice, Box: model.Inbox, AfterSeq: 17, Limit: 100})
	requireNoError(t, err, "Sync")
	requireIDs(t, got, recordIDs(more), "Sync(after 17) once new records arrived")
}

func testSyncFilters(t *testing.T, s store.Store) {
	recs := seedBox(t, s, "syncf", alice, model.Inbox, 15, base, func(i int) []recOpt {
		o := []recOpt{withThread([]string{"t1", "t2", "t2"}[i%3])}
		if i%5 == 0 {
			o = append(o, withState(model.Readed))
		}
		return o
	})
	recs[7] = mustUpdate(t, s, transition(recs[7].RecordID, model.Unread, model.Archived, base+100))
	seedBox(t, s, "syncf", bob, model.Inbox, 3, base, func(int) []recOpt { return []recOpt{withThread("t1")} })

	inThread := func(k string) func(model.Record) bool { return func(r model.Record) bool { return r.ThreadKey == k } }
	cases := []struct {
		name   string
		thread string
		states []model.State
		keep   func(model.Record) bool
	}{
		{"t1", "t1", nil, inThread("t1")},
		{"t2", "t2", nil, inThread("t2")},
		{"t3", "t3", nil, inThread("t3")},
		{"READED", "", []model.State{model.Readed}, func(r model.Record) bool { return r.State == model.Readed }},
		{"UNREAD,ARCHIVED", "", []model.State{model.Unread, model.Archived}, func(r model.Record) bool {
			return r.State == model.Unread || r.State == model.Archived
		}},
		{"t2 READED", "t2", []model.State{model.Readed}, func(r model.Record) bool { return r.ThreadKey == "t2" && r.State == model.Readed }},
	}
	for _, c := range cases {
		want := recordIDs(filter(recs, c.keep))
		for _, size := range []int{2, 100} {
			got := syncAll(t, s, store.SyncParams{Owner: alice, Box: model.Inbox, ThreadKey: c.thread, States: c.states}, size)
			requireIDs(t, got, want, fmt.Sprintf("Sync(%s, page size %d)", c.name, size))
		}
	}
}

// CountRecords counts by box kind and state.
func testCountRecords(t *testing.T, s store.Store) {
	count := func() map[[2]string]int64 {
		t.Helper()
		rows, err := s.CountRecords(t.Context())
		requireNoError(t, err, "CountRecords")
		out := map[[2]string]int64{}
		for _, r := range rows {
			k := [2]string{string(r.Box), string(r.State)}
			if _, dup := out[k]; dup {
				t.Fatalf("CountRecords: two rows for %v", k)
			}
			if r.Count != 0 {
				out[k] = r.Count
			}
		}
		return out
	}
	if got := count(); len(got) != 0 {
		t.Fatalf("CountRecords on an empty store = %v", got)
	}
	seedBox(t, s, "count", alice, model.Inbox, 3, base, nil)
	seedBox(t, s, "count", bob, model.Inbox, 2, base, func(int) []recOpt { return []recOpt{withState(model.Readed)} })
	seedBox(t, s, "count", alice, model.Outbox, 2, base, nil)
	tun := seedBox(t, s, "count", tunnel, model.TunnelOutbox, 4, base, nil)
	mustUpdate(t, s, transition(tun[0].RecordID, model.Wait, model.Dead, base+10))
	mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+20, "L"))

	want := map[[2]string]int64{
		{"INBOX", "UNREAD"}:          3,
		{"INBOX", "READED"}:          2,
		{"OUTBOX", "SENT"}:           2,
		{"TUNNEL_OUTBOX", "DEAD"}:    1,
		{"TUNNEL_OUTBOX", "SENDING"}: 1,
		{"TUNNEL_OUTBOX", "WAIT"}:    2,
	}
	if got := count(); !maps.Equal(got, want) {
		t.Fatalf("CountRecords = %v, want %v", got, want)
	}
}
