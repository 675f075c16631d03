package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func updateTests() []testCase {
	return []testCase{
		{"CompareAndSetSucceeds", testUpdateCAS},
		{"WrongFromConflicts", testUpdateWrongFrom},
		{"LeaseMismatchConflicts", testUpdateLeaseMismatch},
		{"NoExpectedLeaseComparesFromOnly", testUpdateNoExpectedLease},
		{"EndedLeaseIsKeptNotHeld", testUpdateEndsLease},
		{"MissingIsNotFound", testUpdateNotFound},
		{"DeliveryAndLeaseRoundTrip", testUpdateRoundTrip},
		{"AppendsEvent", testUpdateEvent},
		{"NoticeIsASecondEvent", testUpdateNotice},
		{"NoNoticeWithoutTheChange", testUpdateNoticeConflict},
		{"ReceiptRidesTheChange", testUpdateReceipt},
		{"ConcurrentExactlyOneWins", testUpdateConcurrent},
	}
}

// A matching Update applies the new state, delivery and lease.
func testUpdateCAS(t *testing.T, s store.Store) {
	r := seedBox(t, s, "cas", tunnel, model.TunnelOutbox, 1, base, func(int) []recOpt {
		return []recOpt{withRoute(model.Route{TunnelDID: tunnel, Platform: "telegram", ChatID: "42"}), withTags("x")}
	})[0]
	c := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+10, "L1"))
	u := &store.Update{
		RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L1", To: model.Sent,
		Delivery: model.Delivery{Attempts: 1, ExternalMsgID: "tg-123", DeliveredAtMS: base + 50},
		NowMS:    base + 50, EventType: model.EventRecordDelivered, EventDetail: "ok",
	}
	got := mustUpdate(t, s, u)
	want := c
	want.State, want.Lease, want.Delivery, want.UpdatedAtMS = model.Sent, nil, u.Delivery, u.NowMS
	requireRecord(t, got, want, "Update result")
	requireRecord(t, mustGet(t, s, r.RecordID), want, "GetRecord after Update")
}

// A wrong From is a conflict and changes nothing.
func testUpdateWrongFrom(t *testing.T, s store.Store) {
	r := seedBox(t, s, "wrongfrom", alice, model.Inbox, 1, base, nil)[0]
	before := allEvents(t, s, "")
	for _, from := range []model.State{model.Reading, model.Readed, model.Wait} {
		u := transition(r.RecordID, from, model.Archived, base+10)
		u.Delivery = model.Delivery{Attempts: 9}
		u.Lease = &model.Lease{ID: "x", ExpiresAtMS: base + 99}
		_, err := s.Update(t.Context(), u)
		requireErrIs(t, err, model.ErrConflict, fmt.Sprintf("Update From %s on an UNREAD record", from))
		requireRecord(t, mustGet(t, s, r.RecordID), r, "record after conflicting Update")
	}
	if after := allEvents(t, s, ""); len(after) != len(before) {
		t.Fatalf("conflicting Updates appended %d events", len(after)-len(before))
	}
}

// ExpectLeaseID must match the current lease.
func testUpdateLeaseMismatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := seedBox(t, s, "lease", tunnel, model.TunnelOutbox, 1, base, nil)[0]
	c1 := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+10, "L1"))

	u := &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L-other", To: model.Sent,
		Delivery: model.Delivery{Attempts: 1}, NowMS: base + 20, EventType: model.EventRecordDelivered}
	_, err := s.Update(ctx, u)
	requireErrIs(t, err, model.ErrConflict, "Update with another lease id")
	requireRecord(t, mustGet(t, s, r.RecordID), c1, "record after lease mismatch")

	// The holder gives it back (lease expired), someone else claims it: the
	// first holder's lease id no longer matches.
	mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L1", To: model.Wait,
		Delivery: model.Delivery{Attempts: 1}, VisibleAtMS: base + 30, NowMS: base + 30, EventType: model.EventLeaseExpired})
	_, err = s.Update(ctx, &store.Update{RecordID: r.RecordID, From: model.Wait, ExpectLeaseID: "L1", To: model.Dead, NowMS: base + 35, EventType: model.EventRecordDead})
	requireErrIs(t, err, model.ErrConflict, "Update expecting a lease on a record that holds none")
	c2 := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+40, "L2"))
	u.ExpectLeaseID, u.NowMS = "L1", base+50
	_, err = s.Update(ctx, u)
	requireErrIs(t, err, model.ErrConflict, "Update with a stale lease id")
	requireRecord(t, mustGet(t, s, r.RecordID), c2, "record after stale-lease Update")

	u.ExpectLeaseID = "L2"
	if got := mustUpdate(t, s, u); got.State != model.Sent || got.Lease != nil {
		t.Fatalf("Update with the current lease = %s, want SENT without lease", dump(got))
	}
}

