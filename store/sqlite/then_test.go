package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestThenRunsOnlyAfterItsWrite queues two UpdateThenClaim calls behind a
// blocked write so that they share a group (commit.go: then): one ack
// holds its lease, the other names a lease it does not hold. The first
// claims the box's next record; the second's claim must not run, in the
// group and (breakGroup: a write in the group kills the transaction) when
// every write runs again alone.
func TestThenRunsOnlyAfterItsWrite(t *testing.T) {
	for _, breakGroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("breakGroup=%v", breakGroup), func(t *testing.T) {
			ctx := context.Background()
			s, _ := openTest(t)
			const w = "did:test:worker"
			var recs []model.Record
			for i := range 4 {
				res, err := s.Apply(ctx, sendPlan(i, "did:test:sender", []string{w}, int64(i+1)))
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range res.Created {
					if r.Owner == w {
						recs = append(recs, r)
					}
				}
			}
			claim := func(lease string) store.ClaimParams {
				return store.ClaimParams{Owner: w, Box: model.Inbox, From: model.Unread, To: model.Reading,
					NowMS: 10, LeaseID: lease, Holder: w, LeaseUntilMS: 10_000}
			}
			for _, lease := range []string{"L1", "L2"} {
				if _, err := s.Claim(ctx, claim(lease)); err != nil {
					t.Fatal(err)
				}
			}
			ack := func(r model.Record, lease string) *store.Update {
				return &store.Update{RecordID: r.RecordID, From: model.Reading, ExpectLeaseID: lease, To: model.Readed, NowMS: 20}
			}
			evBefore, err := s.ListEvents(ctx, store.EventFilter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}

			release := holdWriter(ctx, s)
			var good, bad store.Claimed
			var goodErr, badErr error
			var wg sync.WaitGroup
			wg.Go(func() { _, good, goodErr = s.UpdateThenClaim(ctx, ack(recs[0], "L1"), claim("L3")) })
			wg.Go(func() { _, bad, badErr = s.UpdateThenClaim(ctx, ack(recs[1], "not-L2"), claim("L4")) })
			if breakGroup {
				wg.Go(func() {
					s.write(ctx, breakTx) //nolint:errcheck // it fails: that is its point
				})
			}
			var groups []int
			s.onGroup = func(size int) { groups = append(groups, size) }
			time.Sleep(200 * time.Millisecond) // every writer queued
			release()
			wg.Wait()
			want := 4 // two pairs
			if breakGroup {
				want++ // and the write that breaks their group
			}
			if len(groups) == 0 || groups[0] < want {
				t.Fatalf("no group of all %d writes formed: %v", want, groups)
			}

			if goodErr != nil || good.Err != nil || good.Record.RecordID != recs[2].RecordID || good.Record.Lease.ID != "L3" {
				t.Fatalf("the ack holding its lease: claimed %+v (%v), %v; want %s under L3", good.Record, good.Err, goodErr, recs[2].RecordID)
			}
			if !errors.Is(badErr, model.ErrConflict) || bad.Record.RecordID != "" || bad.Err != nil {
				t.Fatalf("the ack without its lease: claimed %+v (%v), %v; want a conflict and no claim", bad.Record, bad.Err, badErr)
			}
			for i, want := range []model.State{model.Readed, model.Reading, model.Reading, model.Unread} {
				got, err := s.GetRecord(ctx, recs[i].RecordID)
				if err != nil || got.State != want {
					t.Fatalf("record %d is %s (%v), want %s", i+1, got.State, err, want)
				}
			}
			evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(evs) - len(evBefore); n != 2 {
				t.Fatalf("%d events appended, want 2 (the ack and the claim that followed it)", n)
			}
		})
	}
}
