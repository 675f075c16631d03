package storetest

import (
	"fmt"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func leaseTests() []testCase {
	return []testCase{
		{"ExpiredLeases", testExpiredLeases},
		{"NextLeaseExpiry", testNextLeaseExpiry},
		{"NextVisible", testNextVisible},
	}
}

func claimUntil(t *testing.T, s store.Store, owner string, box model.BoxKind, nowMS, untilMS int64, lease string) model.Record {
	t.Helper()
	p := claimParams(owner, box, nowMS, lease)
	p.LeaseUntilMS = untilMS
	return mustClaim(t, s, p)
}

func requireExpired(t *testing.T, s store.Store, nowMS int64, limit int, want []string) {
	t.Helper()
	got, err := s.ExpiredLeases(t.Context(), nowMS, limit)
	requireNoError(t, err, "ExpiredLeases")
	requireSameSet(t, recordIDs(got), want, fmt.Sprintf("ExpiredLeases(now=base%+d, limit=%d)", nowMS-base, limit))
	for _, r := range got {
		if r.Lease == nil || r.Lease.ExpiresAtMS > nowMS {
			t.Fatalf("ExpiredLeases(base%+d) returned %s: lease not expired", nowMS-base, dump(r))
		}
		requireRecord(t, r, mustGet(t, s, r.RecordID), "ExpiredLeases record vs GetRecord")
	}
}

// ExpiredLeases lists held records whose lease expired at or before now.
func testExpiredLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	requireExpired(t, s, base+1_000_000, 10, nil)

	seedBox(t, s, "expired", tunnel, model.TunnelOutbox, 5, base, nil)
	seedBox(t, s, "expired", alice, model.Inbox, 2, base, nil)
	c1 := claimUntil(t, s, tunnel, model.TunnelOutbox, base+10, base+2_000, "t1")
	c2 := claimUntil(t, s, tunnel, model.TunnelOutbox, base+10, base+4_000, "t2")
	c3 := claimUntil(t, s, tunnel, model.TunnelOutbox, base+10, base+3_000, "t3")
	c4 := claimUntil(t, s, alice, model.Inbox, base+10, base+2_500, "a1")

	requireExpired(t, s, base+1_999, 10, nil)
	requireExpired(t, s, base+2_000, 10, []string{c1.RecordID})
	requireExpired(t, s, base+3_000, 10, []string{c1.RecordID, c4.RecordID, c3.RecordID})
	requireExpired(t, s, base+9_999, 10, []string{c1.RecordID, c2.RecordID, c3.RecordID, c4.RecordID})

	limited, err := s.ExpiredLeases(ctx, base+9_999, 2)
	requireNoError(t, err, "ExpiredLeases(limit 2)")
	if len(limited) != 2 {
		t.Fatalf("ExpiredLeases(limit 2) returned %d records", len(limited))
	}

	// A record whose lease was cleared is no longer held.
	mustUpdate(t, s, &store.Update{RecordID: c1.RecordID, From: model.Sending, ExpectLeaseID: "t1", To: model.Wait,
		Delivery: model.Delivery{Attempts: 1}, VisibleAtMS: base + 2_000, NowMS: base + 2_000, EventType: model.EventLeaseExpired})
	requireExpired(t, s, base+3_000, 10, []string{c4.RecordID, c3.RecordID})

	// An extended lease expires later.
	mustUpdate(t, s, &store.Update{RecordID: c3.RecordID, From: model.Sending, ExpectLeaseID: "t3", To: model.Sending,
		Lease: &model.Lease{ID: "t3", Holder: "worker-t3", ExpiresAtMS: base + 6_000}, NowMS: base + 2_900, EventType: model.EventLeaseExtended})
	requireExpired(t, s, base+3_000, 10, []string{c4.RecordID})
	requireExpired(t, s, base+6_000, 10, []string{c2.RecordID, c3.RecordID, c4.RecordID})
}

func requireNextLease(t *testing.T, s store.Store, want int64, wantOK bool, what string) {
	t.Helper()
	at, ok, err := s.NextLeaseExpiry(t.Context())
	requireNoError(t, err, "NextLeaseExpiry")
	if ok != wantOK || (ok && at != want) {
		t.Fatalf("%s: NextLeaseExpiry = base%+d, %v; want base%+d, %v", what, at-base, ok, want-base, wantOK)
	}
}