// A holder's change that ends its lease (EndsLease) leaves the lease's id
// and the kind of change on the record as Ended, which is not a lease: a
// compare-and-set expecting it conflicts. Any later change without
// EndsLease, a claim included, forgets it, and so does an expiry's
// (ExpectLeaseID alone).
func testUpdateEndsLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := seedBox(t, s, "endslease", tunnel, model.TunnelOutbox, 1, base, nil)[0]
	ended := func(got model.Record, want *model.EndedLease, what string) {
		t.Helper()
		for _, g := range []model.Record{got, mustGet(t, s, r.RecordID)} {
			if g.Lease != nil || !reflect.DeepEqual(g.Ended, want) {
				t.Fatalf("%s: lease %s, ended %+v; want no lease, ended %+v", what, dump(g.Lease), g.Ended, want)
			}
		}
	}
	mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+10, "L1"))
	l1 := &model.EndedLease{ID: "L1", By: model.EndedByAck}
	got := mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L1", EndsLease: l1,
		To: model.Sent, Delivery: model.Delivery{Attempts: 1}, NowMS: base + 20, EventType: model.EventRecordDelivered})
	ended(got, l1, "acked by its holder")

	_, err := s.Update(ctx, &store.Update{RecordID: r.RecordID, From: model.Sent, ExpectLeaseID: "L1", To: model.Wait,
		NowMS: base + 30, EventType: model.EventRecordState})
	requireErrIs(t, err, model.ErrConflict, "Update expecting a lease that was ended")
	ended(mustGet(t, s, r.RecordID), l1, "after the refused Update")

	got = mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sent, To: model.Wait,
		Delivery: model.Delivery{Attempts: 1}, NowMS: base + 40, EventType: model.EventRecordState})
	ended(got, nil, "moved by hand")

	c := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+50, "L2"))
	if c.Lease == nil || c.Lease.ID != "L2" || c.Ended != nil {
		t.Fatalf("claim: lease %s, ended %+v; want lease L2 and none ended", dump(c.Lease), c.Ended)
	}
	got = mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L2", To: model.Wait,
		Delivery: model.Delivery{Attempts: 2}, NowMS: base + 60, EventType: model.EventLeaseExpired})
	ended(got, nil, "expired")

	mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+70, "L3"))
	l3 := &model.EndedLease{ID: "L3", By: model.EndedByFail}
	got = mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L3", EndsLease: l3,
		To: model.Wait, Delivery: model.Delivery{Attempts: 3}, VisibleAtMS: base + 80, NowMS: base + 71, EventType: model.EventRecordRetry})
	ended(got, l3, "failed by its holder")
	c = mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+90, "L4"))
	if c.Lease == nil || c.Lease.ID != "L4" || c.Ended != nil {
		t.Fatalf("claim after a failure: lease %s, ended %+v; want lease L4 and none ended", dump(c.Lease), c.Ended)
	}
}

// Update of a record that does not exist is ErrNotFound.
func testUpdateNotFound(t *testing.T, s store.Store) {
	seedBox(t, s, "notfound", alice, model.Inbox, 1, base, nil)
	_, err := s.Update(t.Context(), transition(model.RecordID(alice, model.Inbox, msgID("nope"), ""), model.Unread, model.Readed, base))
	requireErrIs(t, err, model.ErrNotFound, "Update of a missing record")
}

// Without ExpectLeaseID only From is compared.
func testUpdateNoExpectedLease(t *testing.T, s store.Store) {
	r := seedBox(t, s, "nolease", alice, model.Inbox, 1, base, nil)[0]
	mustClaim(t, s, claimParams(alice, model.Inbox, base+10, "L1"))
	got := mustUpdate(t, s, transition(r.RecordID, model.Reading, model.Readed, base+20))
	if got.State != model.Readed || got.Lease != nil {
		t.Fatalf("Update without ExpectLeaseID = %s, want READED without lease", dump(got))
	}
}

