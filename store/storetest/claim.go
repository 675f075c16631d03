package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func claimTests() []testCase {
	return []testCase{
		{"EmptyIsNotFound", testClaimEmpty},
		{"LowestSeqFirst", testClaimLowestSeq},
		{"RespectsVisibleAt", testClaimVisibleAt},
		{"OnlyFromStateOwnerAndBox", testClaimScope},
		{"AppendsClaimedEvent", testClaimEvent},
		{"ConcurrentExactlyOnce", testClaimConcurrent},
	}
}

func testClaimEmpty(t *testing.T, s store.Store) {
	requireNoClaim(t, s, claimParams(alice, model.Inbox, base, "L"))
	requireNoClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base, "L"))
}

// Claim takes the lowest seq first (not the lowest sort key or id), moves it
// to To and sets the lease.
func testClaimLowestSeq(t *testing.T, s store.Store) {
	// Sort keys descend while seqs ascend, so ordering by sort_key is caught.
	recs := seedBox(t, s, "lowest", alice, model.Inbox, 5, base, func(i int) []recOpt {
		return []recOpt{withSortKey(base + 1_000 - int64(i))}
	})
	now := base + 100
	for i, want := range recs {
		p := claimParams(alice, model.Inbox, now+int64(i), fmt.Sprintf("lease-%d", i))
		got := mustClaim(t, s, p)
		if got.Seq != int64(i+1) {
			t.Fatalf("claim %d took seq %d, want %d", i, got.Seq, i+1)
		}
		w := want
		w.State = model.Reading
		w.Lease = &model.Lease{ID: p.LeaseID, Holder: p.Holder, ExpiresAtMS: p.LeaseUntilMS}
		w.UpdatedAtMS = p.NowMS
		requireRecord(t, got, w, fmt.Sprintf("claim %d result", i))
		requireRecord(t, mustGet(t, s, got.RecordID), w, fmt.Sprintf("claim %d, GetRecord", i))
	}
	requireNoClaim(t, s, claimParams(alice, model.Inbox, now+10, "lease-x"))
}

// A record is claimable only once NowMS reaches its visible time: the
// Delivery.NextRetryAtMS it was created with, or the VisibleAtMS of the
// last Update.
func testClaimVisibleAt(t *testing.T, s store.Store) {
	m1, m2 := msgID("visible-1"), msgID("visible-2")
	r1 := newRec(tunnel, model.TunnelOutbox, m1, base, withRetryAt(base+5_000))
	r2 := newRec(tunnel, model.TunnelOutbox, m2, base)
	mustApply(t, s, newPlan(m1, base, r1))
	mustApply(t, s, newPlan(m2, base, r2))

	got := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base, "a"))
	if got.RecordID != r2.RecordID {
		t.Fatalf("claimed %s (seq %d); want the visible record %s (seq 2), not the delayed seq 1", got.RecordID, got.Seq, r2.RecordID)
	}
	requireNoClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base, "b"))
	requireNoClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+4_999, "c"))
	got = mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+5_000, "d"))
	if got.RecordID != r1.RecordID {
		t.Fatalf("claimed %s at its visible time, want %s", got.RecordID, r1.RecordID)
	}

	// Back off r2 with a retry time: it becomes claimable exactly then.
	u := &store.Update{
		RecordID: r2.RecordID, From: model.Sending, ExpectLeaseID: "a", To: model.Wait,
		Delivery:    model.Delivery{Attempts: 1, NextRetryAtMS: base + 8_000, LastError: "timeout"},
		VisibleAtMS: base + 8_000, NowMS: base + 6_000, EventType: model.EventRecordRetry,
	}
	mustUpdate(t, s, u)
	requireNoClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+7_999, "e"))
	got = mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+8_000, "f"))
	if got.RecordID != r2.RecordID || got.Lease == nil || got.Lease.ID != "f" {
		t.Fatalf("claim after backoff = %s, want %s with lease f", dump(got), r2.RecordID)
	}
}

// Only records of (Owner, Box) in state From are claimed.
func testClaimScope(t *testing.T, s store.Store) {
	ctx := t.Context()
	recs := seedBox(t, s, "scope", alice, model.Inbox, 3, base, func(i int) []recOpt {
		return []recOpt{withState([]model.State{model.Readed, model.Archived, model.Unread}[i])}
	})
	b := seedBox(t, s, "scope", bob, model.Inbox, 1, base, nil)[0]
	g := seedBox(t, s, "scope", alice, model.GroupInbox, 1, base, nil)[0]
	o := seedBox(t, s, "scope", alice, model.RequestBox, 1, base, nil)[0]

	got := mustClaim(t, s, claimParams(alice, model.Inbox, base+10, "L1"))
	if got.RecordID != recs[2].RecordID {
		t.Fatalf("claimed %s, want the only UNREAD record %s (seq 3)", dump(got), recs[2].RecordID)
	}
	requireNoClaim(t, s, claimParams(alice, model.Inbox, base+10, "L2"))
	for _, r := range []model.Record{recs[0], recs[1], b, g, o} {
		requireRecord(t, mustGet(t, s, r.RecordID), r, "record that must not have been claimed")
	}

	// From is honoured as given: claim the READED record.
	p := store.ClaimParams{Owner: alice, Box: model.Inbox, From: model.Readed, To: model.Reading,
		NowMS: base + 20, LeaseID: "L3", Holder: "h", LeaseUntilMS: base + 1_000}
	got, err := s.Claim(ctx, p)
	requireNoError(t, err, "Claim From READED")
	if got.RecordID != recs[0].RecordID || got.State != model.Reading {
		t.Fatalf("Claim From READED = %s, want %s in READING", dump(got), recs[0].RecordID)
	}
}

