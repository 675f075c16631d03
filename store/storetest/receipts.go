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

func receiptTests() []testCase {
	return []testCase{
		{"LatestWins", testReceiptLatestWins},
		{"SameTimeReplaces", testReceiptSameTime},
		{"ListFilters", testListReceipts},
		{"Events", testReceiptEvents},
	}
}

func eventTests() []testCase {
	return []testCase{
		{"PagingAndOwnerFilter", testListEvents},
		{"ContactsAndTokens", testContactEvents},
	}
}

func tokenTests() []testCase {
	return []testCase{
		{"PutAndGet", testTokens},
		{"HoldsTokenFollowsPutAndDelete", testHoldsToken},
	}
}

// HoldsToken answers whether a DID holds a token, and a token put or
// deleted through the store changes the answer at once, remembered or not.
func testHoldsToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	holds := func(did string, want bool, what string) {
		t.Helper()
		for range 2 { // asked again: the remembered answer
			if got, err := s.HoldsToken(ctx, did); err != nil || got != want {
				t.Fatalf("%s: HoldsToken(%s) = %v, %v; want %v", what, did, got, err, want)
			}
		}
	}
	holds(alice, false, "before any token")
	requireNoError(t, s.PutToken(ctx, "sha256:holds-1", model.Identity{DID: alice, Role: model.RoleAgent}, base), "PutToken")
	holds(alice, true, "after a token was put")
	holds(bob, false, "another DID")
	requireNoError(t, s.PutToken(ctx, "sha256:holds-2", model.Identity{DID: alice, Role: model.RoleTunnel}, base+1), "PutToken")
	if _, err := s.DeleteToken(ctx, "", "sha256:holds-1", base+2); err != nil {
		t.Fatalf("DeleteToken: %v", err)
	}
	holds(alice, true, "with one of two tokens deleted")
	if _, err := s.DeleteToken(ctx, "", "sha256:holds-2", base+3); err != nil {
		t.Fatalf("DeleteToken: %v", err)
	}
	holds(alice, false, "with every token deleted")
}

func mustPutReceipt(t *testing.T, s store.Store, r, want model.Receipt) {
	t.Helper()
	got, err := s.PutReceipt(t.Context(), r, base)
	requireNoError(t, err, "PutReceipt")
	if got != want {
		t.Fatalf("PutReceipt(%s) returned\n %s\nwant the stored receipt\n %s", dump(r), dump(got), dump(want))
	}
}

func receiptKey(r model.Receipt) string { return r.MsgID + "|" + r.Reader }

func requireReceipts(t *testing.T, s store.Store, f store.ReceiptFilter, want ...model.Receipt) {
	t.Helper()
	got, err := s.ListReceipts(t.Context(), f)
	requireNoError(t, err, "ListReceipts")
	g := map[string]model.Receipt{}
	for _, r := range got {
		if _, dup := g[receiptKey(r)]; dup {
			t.Fatalf("ListReceipts(%+v): two receipts for %s", f, receiptKey(r))
		}
		g[receiptKey(r)] = r
	}
	w := map[string]model.Receipt{}
	for _, r := range want {
		w[receiptKey(r)] = r
	}
	if len(g) != len(w) {
		t.Fatalf("ListReceipts(%+v)\n got: %s\nwant: %s", f, dump(got), dump(want))
	}
	for k, r := range w {
		if g[k] != r {
			t.Fatalf("ListReceipts(%+v)\n got: %s\nwant: %s", f, dump(got), dump(want))
		}
	}
}