// Delivery is replaced as given; the lease is set, extended and cleared.
func testUpdateRoundTrip(t *testing.T, s store.Store) {
	r := seedBox(t, s, "roundtrip", tunnel, model.TunnelOutbox, 1, base, nil)[0]
	want := r

	step := func(u *store.Update, what string) {
		t.Helper()
		got := mustUpdate(t, s, u)
		want.State, want.Delivery, want.UpdatedAtMS = u.To, u.Delivery, u.NowMS
		want.Lease = nil
		if u.Lease != nil {
			l := *u.Lease
			want.Lease = &l
		}
		requireRecord(t, got, want, what+": Update result")
		requireRecord(t, mustGet(t, s, r.RecordID), want, what+": GetRecord")
	}
	step(&store.Update{RecordID: r.RecordID, From: model.Wait, To: model.Sending,
		Delivery: model.Delivery{Attempts: 1},
		Lease:    &model.Lease{ID: "L1", Holder: "sender-a", ExpiresAtMS: base + 1_000},
		NowMS:    base + 10, EventType: model.EventRecordClaimed}, "set lease")
	requireNextLease(t, s, base+1_000, true, "after setting a lease by Update")

	step(&store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L1", To: model.Sending,
		Delivery: model.Delivery{Attempts: 1},
		Lease:    &model.Lease{ID: "L1", Holder: "sender-a", ExpiresAtMS: base + 5_000},
		NowMS:    base + 20, EventType: model.EventLeaseExtended}, "extend lease")
	requireNextLease(t, s, base+5_000, true, "after extending")

	step(&store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L1", To: model.Wait,
		Delivery: model.Delivery{Attempts: 2, NextRetryAtMS: base + 9_000, ErrorCode: "rate_limited",
			ErrorMessage: "slow down", RetryAfterMS: 8_000, LastError: "429 Too Many Requests"},
		VisibleAtMS: base + 9_000, NowMS: base + 30, EventType: model.EventRecordRetry}, "clear lease, schedule retry")
	requireNextLease(t, s, 0, false, "after clearing")

	step(&store.Update{RecordID: r.RecordID, From: model.Wait, To: model.Sending,
		Delivery: model.Delivery{Attempts: 2, NextRetryAtMS: base + 9_000},
		Lease:    &model.Lease{ID: "L2", ExpiresAtMS: base + 12_000},
		NowMS:    base + 9_000, EventType: model.EventRecordClaimed}, "second attempt")
	step(&store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L2", To: model.Sent,
		Delivery: model.Delivery{Attempts: 3, ExternalMsgID: "ext-77", DeliveredAtMS: base + 9_500},
		NowMS:    base + 9_500, EventType: model.EventRecordDelivered}, "delivered")
}

// The Update's event is appended with its type, detail, states and time.
func testUpdateEvent(t *testing.T, s store.Store) {
	r := seedBox(t, s, "update-event", tunnel, model.TunnelOutbox, 1, base, nil)[0]
	mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+1, "L"))
	before := allEvents(t, s, "")
	mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L", To: model.Wait,
		Delivery: model.Delivery{Attempts: 1, NextRetryAtMS: base + 2_000}, VisibleAtMS: base + 2_000,
		NowMS: base + 100, EventType: model.EventRecordRetry, EventDetail: "attempt 1 failed: timeout"})
	evs := allEvents(t, s, "")
	if len(evs) != len(before)+1 {
		t.Fatalf("Update appended %d events, want 1", len(evs)-len(before))
	}
	e := evs[len(evs)-1]
	want := model.Event{EventID: e.EventID, Type: model.EventRecordRetry, Owner: tunnel, BoxKind: model.TunnelOutbox,
		RecordID: r.RecordID, MsgID: r.MsgID, FromState: model.Sending, ToState: model.Wait, AtMS: base + 100,
		Detail: "attempt 1 failed: timeout"}
	if e != want {
		t.Fatalf("Update event\n got: %s\nwant: %s", dump(e), dump(want))
	}
}

