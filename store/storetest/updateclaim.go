package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// UpdateThenClaim is a worker's ack that asks for its next record: the
// update, and only if it succeeded, the claim, as the two calls would be.
func updateClaimTests() []testCase {
	return []testCase{
		{"AckThenNext", testUpdateClaimAckNext},
		{"NoticeRidesTheUpdate", testUpdateClaimNotice},
		{"FailedUpdateClaimsNothing", testUpdateClaimFailedUpdate},
		{"NothingLeftIsNotFound", testUpdateClaimNothingLeft},
		{"ClaimSeesTheUpdate", testUpdateClaimSeesUpdate},
		{"ConcurrentWorkersTakeEachOnce", testUpdateClaimConcurrent},
	}
}

func ackHeld(r model.Record, leaseID string, nowMS int64) *store.Update {
	return &store.Update{RecordID: r.RecordID, From: model.Reading, ExpectLeaseID: leaseID, To: model.Readed,
		NowMS: nowMS, VisibleAtMS: nowMS, EventType: model.EventRecordState}
}

func mustUpdateClaim(t *testing.T, s store.Store, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed) {
	t.Helper()
	rec, c, err := s.UpdateThenClaim(t.Context(), u, p)
	if err != nil {
		t.Fatalf("UpdateThenClaim(%s %s→%s, claim %s %s): %v", u.RecordID, u.From, u.To, p.Owner, p.Box, err)
	}
	return rec, c
}

// The ack lands as Update's would, and the claim takes the next record
// as Claim's would, each with its own event.
func testUpdateClaimAckNext(t *testing.T, s store.Store) {
	recs := seedBox(t, s, "acknext", alice, model.Inbox, 3, base, nil)
	first := mustClaim(t, s, claimParams(alice, model.Inbox, base+10, "L1"))
	before := len(allEvents(t, s, ""))

	p := claimParams(alice, model.Inbox, base+20, "L2")
	rec, c := mustUpdateClaim(t, s, ackHeld(first, "L1", base+20), p)
	if c.Err != nil {
		t.Fatalf("the claim after the ack: %v", c.Err)
	}
	acked := first
	acked.State, acked.Lease, acked.UpdatedAtMS = model.Readed, nil, base+20
	requireRecord(t, rec, acked, "UpdateThenClaim's update")
	requireRecord(t, mustGet(t, s, first.RecordID), acked, "GetRecord of the acked record")
	next := recs[1]
	next.State, next.UpdatedAtMS = model.Reading, base+20
	next.Lease = &model.Lease{ID: p.LeaseID, Holder: p.Holder, ExpiresAtMS: p.LeaseUntilMS}
	requireRecord(t, c.Record, next, "UpdateThenClaim's claim")
	requireRecord(t, mustGet(t, s, next.RecordID), next, "GetRecord of the claimed record")

	evs := allEvents(t, s, "")
	if len(evs) != before+2 {
		t.Fatalf("UpdateThenClaim appended %d events, want 2 (the update's and the claim's)", len(evs)-before)
	}
	if n := len(eventsOf(evs, model.EventRecordState, first.RecordID)); n != 1 {
		t.Fatalf("%d %s events for the acked record, want 1", n, model.EventRecordState)
	}
	if n := len(eventsOf(evs, model.EventRecordClaimed, next.RecordID)); n != 1 {
		t.Fatalf("%d %s events for the claimed record, want 1", n, model.EventRecordClaimed)
	}
}

// A notice on the update of an UpdateThenClaim is written with it, once.
func testUpdateClaimNotice(t *testing.T, s store.Store) {
	seedBox(t, s, "notice-next", tunnel, model.TunnelOutbox, 2, base, nil)
	first := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+10, "L1"))
	u := &store.Update{RecordID: first.RecordID, From: model.Sending, ExpectLeaseID: "L1", To: model.Sent,
		NowMS: base + 20, EventType: model.EventRecordDelivered,
		Notice: &store.Notice{Owner: alice, Type: model.EventDeliverySent, Detail: "sent"}}
	_, c := mustUpdateClaim(t, s, u, claimParams(tunnel, model.TunnelOutbox, base+20, "L2"))
	if c.Err != nil {
		t.Fatalf("the claim after the ack: %v", c.Err)
	}
	got := eventsOf(allEvents(t, s, alice), model.EventDeliverySent, first.RecordID)
	if len(got) != 1 || got[0].Detail != "sent" || got[0].ToState != model.Sent || got[0].AtMS != base+20 {
		t.Fatalf("%s's notices of %s = %s; want one, SENT at %d, detail \"sent\"", alice, first.RecordID, dump(got), base+20)
	}
}