func testClaimEvent(t *testing.T, s store.Store) {
	seedBox(t, s, "claim-event", alice, model.Inbox, 2, base, nil)
	before := len(allEvents(t, s, ""))
	got := mustClaim(t, s, claimParams(alice, model.Inbox, base+50, "L"))
	evs := allEvents(t, s, "")
	if len(evs) != before+1 {
		t.Fatalf("Claim appended %d events, want 1", len(evs)-before)
	}
	es := eventsOf(evs, model.EventRecordClaimed, got.RecordID)
	if len(es) != 1 {
		t.Fatalf("record.claimed events for %s: %s, want one", got.RecordID, dump(es))
	}
	if e := es[0]; e.Owner != alice || e.BoxKind != model.Inbox || e.MsgID != got.MsgID || e.AtMS != base+50 {
		t.Fatalf("record.claimed event = %s; want owner %s, box INBOX, msg %s, at %d", dump(e), alice, short(got.MsgID), base+50)
	}
	requireNoClaim(t, s, claimParams(bob, model.Inbox, base+60, "L"))
	if n := len(allEvents(t, s, "")); n != len(evs) {
		t.Fatalf("a claim that found nothing appended %d events", n-len(evs))
	}
}

// Many goroutines claiming one box: every record is claimed exactly once,
// and each claimer sees increasing seqs.
func testClaimConcurrent(t *testing.T, s store.Store) {
	// 2,000 records normally; 500 under -short or -race, where every
	// statement costs ten times as much and the race detector, not the
	// volume, is what finds the bugs.
	n := 2_000
	if testing.Short() || raceEnabled {
		n = 500
	}
	const perPlan = 100
	for p := 0; p < n; p += perPlan {
		m := msgID(fmt.Sprintf("concurrent-claim-%d", p))
		recs := make([]model.Record, 0, perPlan)
		for i := p; i < min(n, p+perPlan); i++ {
			recs = append(recs, newRec(tunnel, model.TunnelOutbox, m, base, withVariant(fmt.Sprint(i))))
		}
		if res := mustApply(t, s, newPlan(m, base, recs...)); len(res.Created) != len(recs) {
			t.Fatalf("seeding: created %d of %d", len(res.Created), len(recs))
		}
	}

	const workers = 16
	claimed := make([][]model.Record, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				r, err := s.Claim(t.Context(), claimParams(tunnel, model.TunnelOutbox, base+1, fmt.Sprintf("w%d-%d", w, i)))
				if errors.Is(err, model.ErrNotFound) {
					return
				}
				if err != nil {
					errs[w] = fmt.Errorf("claim %d: %w", i, err)
					return
				}
				claimed[w] = append(claimed[w], r)
			}
		})
	}
	wg.Wait()

	seen := make(map[string]string, n)
	seenSeq := make(map[int64]bool, n)
	for w := range workers {
		if errs[w] != nil {
			t.Fatalf("worker %d: %v", w, errs[w])
		}
		var last int64
		for i, r := range claimed[w] {
			lease := fmt.Sprintf("w%d-%d", w, i)
			if r.State != model.Sending || r.Lease == nil || r.Lease.ID != lease {
				t.Fatalf("worker %d got %s; want SENDING with lease %s", w, dump(r), lease)
			}
			if prev, dup := seen[r.RecordID]; dup {
				t.Fatalf("record %s claimed twice (lease %s and %s)", r.RecordID, prev, lease)
			}
			seen[r.RecordID] = lease
			if seenSeq[r.Seq] {
				t.Fatalf("seq %d claimed twice", r.Seq)
			}
			seenSeq[r.Seq] = true
			if r.Seq <= last {
				t.Fatalf("worker %d claimed seq %d after seq %d: not lowest seq first", w, r.Seq, last)
			}
			last = r.Seq
		}
	}
	if len(seen) != n {
		t.Fatalf("%d records claimed, want %d", len(seen), n)
	}
	for seq := int64(1); seq <= int64(n); seq++ {
		if !seenSeq[seq] {
			t.Fatalf("seq %d never claimed", seq)
		}
	}
	requireNoClaim(t, s, claimParams(tunnel, model.TunnelOutbox, base+2, "after"))
	if c := eventsOf(allEvents(t, s, tunnel), model.EventRecordClaimed, ""); len(c) != n {
		t.Fatalf("%d record.claimed events, want %d", len(c), n)
	}
}