// An Update with a Notice appends the change's own event and one more,
// owned by the notice's owner, naming the same record, states and time
// with the notice's type and detail; the notice's owner reads it in its
// own event log, the record's owner does not.
func testUpdateNotice(t *testing.T, s store.Store) {
	r := seedBox(t, s, "update-notice", tunnel, model.TunnelOutbox, 1, base, nil)[0]
	mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+1, "L"))
	before := allEvents(t, s, "")
	mustUpdate(t, s, &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "L", To: model.Dead,
		Delivery: model.Delivery{Attempts: 1}, NowMS: base + 100, EventType: model.EventRecordDead, EventDetail: "for the tunnel",
		Notice: &store.Notice{Owner: alice, Type: model.EventDeliveryDead, Detail: "for the author"}})
	evs := allEvents(t, s, "")
	if len(evs) != len(before)+2 {
		t.Fatalf("Update with a notice appended %d events, want 2: %s", len(evs)-len(before), dump(evs[len(before):]))
	}
	own, told := evs[len(evs)-2], evs[len(evs)-1]
	if own.Type == model.EventDeliveryDead {
		own, told = told, own
	}
	want := model.Event{EventID: own.EventID, Type: model.EventRecordDead, Owner: tunnel, BoxKind: model.TunnelOutbox,
		RecordID: r.RecordID, MsgID: r.MsgID, FromState: model.Sending, ToState: model.Dead, AtMS: base + 100, Detail: "for the tunnel"}
	if own != want {
		t.Fatalf("the change's own event\n got: %s\nwant: %s", dump(own), dump(want))
	}
	want.EventID, want.Type, want.Owner, want.Detail = told.EventID, model.EventDeliveryDead, alice, "for the author"
	if told != want {
		t.Fatalf("the notice\n got: %s\nwant: %s", dump(told), dump(want))
	}
	if got := eventsOf(allEvents(t, s, alice), model.EventDeliveryDead, r.RecordID); len(got) != 1 {
		t.Fatalf("%s's own events hold %d notices of %s, want 1", alice, len(got), r.RecordID)
	}
	if got := eventsOf(allEvents(t, s, tunnel), model.EventDeliveryDead, r.RecordID); len(got) != 0 {
		t.Fatalf("the record owner's events hold the notice meant for %s: %s", alice, dump(got))
	}
}

// A compare-and-set that fails writes neither event, the notice included,
// on its own and before a claim.
func testUpdateNoticeConflict(t *testing.T, s store.Store) {
	r := seedBox(t, s, "notice-conflict", tunnel, model.TunnelOutbox, 1, base, nil)[0]
	mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+1, "L"))
	before := allEvents(t, s, "")
	u := &store.Update{RecordID: r.RecordID, From: model.Sending, ExpectLeaseID: "other", To: model.Sent,
		NowMS: base + 100, EventType: model.EventRecordDelivered,
		Notice: &store.Notice{Owner: alice, Type: model.EventDeliverySent}}
	_, err := s.Update(t.Context(), u)
	requireErrIs(t, err, model.ErrConflict, "Update under another lease")
	_, _, err = s.UpdateThenClaim(t.Context(), u, claimParams(tunnel, model.TunnelOutbox, base+100, "L2"))
	requireErrIs(t, err, model.ErrConflict, "UpdateThenClaim under another lease")
	if after := allEvents(t, s, ""); len(after) != len(before) {
		t.Fatalf("failed Updates with a notice appended %d events: %s", len(after)-len(before), dump(after[len(before):]))
	}
}

