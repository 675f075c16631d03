package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// A plan the database itself rejects (a NUL in a text column aborts the
// transaction, unlike the conformance suite's conflicts) among concurrent
// plans into the same boxes: the group writer sends its plans in one
// batch, so the plans after the rejected one ran in an aborted
// transaction. They must be sent again, not lost or reported failed, and
// the boxes' seqs stay 1..n. Plans whose idempotency key is bound to
// another message are found only after the batch, when the plans after
// them have run: those are undone and sent again, and must report the
// seqs of their second run.
//
// Without idempotency keys every group goes first in a single round trip
// (BEGIN, plans, COMMIT in one batch); a rejected plan there undoes the
// whole group, which is then written with savepoints: the same outcome.
func TestGroupSurvivesARejectedPlan(t *testing.T) {
	t.Run("with bound keys", func(t *testing.T) { testRejectedPlan(t, true) })
	t.Run("plain plans", func(t *testing.T) { testRejectedPlan(t, false) })
}

func testRejectedPlan(t *testing.T, withKeys bool) {
	s := openStore(t, newSchema(t))
	const workers, perWorker = 8, 12
	const alice, bob = "did:test:alice", "did:test:bob"
	rec := func(owner string, box model.BoxKind, m, thread string, now int64) model.Record {
		return model.Record{RecordID: model.RecordID(owner, box, m, ""), Owner: owner, BoxKind: box,
			MsgID: m, State: model.InitialState(box), CreatedAtMS: now, UpdatedAtMS: now, SortKey: now,
			ThreadKey: thread}
	}
	key := store.Idempotency{Scope: alice + "/post_send", Key: "bound"}
	if _, err := s.Apply(t.Context(), &store.Plan{MsgID: "msg-bound", NowMS: 1, Idem: &key}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var okIDs, badIDs []string
	created := map[string]int64{} // record id → the seq Apply reported
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				m := fmt.Sprintf("msg-%d-%d", w, i)
				now := int64(1_700_000_000_000 + w*100 + i)
				thread := "dm:" + alice
				bad := (w+i)%4 == 1
				if bad {
					thread = "dm:\x00"
				}
				p := &store.Plan{MsgID: m, MsgBody: []byte(`{"m":"` + m + `"}`), NowMS: now,
					Records: []model.Record{rec(alice, model.Outbox, m, "dm:"+bob, now), rec(bob, model.Inbox, m, thread, now)}}
				reused := withKeys && (w+i)%4 == 3
				if reused {
					k := key
					p.Idem = &k
				}
				res, err := s.Apply(t.Context(), p)
				if err == nil {
					mu.Lock()
					for _, r := range res.Created {
						created[r.RecordID] = r.Seq
					}
					mu.Unlock()
				}
				switch {
				case reused && !errors.Is(err, model.ErrConflict):
					errs <- fmt.Errorf("plan %s with a key bound to another message: %v, want a conflict", m, err)
				case reused:
				case bad && err == nil:
					errs <- fmt.Errorf("plan %s with a NUL in a thread key was accepted", m)
				case bad && errors.Is(err, model.ErrConflict):
					errs <- fmt.Errorf("plan %s: %v; want the database's error, not a conflict", m, err)
				case !bad && err != nil:
					errs <- fmt.Errorf("plan %s: %v", m, err)
				}
				mu.Lock()
				for _, r := range p.Records {
					if bad || reused {
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
		if _, err := s.GetRecord(t.Context(), id); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("GetRecord(%s) of a rejected plan: %v; want not found", id, err)
		}
	}
	for _, id := range okIDs {
		rec, err := s.GetRecord(t.Context(), id)
		if err != nil {
			t.Fatalf("GetRecord(%s): %v", id, err)
		}
		// A plan sent again must report what it wrote the second time.
		if seq, ok := created[id]; !ok || seq != rec.Seq {
			t.Fatalf("record %s: Apply reported seq %d (reported: %v), stored %d", id, seq, ok, rec.Seq)
		}
	}
	for _, ob := range []struct {
		owner string
		box   model.BoxKind
	}{{alice, model.Outbox}, {bob, model.Inbox}} {
		recs, err := s.Sync(t.Context(), store.SyncParams{Owner: ob.owner, Box: ob.box, Limit: 1000})
		if err != nil {
			t.Fatalf("Sync %s %s: %v", ob.owner, ob.box, err)
		}
		if len(recs) != len(okIDs)/2 {
			t.Fatalf("%s %s: %d records, want %d", ob.owner, ob.box, len(recs), len(okIDs)/2)
		}
		for i, r := range recs {
			if r.Seq != int64(i+1) {
				t.Fatalf("%s %s: record %d has seq %d; want 1..%d without gaps", ob.owner, ob.box, i, r.Seq, len(recs))
			}
		}
	}
}