// An older receipt never overwrites a newer one.
func testReceiptLatestWins(t *testing.T, s store.Store) {
	m := msgID("receipt")
	r1 := model.Receipt{MsgID: m, Iss: grp, Reader: alice, GroupID: grp, AtMS: base + 2_000, Status: model.ReceiptReaded}
	mustPutReceipt(t, s, r1, r1)
	requireReceipts(t, s, store.ReceiptFilter{MsgID: m, Limit: 10}, r1)

	older := model.Receipt{MsgID: m, Iss: grp, Reader: alice, GroupID: grp, AtMS: base + 1_000, Status: model.ReceiptUnread, Reason: "late"}
	mustPutReceipt(t, s, older, r1)
	requireReceipts(t, s, store.ReceiptFilter{MsgID: m, Limit: 10}, r1)

	newer := model.Receipt{MsgID: m, Iss: alice, Reader: alice, GroupID: grp, AtMS: base + 3_000, Status: model.ReceiptRejected, Reason: "not for me"}
	mustPutReceipt(t, s, newer, newer)
	requireReceipts(t, s, store.ReceiptFilter{MsgID: m, Limit: 10}, newer)
	mustPutReceipt(t, s, r1, newer)
	requireReceipts(t, s, store.ReceiptFilter{Reader: alice, Limit: 10}, newer)

	// Another reader of the same message is another receipt.
	rb := model.Receipt{MsgID: m, Iss: grp, Reader: bob, GroupID: grp, AtMS: base + 500, Status: model.ReceiptReading}
	mustPutReceipt(t, s, rb, rb)
	requireReceipts(t, s, store.ReceiptFilter{MsgID: m, Limit: 10}, newer, rb)
}

// "Unless a receipt with a later at_ms exists": at the same at_ms the new
// receipt is stored.
func testReceiptSameTime(t *testing.T, s store.Store) {
	m := msgID("receipt-same")
	r1 := model.Receipt{MsgID: m, Iss: alice, Reader: alice, AtMS: base, Status: model.ReceiptReading}
	mustPutReceipt(t, s, r1, r1)
	r2 := r1
	r2.Status, r2.Reason = model.ReceiptReaded, "done"
	mustPutReceipt(t, s, r2, r2)
	requireReceipts(t, s, store.ReceiptFilter{MsgID: m, Limit: 10}, r2)
}

func testListReceipts(t *testing.T, s store.Store) {
	m1, m2, m3 := msgID("lr-1"), msgID("lr-2"), msgID("lr-3")
	const g2 = "did:test:group-2"
	rs := []model.Receipt{
		{MsgID: m1, Iss: grp, Reader: alice, GroupID: grp, AtMS: base + 1, Status: model.ReceiptReaded},
		{MsgID: m1, Iss: grp, Reader: bob, GroupID: grp, AtMS: base + 2, Status: model.ReceiptUnread},
		{MsgID: m2, Iss: grp, Reader: alice, GroupID: grp, AtMS: base + 3, Status: model.ReceiptAccepted, Reason: "ok"},
		{MsgID: m2, Iss: grp, Reader: carol, GroupID: grp, AtMS: base + 4, Status: model.ReceiptQuarantined, Reason: "virus"},
		{MsgID: m3, Iss: alice, Reader: alice, AtMS: base + 5, Status: model.ReceiptReaded},
		{MsgID: m3, Iss: g2, Reader: bob, GroupID: g2, AtMS: base + 6, Status: model.ReceiptReading},
	}
	// Pages from a cursor, with two receipts at one time (the order is
	// at_ms, msg_id, reader).
	defer func() {
		if t.Failed() {
			return
		}
		mustPutReceipt(t, s, model.Receipt{MsgID: m3, Iss: carol, Reader: carol, AtMS: base + 5, Status: model.ReceiptReaded},
			model.Receipt{MsgID: m3, Iss: carol, Reader: carol, AtMS: base + 5, Status: model.ReceiptReaded})
		all, err := s.ListReceipts(t.Context(), store.ReceiptFilter{Limit: 100, MsgID: m3})
		requireNoError(t, err, "ListReceipts")
		for size := 1; size <= 3; size++ {
			var paged []model.Receipt
			f := store.ReceiptFilter{MsgID: m3, Limit: size}
			for range 10 {
				page, err := s.ListReceipts(t.Context(), f)
				requireNoError(t, err, "ListReceipts(page)")
				paged = append(paged, page...)
				if len(page) < size {
					break
				}
				last := page[len(page)-1]
				f.CursorAtMS, f.CursorMsgID, f.CursorReader = last.AtMS, last.MsgID, last.Reader
			}
			if len(all) != 3 || !reflect.DeepEqual(paged, all) {
				t.Fatalf("receipts of m3 in pages of %d: %s\nwant %s", size, dump(paged), dump(all))
			}
		}
	}()
	for _, r := range rs {
		mustPutReceipt(t, s, r, r)
	}
	cases := []struct {
		f    store.ReceiptFilter
		want []model.Receipt
	}{
		{store.ReceiptFilter{MsgID: m1, Limit: 100}, []model.Receipt{rs[0], rs[1]}},
		{store.ReceiptFilter{MsgID: m3, Limit: 100}, []model.Receipt{rs[4], rs[5]}},
		{store.ReceiptFilter{GroupID: grp, Limit: 100}, rs[:4]},
		{store.ReceiptFilter{GroupID: g2, Limit: 100}, []model.Receipt{rs[5]}},
		{store.ReceiptFilter{Reader: alice, Limit: 100}, []model.Receipt{rs[0], rs[2], rs[4]}},
		{store.ReceiptFilter{Reader: carol, Limit: 100}, []model.Receipt{rs[3]}},
		{store.ReceiptFilter{MsgID: m1, Reader: bob, Limit: 100}, []model.Receipt{rs[1]}},
		{store.ReceiptFilter{GroupID: grp, Reader: alice, Limit: 100}, []model.Receipt{rs[0], rs[2]}},
		{store.ReceiptFilter{MsgID: msgID("none"), Limit: 100}, nil},
		{store.ReceiptFilter{Reader: dave, Limit: 100}, nil},
	}
	for _, c := range cases {
		requireReceipts(t, s, c.f, c.want...)
	}
	got, err := s.ListReceipts(t.Context(), store.ReceiptFilter{Reader: alice, Limit: 2})
	requireNoError(t, err, "ListReceipts(limit 2)")
	if len(got) != 2 {
		t.Fatalf("ListReceipts(limit 2) returned %d receipts", len(got))
	}
	for _, r := range got {
		if r.Reader != alice || !slices.Contains(rs, r) {
			t.Fatalf("ListReceipts(reader alice, limit 2) returned %s", dump(r))
		}
	}
}