// An Update with a Receipt stores it with the change, with its
// receipt.set event, unless the reader's stored receipt holds a decision
// or is newer; a change that fails stores none, and the receipt rides an
// UpdateThenClaim too.
func testUpdateReceipt(t *testing.T, s store.Store) {
	ctx := t.Context()
	recs := seedBox(t, s, "update-receipt", alice, model.Inbox, 6, base, nil)
	read := func(r model.Record, at int64) *store.Update {
		u := transition(r.RecordID, model.Unread, model.Readed, at)
		u.Receipt = &model.Receipt{MsgID: r.MsgID, Iss: alice, Reader: alice, GroupID: grp, AtMS: at, Status: model.ReceiptReaded}
		return u
	}
	stored := func(r model.Record) model.Receipt {
		t.Helper()
		got, err := s.ListReceipts(ctx, store.ReceiptFilter{MsgID: r.MsgID, Reader: alice, Limit: 10})
		requireNoError(t, err, "ListReceipts")
		if len(got) > 1 {
			t.Fatalf("%d receipts of one reader for %s", len(got), short(r.MsgID))
		}
		if len(got) == 0 {
			return model.Receipt{}
		}
		return got[0]
	}
	put := func(r model.Record, status model.ReceiptStatus, at int64) model.Receipt {
		t.Helper()
		rc, err := s.PutReceipt(ctx, model.Receipt{MsgID: r.MsgID, Iss: alice, Reader: alice, GroupID: grp, AtMS: at,
			Status: status, Reason: "set by hand"}, at)
		requireNoError(t, err, "PutReceipt")
		return rc
	}
	accepted := put(recs[1], model.ReceiptAccepted, base+50)
	put(recs[2], model.ReceiptReading, base+50)
	newer := put(recs[3], model.ReceiptUnread, base+500)
	before := len(eventsOf(allEvents(t, s, grp), model.EventReceiptSet, ""))

	for _, r := range recs[:4] {
		mustUpdate(t, s, read(r, base+100))
	}
	want := model.Receipt{MsgID: recs[0].MsgID, Iss: alice, Reader: alice, GroupID: grp, AtMS: base + 100, Status: model.ReceiptReaded}
	if got := stored(recs[0]); got != want {
		t.Fatalf("receipt after the change = %+v, want %+v", got, want)
	}
	if got := stored(recs[1]); got != accepted {
		t.Fatalf("an ACCEPTED receipt became %+v; a decision stands", got)
	}
	want.MsgID = recs[2].MsgID
	if got := stored(recs[2]); got != want {
		t.Fatalf("a READING receipt became %+v, want %+v", got, want)
	}
	if got := stored(recs[3]); got != newer {
		t.Fatalf("a newer receipt became %+v; it stands", got)
	}
	evs := eventsOf(allEvents(t, s, grp), model.EventReceiptSet, "")[before:]
	if len(evs) != 2 || evs[0].MsgID != recs[0].MsgID || evs[1].MsgID != recs[2].MsgID ||
		evs[0].AtMS != base+100 || evs[0].Detail != "reader: "+alice+", status: READED" {
		t.Fatalf("receipt.set events of the changes = %s; want one each for the receipts stored", dump(evs))
	}

	failed := read(recs[4], base+200)
	failed.From = model.Reading
	_, err := s.Update(ctx, failed)
	requireErrIs(t, err, model.ErrConflict, "Update from the wrong state")
	_, _, err = s.UpdateThenClaim(ctx, failed, claimParams(alice, model.Inbox, base+200, "L"))
	requireErrIs(t, err, model.ErrConflict, "UpdateThenClaim from the wrong state")
	if got := stored(recs[4]); got != (model.Receipt{}) {
		t.Fatalf("a failed change stored the receipt %+v", got)
	}
	if _, c, err := s.UpdateThenClaim(ctx, read(recs[4], base+300), claimParams(alice, model.Inbox, base+300, "L")); err != nil || c.Err != nil {
		t.Fatalf("UpdateThenClaim = %v, claim %v", err, c.Err)
	}
	if got := stored(recs[4]); got.Status != model.ReceiptReaded || got.AtMS != base+300 {
		t.Fatalf("receipt after UpdateThenClaim = %+v, want READED at %d", got, base+300)
	}
}

// Concurrent compare-and-sets on one record: exactly one wins.
func testUpdateConcurrent(t *testing.T, s store.Store) {
	r := seedBox(t, s, "update-concurrent", alice, model.Inbox, 1, base, nil)[0]
	const workers = 8
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			u := transition(r.RecordID, model.Unread, model.Readed, base+int64(10+w))
			u.EventDetail = fmt.Sprint(w)
			_, errs[w] = s.Update(t.Context(), u)
		})
	}
	wg.Wait()
	winner := -1
	for w, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("workers %d and %d both won the compare-and-set", winner, w)
			}
			winner = w
		case !errors.Is(err, model.ErrConflict):
			t.Fatalf("worker %d: %v; want nil or model.ErrConflict", w, err)
		}
	}
	if winner < 0 {
		t.Fatal("no worker won the compare-and-set")
	}
	got := mustGet(t, s, r.RecordID)
	if got.State != model.Readed || got.UpdatedAtMS != base+int64(10+winner) {
		t.Fatalf("record after race = %s, want READED updated by worker %d", dump(got), winner)
	}
	if es := eventsOf(allEvents(t, s, ""), model.EventRecordState, r.RecordID); len(es) != 1 || es[0].Detail != fmt.Sprint(winner) {
		t.Fatalf("state change events = %s, want exactly the winner's", dump(es))
	}
}