// An update that fails claims nothing: the next record stays claimable,
// unchanged, and no event is appended.
func testUpdateClaimFailedUpdate(t *testing.T, s store.Store) {
	recs := seedBox(t, s, "failedack", alice, model.Inbox, 2, base, nil)
	first := mustClaim(t, s, claimParams(alice, model.Inbox, base+10, "L1"))
	before := len(allEvents(t, s, ""))

	for _, tc := range []struct {
		what string
		u    *store.Update
		want error
	}{
		{"another lease", ackHeld(first, "L-other", base+20), model.ErrConflict},
		{"a wrong From", transition(first.RecordID, model.Unread, model.Readed, base+20), model.ErrConflict},
		{"a missing record", transition(model.RecordID(alice, model.Inbox, msgID("nope"), ""), model.Reading, model.Readed, base+20), model.ErrNotFound},
	} {
		_, c, err := s.UpdateThenClaim(t.Context(), tc.u, claimParams(alice, model.Inbox, base+20, "L2"))
		requireErrIs(t, err, tc.want, "UpdateThenClaim with "+tc.what)
		if c.Record.RecordID != "" || c.Err != nil {
			t.Fatalf("UpdateThenClaim with %s reported a claim: %s, %v", tc.what, dump(c.Record), c.Err)
		}
		requireRecord(t, mustGet(t, s, first.RecordID), first, "the held record after "+tc.what)
		requireRecord(t, mustGet(t, s, recs[1].RecordID), recs[1], "the next record after "+tc.what)
	}
	if n := len(allEvents(t, s, "")); n != before {
		t.Fatalf("failed UpdateThenClaims appended %d events", n-before)
	}
	requireClaimable(t, s, claimParams(alice, model.Inbox, base+30, "L3"), true)
}

// With nothing left to claim, the update stands and the claim says
// not found.
func testUpdateClaimNothingLeft(t *testing.T, s store.Store) {
	seedBox(t, s, "lastone", alice, model.Inbox, 1, base, nil)
	first := mustClaim(t, s, claimParams(alice, model.Inbox, base+10, "L1"))
	rec, c := mustUpdateClaim(t, s, ackHeld(first, "L1", base+20), claimParams(alice, model.Inbox, base+20, "L2"))
	if !errors.Is(c.Err, model.ErrNotFound) || c.Record.RecordID != "" {
		t.Fatalf("claim from an emptied box = %s, %v; want model.ErrNotFound", dump(c.Record), c.Err)
	}
	if rec.State != model.Readed || mustGet(t, s, first.RecordID).State != model.Readed {
		t.Fatalf("the ack did not stand: %s", dump(mustGet(t, s, first.RecordID)))
	}
}

// The claim runs after the update: a record the update gives back (a
// release) is the lowest seq, so the claim takes it again.
func testUpdateClaimSeesUpdate(t *testing.T, s store.Store) {
	seedBox(t, s, "release", alice, model.Inbox, 2, base, nil)
	first := mustClaim(t, s, claimParams(alice, model.Inbox, base+10, "L1"))
	release := &store.Update{RecordID: first.RecordID, From: model.Reading, ExpectLeaseID: "L1", To: model.Unread,
		NowMS: base + 20, VisibleAtMS: base + 20, EventType: model.EventRecordState}
	_, c := mustUpdateClaim(t, s, release, claimParams(alice, model.Inbox, base+20, "L2"))
	if c.Err != nil || c.Record.RecordID != first.RecordID || c.Record.Lease == nil || c.Record.Lease.ID != "L2" {
		t.Fatalf("claim after a release took %s, %v; want the released record %s under L2", dump(c.Record), c.Err, first.RecordID)
	}
}

// Workers that each claim once and then only ack-and-claim-next work a
// box through: every record is claimed once and acked once.
func testUpdateClaimConcurrent(t *testing.T, s store.Store) {
	n := 400
	if testing.Short() || raceEnabled {
		n = 120
	}
	seedBox(t, s, "workers", alice, model.Inbox, n, base, nil)
	const workers = 6
	taken := make([][]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			lease := func(i int) string { return fmt.Sprintf("w%d-%d", w, i) }
			held, err := s.Claim(t.Context(), claimParams(alice, model.Inbox, base+1, lease(0)))
			for i := 1; err == nil; i++ {
				taken[w] = append(taken[w], held.RecordID)
				var c store.Claimed
				if _, c, err = s.UpdateThenClaim(t.Context(), ackHeld(held, lease(i-1), base+2), claimParams(alice, model.Inbox, base+2, lease(i))); err != nil {
					break
				}
				held, err = c.Record, c.Err
			}
			if !errors.Is(err, model.ErrNotFound) {
				errs[w] = err
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for w := range workers {
		if errs[w] != nil {
			t.Fatalf("worker %d: %v", w, errs[w])
		}
		for _, id := range taken[w] {
			seen[id]++
		}
	}
	if len(seen) != n {
		t.Fatalf("workers took %d distinct records of %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("record %s taken %d times", id, k)
		}
		if st := mustGet(t, s, id).State; st != model.Readed {
			t.Fatalf("record %s is %s after its ack, want READED", id, st)
		}
	}
}