// ListEvents pages the log by event id, optionally for one owner.
func testListEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	if evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 10}); err != nil || len(evs) != 0 {
		t.Fatalf("ListEvents on an empty store = %s, %v", dump(evs), err)
	}
	requireLastEventID(t, s, 0, "on an empty store")
	seedBox(t, s, "events", alice, model.Inbox, 3, base, nil)
	seedBox(t, s, "events", bob, model.TunnelOutbox, 2, base+10, nil)
	seedBox(t, s, "events-2", alice, model.Inbox, 2, base+20, nil)
	c := mustClaim(t, s, claimParams(bob, model.TunnelOutbox, base+30, "L"))
	mustUpdate(t, s, &store.Update{RecordID: c.RecordID, From: model.Sending, ExpectLeaseID: "L", To: model.Sent,
		Delivery: model.Delivery{Attempts: 1}, NowMS: base + 40, EventType: model.EventRecordDelivered})

	all, err := s.ListEvents(ctx, store.EventFilter{Limit: 1000})
	requireNoError(t, err, "ListEvents")
	if len(all) != 9 {
		t.Fatalf("ListEvents = %d events, want 9 (7 created, 1 claimed, 1 delivered): %s", len(all), dump(all))
	}
	requireLastEventID(t, s, all[8].EventID, "after nine events")
	ids := func(evs []model.Event) []int64 {
		out := make([]int64, len(evs))
		for i, e := range evs {
			out[i] = e.EventID
		}
		return out
	}
	for i := 1; i < len(all); i++ {
		if all[i].EventID <= all[i-1].EventID {
			t.Fatalf("ListEvents ids not ascending: %v", ids(all))
		}
	}
	if all[0].EventID <= 0 {
		t.Fatalf("event ids must be positive (0 is the start cursor): %v", ids(all))
	}
	// Events are in the order things happened.
	if all[7].Type != model.EventRecordClaimed || all[8].Type != model.EventRecordDelivered {
		t.Fatalf("last events = %s, %s; want claimed then delivered", all[7].Type, all[8].Type)
	}

	for _, size := range []int{1, 2, 4} {
		var got []model.Event
		var after int64
		for range 100 {
			page, err := s.ListEvents(ctx, store.EventFilter{After: after, Limit: size})
			requireNoError(t, err, "ListEvents")
			if len(page) > size {
				t.Fatalf("ListEvents(limit %d) returned %d", size, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1].EventID
		}
		if !slices.Equal(got, all) {
			t.Fatalf("ListEvents paged by %d = ids %v, want %v", size, ids(got), ids(all))
		}
	}
	page, err := s.ListEvents(ctx, store.EventFilter{After: all[3].EventID, Limit: 100})
	requireNoError(t, err, "ListEvents")
	if !slices.Equal(page, all[4:]) {
		t.Fatalf("ListEvents(after the 4th) = ids %v, want %v", ids(page), ids(all[4:]))
	}
	page, err = s.ListEvents(ctx, store.EventFilter{After: all[8].EventID, Limit: 100})
	requireNoError(t, err, "ListEvents")
	if len(page) != 0 {
		t.Fatalf("ListEvents(after the last) = %s", dump(page))
	}

	for owner, n := range map[string]int{alice: 5, bob: 4, carol: 0} {
		var want []model.Event
		for _, e := range all {
			if e.Owner == owner {
				want = append(want, e)
			}
		}
		if len(want) != n {
			t.Fatalf("%d events name owner %s, want %d: %s", len(want), owner, n, dump(all))
		}
		for _, size := range []int{2, 100} {
			var got []model.Event
			var after int64
			for range 100 {
				page, err := s.ListEvents(ctx, store.EventFilter{After: after, Owner: owner, Limit: size})
				requireNoError(t, err, "ListEvents(owner)")
				if len(page) == 0 {
					break
				}
				got = append(got, page...)
				after = page[len(page)-1].EventID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("ListEvents(owner %s, page %d) = ids %v, want %v", owner, size, ids(got), ids(want))
			}
		}
	}
}

func testTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	if id, err := s.Token(ctx, "sha256:unknown"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("Token(unknown) = %+v, %v; want model.ErrNotFound", id, err)
	}
	ids := map[string]model.Identity{
		"sha256:admin":  {DID: "did:test:root", Role: model.RoleAdmin},
		"sha256:agent":  {DID: alice, Role: model.RoleAgent},
		"sha256:tunnel": {DID: tunnel, Role: model.RoleTunnel},
	}
	for h, id := range ids {
		requireNoError(t, s.PutToken(ctx, h, id, base), "PutToken")
	}
	for h, want := range ids {
		got, err := s.Token(ctx, h)
		requireNoError(t, err, fmt.Sprintf("Token(%s)", h))
		if got != want {
			t.Fatalf("Token(%s) = %+v, want %+v", h, got, want)
		}
	}
	if id, err := s.Token(ctx, "sha256:AGENT"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("Token(differently cased hash) = %+v, %v; want model.ErrNotFound", id, err)
	}

	// Listing and revoking.
	requireNoError(t, s.PutToken(ctx, "sha256:agent2", model.Identity{DID: alice, Role: model.RoleAgent}, base+1), "PutToken")
	if _, err := s.Token(ctx, "sha256:agent2"); err != nil {
		t.Fatalf("Token(agent2): %v", err)
	}
	all, err := s.ListTokens(ctx, "", 0)
	requireNoError(t, err, "ListTokens")
	if len(all) != 4 || all[3].Hash != "sha256:agent2" || all[3].CreatedAtMS != base+1 {
		t.Fatalf("ListTokens = %+v, want 4, the newest last", all)
	}
	mine, err := s.ListTokens(ctx, alice, 0)
	requireNoError(t, err, "ListTokens(alice)")
	if len(mine) != 2 || mine[0].Hash != "sha256:agent" || mine[0].Identity != ids["sha256:agent"] {
		t.Fatalf("ListTokens(alice) = %+v", mine)
	}
	if one, err := s.ListTokens(ctx, "", 1); err != nil || len(one) != 1 {
		t.Fatalf("ListTokens(limit 1) = %+v, %v", one, err)
	}
	if _, err := s.DeleteToken(ctx, "", "sha256:agent", base); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("DeleteToken(a prefix of two) = %v, want model.ErrConflict", err)
	}
	if _, err := s.DeleteToken(ctx, "", "sha256:nobody", base); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("DeleteToken(unknown) = %v, want model.ErrNotFound", err)
	}
	if _, err := s.DeleteToken(ctx, tunnel, "sha256:agent2", base); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("DeleteToken(another DID's) = %v, want model.ErrNotFound", err)
	}
	gone, err := s.DeleteToken(ctx, alice, "sha256:agent2", base+9)
	requireNoError(t, err, "DeleteToken")
	if gone.Hash != "sha256:agent2" || gone.DID != alice {
		t.Fatalf("DeleteToken = %+v", gone)
	}
	// Asked for before the delete, so remembered: a revoked token must
	// not live on in the store's memory.
	if id, err := s.Token(ctx, "sha256:agent2"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("Token(revoked) = %+v, %v; want model.ErrNotFound", id, err)
	}
	if got, err := s.Token(ctx, "sha256:agent"); err != nil || got != ids["sha256:agent"] {
		t.Fatalf("the other token of the DID went too: %+v, %v", got, err)
	}
}