func testNextLeaseExpiry(t *testing.T, s store.Store) {
	requireNextLease(t, s, 0, false, "empty store")
	seedBox(t, s, "nextlease", tunnel, model.TunnelOutbox, 3, base, nil)
	seedBox(t, s, "nextlease", alice, model.Inbox, 1, base, nil)
	requireNextLease(t, s, 0, false, "records but no leases")

	c1 := claimUntil(t, s, tunnel, model.TunnelOutbox, base+1, base+5_000, "l1")
	requireNextLease(t, s, base+5_000, true, "one lease")
	c2 := claimUntil(t, s, alice, model.Inbox, base+2, base+3_000, "l2")
	requireNextLease(t, s, base+3_000, true, "two leases")
	claimUntil(t, s, tunnel, model.TunnelOutbox, base+3, base+7_000, "l3")
	requireNextLease(t, s, base+3_000, true, "three leases")

	mustUpdate(t, s, &store.Update{RecordID: c2.RecordID, From: model.Reading, ExpectLeaseID: "l2", To: model.Readed, NowMS: base + 10, EventType: model.EventRecordState})
	requireNextLease(t, s, base+5_000, true, "after acking the earliest")
	mustUpdate(t, s, &store.Update{RecordID: c1.RecordID, From: model.Sending, ExpectLeaseID: "l1", To: model.Sent,
		Delivery: model.Delivery{Attempts: 1, DeliveredAtMS: base + 11}, NowMS: base + 11, EventType: model.EventRecordDelivered})
	requireNextLease(t, s, base+7_000, true, "after delivering the next")
}

func requireNextVisible(t *testing.T, s store.Store, owner string, box model.BoxKind, st model.State, after, want int64, wantOK bool) {
	t.Helper()
	at, ok, err := s.NextVisible(t.Context(), owner, box, st, after)
	requireNoError(t, err, "NextVisible")
	if ok != wantOK || (ok && at != want) {
		t.Fatalf("NextVisible(%s, %s, %s, after base%+d) = base%+d, %v; want base%+d, %v", owner, box, st, after-base, at-base, ok, want-base, wantOK)
	}
}

// NextVisible is the earliest visible time after afterMS among (owner, box)
// records in the state.
func testNextVisible(t *testing.T, s store.Store) {
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, base, 0, false)
	retry := map[int]int64{0: base + 5_000, 1: base + 3_000}
	recs := seedBox(t, s, "nextvisible", tunnel, model.TunnelOutbox, 3, base, func(i int) []recOpt {
		if at, ok := retry[i]; ok {
			return []recOpt{withRetryAt(at)}
		}
		return nil
	})
	// Noise: another owner's and another box's delayed records.
	seedBox(t, s, "nextvisible", "did:test:tunnel-other", model.TunnelOutbox, 1, base, func(int) []recOpt { return []recOpt{withRetryAt(base + 1_000)} })
	seedBox(t, s, "nextvisible", tunnel, model.Inbox, 1, base, func(int) []recOpt { return []recOpt{withRetryAt(base + 1_500)} })

	const after = base + 10 // after every record's creation time
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, after, base+3_000, true)
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, base+2_999, base+3_000, true)
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, base+3_000, base+5_000, true)
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, base+5_000, 0, false)
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Sending, after, 0, false)
	requireNextVisible(t, s, tunnel, model.Inbox, model.Unread, after, base+1_500, true)

	// Claim the immediately visible record, back it off to base+4000.
	c := mustClaim(t, s, claimParams(tunnel, model.TunnelOutbox, after, "L"))
	if c.RecordID != recs[2].RecordID {
		t.Fatalf("claimed %s, want the only visible record %s", c.RecordID, recs[2].RecordID)
	}
	mustUpdate(t, s, &store.Update{RecordID: c.RecordID, From: model.Sending, ExpectLeaseID: "L", To: model.Wait,
		Delivery: model.Delivery{Attempts: 1, NextRetryAtMS: base + 4_000}, VisibleAtMS: base + 4_000, NowMS: after + 1, EventType: model.EventRecordRetry})
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, base+3_000, base+4_000, true)
	requireNextVisible(t, s, tunnel, model.TunnelOutbox, model.Wait, base+4_000, base+5_000, true)
}
