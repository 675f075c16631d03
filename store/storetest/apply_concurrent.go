package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Several goroutines applying the same plan create each record exactly once.
func testApplyConcurrentSamePlan(t *testing.T, s store.Store) {
	m := msgID("concurrent-same")
	p := newPlan(m, base,
		newRec(alice, model.Inbox, m, base, withVariant("1")),
		newRec(alice, model.Inbox, m, base, withVariant("2")),
		newRec(bob, model.Outbox, m, base),
		newRec(tunnel, model.TunnelOutbox, m, base, withVariant("tg")))
	const workers = 8
	results := make([]*store.ApplyResult, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			cp := *p
			results[i], errs[i] = s.Apply(t.Context(), &cp)
		})
	}
	wg.Wait()
	created := map[string]int{}
	for i := range workers {
		requireNoError(t, errs[i], fmt.Sprintf("concurrent Apply #%d", i))
		r := results[i]
		if len(r.Created)+len(r.Existing) != len(p.Records) {
			t.Fatalf("Apply #%d: %d created + %d existing, want %d in all", i, len(r.Created), len(r.Existing), len(p.Records))
		}
		for _, c := range r.Created {
			created[c.RecordID]++
		}
	}
	for _, r := range p.Records {
		if created[r.RecordID] != 1 {
			t.Fatalf("record %s created %d times, want exactly once", r.RecordID, created[r.RecordID])
		}
	}
	a1, a2 := mustGet(t, s, p.Records[0].RecordID), mustGet(t, s, p.Records[1].RecordID)
	if got := []int64{a1.Seq, a2.Seq}; !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("alice inbox seqs = %v, want [1 2]", got)
	}
	if n := len(eventsOf(allEvents(t, s, ""), model.EventRecordCreated, "")); n != len(p.Records) {
		t.Fatalf("%d record.created events, want %d", n, len(p.Records))
	}
}

// Concurrent plans into one box get distinct seqs with no gaps.
func testApplyConcurrentSeq(t *testing.T, s store.Store) {
	const workers, perWorker = 8, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				m := msgID(fmt.Sprintf("cseq-%d-%d", w, i))
				now := base + int64(w*100+i)
				_, err := s.Apply(t.Context(), newPlan(m, now, newRec(alice, model.Inbox, m, now), newRec(bob, model.Outbox, m, now)))
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Apply: %v", err)
	}
	for _, ob := range []struct {
		owner string
		box   model.BoxKind
	}{{alice, model.Inbox}, {bob, model.Outbox}} {
		recs := syncAll(t, s, store.SyncParams{Owner: ob.owner, Box: ob.box}, 100)
		if len(recs) != workers*perWorker {
			t.Fatalf("%s %s: %d records, want %d", ob.owner, ob.box, len(recs), workers*perWorker)
		}
		for i, r := range recs {
			if r.Seq != int64(i+1) {
				t.Fatalf("%s %s: seqs %v, want 1..%d without gaps or duplicates", ob.owner, ob.box, seqs(recs), len(recs))
			}
		}
	}
}

// Plans that fail among concurrent plans into the same boxes: drivers
// that share one transaction between concurrent writes must roll back only
// the failing plan. The others keep their records, and the box's seqs stay
// 1..n without gaps. Two kinds of failure: a key bound to another message
// (found after the plan's statements ran) and a scheduled entry that is
// not there (found in the middle of them).
func testApplyConcurrentConflicts(t *testing.T, s store.Store) {
	const workers, perWorker = 8, 12
	bound := msgID("cconf-bound")
	key := store.Idempotency{Scope: alice + "/post_send", Key: "cconf-key"}
	first := newPlan(bound, base, newRec(alice, model.Outbox, bound, base), newRec(bob, model.Inbox, bound, base))
	first.Idem = &key
	mustApply(t, s, first)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var okIDs, badIDs []string
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				m := msgID(fmt.Sprintf("cconf-%d-%d", w, i))
				now := base + 1 + int64(w*100+i)
				p := newPlan(m, now, newRec(alice, model.Outbox, m, now), newRec(bob, model.Inbox, m, now))
				fails := (w+i)%3 == 0
				if fails && w%2 == 0 {
					k := key
					p.Idem = &k
				} else if fails {
					p.ConsumeSchedule = 987_000 + int64(w*100+i)
				}
				_, err := s.Apply(t.Context(), p)
				switch {
				case fails && !errors.Is(err, model.ErrConflict):
					errs <- fmt.Errorf("plan %s that must fail: %v, want model.ErrConflict", short(m), err)
				case !fails && err != nil:
					errs <- fmt.Errorf("plan %s: %v", short(m), err)
				}
				mu.Lock()
				for _, r := range p.Records {
					if fails {
						badIDs = append(badIDs, r.RecordID)
					} else {
						okIDs = append(okIDs, r.RecordID)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, id := range badIDs {
		requireNoRecord(t, s, id)
	}
	for _, id := range okIDs {
		mustGet(t, s, id)
	}
	want := 1 + len(okIDs)/2
	for _, ob := range []struct {
		owner string
		box   model.BoxKind
	}{{alice, model.Outbox}, {bob, model.Inbox}} {
		recs := syncAll(t, s, store.SyncParams{Owner: ob.owner, Box: ob.box}, 100)
		if len(recs) != want {
			t.Fatalf("%s %s: %d records, want %d", ob.owner, ob.box, len(recs), want)
		}
		for i, r := range recs {
			if r.Seq != int64(i+1) {
				t.Fatalf("%s %s: seqs %v, want 1..%d without gaps", ob.owner, ob.box, seqs(recs), len(recs))
			}
		}
	}
}