// Changes to groups, blocks, routes and tokens are events of their owner,
// written only when something changed.
func testContactEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	const spam = "did:test:spam"
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{alice, bob}, model.DeliverToGroup, base), "SetGroupSubscribers")
	requireNoError(t, s.SetBlock(ctx, alice, spam, true, base+1), "SetBlock")
	requireNoError(t, s.SetBlock(ctx, alice, spam, true, base+2), "SetBlock again") // no change: no event
	requireNoError(t, s.SetBlock(ctx, alice, spam, false, base+3), "SetBlock off")
	requireNoError(t, s.SetBlock(ctx, alice, spam, false, base+4), "SetBlock off again")
	requireNoError(t, s.SetRoutes(ctx, alice, []model.ContactRoute{{TunnelDID: tunnel, Address: "a"}}, base+5), "SetRoutes")
	id := model.Identity{DID: alice, Role: model.RoleAgent}
	requireNoError(t, s.PutToken(ctx, "sha256:ev", id, base+6), "PutToken")
	requireNoError(t, s.PutToken(ctx, "sha256:ev", id, base+7), "PutToken again") // registered again: no event
	if _, err := s.DeleteToken(ctx, "", "sha256:ev", base+8); err != nil {
		t.Fatalf("DeleteToken: %v", err)
	}
	type ev struct {
		typ, owner, detail string
		at                 int64
	}
	var got []ev
	for _, owner := range []string{grp, alice} {
		es, err := s.ListEvents(ctx, store.EventFilter{Owner: owner, Limit: 100})
		requireNoError(t, err, "ListEvents")
		for _, e := range es {
			got = append(got, ev{e.Type, e.Owner, e.Detail, e.AtMS})
		}
	}
	want := []ev{
		{model.EventGroupSet, grp, "subscribers: 2, delivery: group", base},
		{model.EventBlocked, alice, spam, base + 1},
		{model.EventUnblocked, alice, spam, base + 3},
		{model.EventRoutesSet, alice, "routes: 1", base + 5},
		{model.EventTokenCreated, alice, "token_id: sha256:ev, role: agent", base + 6},
		{model.EventTokenRevoked, alice, "token_id: sha256:ev, role: agent", base + 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %+v\nwant %+v", got, want)
	}
}

// A receipt stored or changed is an event of its group (else of its
// reader) naming the message; the same receipt again, or an older one,
// is none.
func testReceiptEvents(t *testing.T, s store.Store) {
	m := msgID("receipt-events")
	events := func(owner string) []string {
		var out []string
		for _, e := range allEvents(t, s, owner) {
			if e.Type == model.EventReceiptSet && e.MsgID == m {
				out = append(out, e.Detail)
			}
		}
		return out
	}
	reading := model.Receipt{MsgID: m, Iss: grp, Reader: alice, GroupID: grp, AtMS: base + 1_000, Status: model.ReceiptReading}
	mustPutReceipt(t, s, reading, reading)
	mustPutReceipt(t, s, reading, reading)
	older := reading
	older.AtMS, older.Status = base+500, model.ReceiptUnread
	mustPutReceipt(t, s, older, reading)
	read := reading
	read.AtMS, read.Status, read.Reason = base+2_000, model.ReceiptReaded, "opened"
	mustPutReceipt(t, s, read, read)
	want := []string{"reader: " + alice + ", status: READING", "reader: " + alice + ", status: READED, reason: opened"}
	if got := events(grp); !slices.Equal(got, want) {
		t.Fatalf("receipt events of %s: %q, want %q", grp, got, want)
	}
	direct := model.Receipt{MsgID: m, Iss: bob, Reader: bob, AtMS: base + 3_000, Status: model.ReceiptAccepted}
	mustPutReceipt(t, s, direct, direct)
	if got := events(bob); len(got) != 1 || got[0] != "reader: "+bob+", status: ACCEPTED" {
		t.Fatalf("receipt events of reader %s: %q", bob, got)
	}
}
