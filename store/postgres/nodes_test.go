package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// These tests stand in for several msgcenter nodes: each Store has its own
// connection pool, so they share nothing but the database, exactly like
// separate processes. (The multi-process tests of issue 3 build on them.)

const testBase int64 = 1_750_000_000_000

func openNodes(t *testing.T, n int) []store.Store {
	t.Helper()
	schema := newSchema(t)
	out := make([]store.Store, n)
	for i := range out {
		out[i] = openStore(t, schema)
	}
	return out
}

func plan(name, owner string, box model.BoxKind, nowMS int64) *store.Plan {
	m := "cymsg:" + name
	return &store.Plan{MsgID: m, MsgBody: []byte(`{"n":"` + name + `"}`), NowMS: nowMS,
		Records: []model.Record{{RecordID: model.RecordID(owner, box, m, ""), Owner: owner, BoxKind: box,
			MsgID: m, State: model.InitialState(box), CreatedAtMS: nowMS, SortKey: nowMS}}}
}

// A reader syncing a box from its last seq while writers on three nodes
// append to it must end with every record exactly once: a seq may never
// become visible below one the reader has already passed.
func TestSeqVisibilityAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 3)
	const writers, perWriter = 8, 40
	const owner = "did:test:busy"
	var (
		wg   sync.WaitGroup
		done atomic.Bool
	)
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Go(func() {
			s := nodes[w%len(nodes)]
			for i := range perWriter {
				now := testBase + int64(i)
				p := plan(fmt.Sprintf("seqvis-%d-%d", w, i), owner, model.Inbox, now)
				// A second record in a box of its own, locked in a different
				// order by different writers, to shake out lock ordering.
				other := plan(fmt.Sprintf("seqvis-%d-%d", w, i), fmt.Sprintf("did:test:w%d", w%3), model.Outbox, now)
				p.Records = append(p.Records, other.Records...)
				if w%2 == 1 {
					p.Records[0], p.Records[1] = p.Records[1], p.Records[0]
				}
				if _, err := s.Apply(t.Context(), p); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	seen := map[string]bool{}
	var cursor int64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			last := done.Load() // read before syncing: a final pass after the writers end
			page, err := nodes[0].Sync(t.Context(), store.SyncParams{Owner: owner, Box: model.Inbox, AfterSeq: cursor, Limit: 37})
			if err != nil {
				errs <- err
				return
			}
			for _, r := range page {
				if r.Seq <= cursor || seen[r.RecordID] {
					errs <- fmt.Errorf("record %s seq %d seen again or out of order (cursor %d)", r.RecordID, r.Seq, cursor)
					return
				}
				seen[r.RecordID] = true
				cursor = r.Seq
			}
			if last && len(page) == 0 {
				return
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	<-readerDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != writers*perWriter || cursor != writers*perWriter {
		t.Fatalf("reader saw %d records up to seq %d; want %d, all of them, with seqs 1..%d",
			len(seen), cursor, writers*perWriter, writers*perWriter)
	}
}

// Twelve consumers on three nodes claim from one box: every record is
// claimed exactly once and none is left behind.
func TestClaimAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 3)
	const records, consumers = 300, 12
	const owner = "did:test:queue"
	for i := range records {
		if _, err := nodes[i%3].Apply(t.Context(), plan(fmt.Sprintf("claim-%d", i), owner, model.TunnelOutbox, testBase+int64(i))); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[string]int{}
		errs   = make(chan error, consumers)
	)
	for c := range consumers {
		wg.Go(func() {
			s := nodes[c%3]
			for i := 0; ; i++ {
				lease := fmt.Sprintf("c%d-%d", c, i)
				r, err := s.Claim(t.Context(), store.ClaimParams{Owner: owner, Box: model.TunnelOutbox,
					From: model.Wait, To: model.Sending, NowMS: testBase + 10_000, LeaseID: lease,
					Holder: lease, LeaseUntilMS: testBase + 40_000})
				if errors.Is(err, model.ErrNotFound) {
					return
				}
				if err == nil {
					_, err = s.Update(t.Context(), &store.Update{RecordID: r.RecordID, From: model.Sending,
						ExpectLeaseID: lease, To: model.Sent, NowMS: testBase + 10_001})
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				counts[r.RecordID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(counts) != records {
		t.Fatalf("%d distinct records claimed, want %d", len(counts), records)
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("record %s claimed %d times", id, n)
		}
	}
	left, err := nodes[0].Sync(t.Context(), store.SyncParams{Owner: owner, Box: model.TunnelOutbox,
		States: []model.State{model.Wait, model.Sending}})
	if err != nil || len(left) != 0 {
		t.Fatalf("records left unsent: %d, %v", len(left), err)
	}
}
