package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func concurrencyTests() []testCase {
	return []testCase{
		{"MixedReadersAndWriters", testMixedConcurrency},
		{"EventCursorUnderWrites", testEventCursorUnderWrites},
	}
}

// Writers (an applier and two claim-and-ack workers) and readers run at the
// same time. Nothing may fail, every read must be internally ordered, and
// the end state must be exact.
func testMixedConcurrency(t *testing.T, s store.Store) {
	const (
		th       = "chat:busy"
		messages = 30
		claimers = 2
		readers  = 3
	)
	var (
		wg         sync.WaitGroup
		applied    atomic.Bool
		writersEnd atomic.Bool
		errMu      sync.Mutex
		errs       []error
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		errs = append(errs, fmt.Errorf(format, args...))
		errMu.Unlock()
	}

	var writers sync.WaitGroup
	writers.Go(func() {
		defer applied.Store(true)
		for i := range messages {
			m := msgID(fmt.Sprintf("busy-%d", i))
			now := base + int64(i)
			if _, err := s.Apply(t.Context(), newPlan(m, now,
				newRec(alice, model.Inbox, m, now, withThread(th)),
				newRec(bob, model.Outbox, m, now, withThread(th)))); err != nil {
				fail("Apply %d: %v", i, err)
				return
			}
		}
	})
	acked := make([][]string, claimers)
	for w := range claimers {
		writers.Go(func() {
			for i := 0; ; i++ {
				done := applied.Load() // read before claiming: NotFound after done means empty
				lease := fmt.Sprintf("c%d-%d", w, i)
				r, err := s.Claim(t.Context(), claimParams(alice, model.Inbox, base+1_000, lease))
				if errors.Is(err, model.ErrNotFound) {
					if done {
						return
					}
					continue
				}
				if err != nil {
					fail("Claim: %v", err)
					return
				}
				if _, err := s.Update(t.Context(), &store.Update{RecordID: r.RecordID, From: model.Reading, ExpectLeaseID: lease,
					To: model.Readed, NowMS: base + 1_001, EventType: model.EventRecordState}); err != nil {
					fail("Update after Claim: %v", err)
					return
				}
				acked[w] = append(acked[w], r.RecordID)
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for !writersEnd.Load() {
				page, err := s.Sync(t.Context(), store.SyncParams{Owner: alice, Box: model.Inbox, Limit: 50})
				if err != nil {
					fail("Sync: %v", err)
					return
				}
				for i, r := range page {
					if r.Seq != int64(i+1) {
						fail("Sync during writes: seqs %v are not 1..n", seqs(page))
						return
					}
				}
				if _, err := s.ListRecords(t.Context(), store.ListParams{Owner: alice, Box: model.Inbox, Desc: true, Limit: 10}); err != nil {
					fail("ListRecords: %v", err)
					return
				}
				evs, err := s.ListEvents(t.Context(), store.EventFilter{Limit: 1000})
				if err != nil {
					fail("ListEvents: %v", err)
					return
				}
				for i := 1; i < len(evs); i++ {
					if evs[i].EventID <= evs[i-1].EventID {
						fail("ListEvents during writes: ids not ascending")
						return
					}
				}
				if _, err := s.ListConversations(t.Context(), store.ConversationQuery{Owner: alice, Limit: 10}); err != nil {
					fail("ListConversations: %v", err)
					return
				}
				if _, err := s.CountRecords(t.Context()); err != nil {
					fail("CountRecords: %v", err)
					return
				}
				if _, err := s.ExpiredLeases(t.Context(), base+1_000_000, 10); err != nil {
					fail("ExpiredLeases: %v", err)
					return
				}
			}
		})
	}
	writers.Wait()
	writersEnd.Store(true)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	recs := syncAll(t, s, store.SyncParams{Owner: alice, Box: model.Inbox}, 100)
	if len(recs) != messages {
		t.Fatalf("%d records in alice's inbox, want %d", len(recs), messages)
	}
	seen := map[string]bool{}
	for _, ids := range acked {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("record %s claimed and acked twice", id)
			}
			seen[id] = true
		}
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.State != model.Readed || r.Lease != nil || !seen[r.RecordID] {
			t.Fatalf("record %d after the run = %s; want seq %d, READED, no lease, acked once", i, dump(r), i+1)
		}
	}
	c := mustConv(t, s, alice, th)
	if c.UnreadCount != 0 || c.LastSeq != messages {
		t.Fatalf("alice's conversation after the run = %s; want unread 0, last seq %d", dump(c), messages)
	}
}

// Readers follow the event log by cursor (the last event id they got, as
// GET /v1/events and the event stream do) while several writers append to
// it: each must end with every event exactly once. An event that becomes
// visible below a cursor already moved past it would be lost for good.
func testEventCursorUnderWrites(t *testing.T, s store.Store) {
	boxes := []struct {
		owner string
		box   model.BoxKind
	}{{alice, model.Inbox}, {alice, model.Outbox}, {bob, model.Inbox}, {carol, model.Outbox}}
	writers, perWriter := len(boxes), 30
	if raceEnabled {
		perWriter = 12
	}
	var (
		wg, writing sync.WaitGroup
		done        atomic.Bool
		errMu       sync.Mutex
		errs        []error
	)
	fail := func(format string, args ...any) {
		errMu.Lock()
		errs = append(errs, fmt.Errorf(format, args...))
		errMu.Unlock()
	}
	for w := range writers {
		writing.Go(func() {
			for i := range perWriter {
				m := msgID(fmt.Sprintf("cursor-%d-%d", w, i))
				now := base + int64(i)
				// Two records, so two events per transaction, in a box no
				// other writer uses: the writers never wait for each other.
				if _, err := s.Apply(t.Context(), newPlan(m, now,
					newRec(boxes[w].owner, boxes[w].box, m, now, withVariant("a")),
					newRec(boxes[w].owner, boxes[w].box, m, now, withVariant("b")))); err != nil {
					fail("Apply %d/%d: %v", w, i, err)
					return
				}
			}
		})
	}
	// follow reads the log after its cursor until the writers are done and
	// a read comes back empty.
	follow := func(owner string, limit int) []model.Event {
		var got []model.Event
		var after int64
		for {
			last := done.Load() // before the read: an empty read after done is the end
			page, err := s.ListEvents(t.Context(), store.EventFilter{After: after, Owner: owner, Limit: limit})
			if err != nil {
				fail("ListEvents(owner %q): %v", owner, err)
				return got
			}
			if len(page) == 0 && last {
				return got
			}
			for _, e := range page {
				if e.EventID <= after {
					fail("ListEvents(owner %q, after %d) returned event %d", owner, after, e.EventID)
					return got
				}
				if owner != "" && e.Owner != owner {
					fail("ListEvents(owner %q) returned an event of %q", owner, e.Owner)
					return got
				}
				after = e.EventID
			}
			got = append(got, page...)
		}
	}
	var all, alices []model.Event
	wg.Go(func() { all = follow("", 7) })
	wg.Go(func() { alices = follow(alice, 5) })
	writing.Wait()
	done.Store(true)
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	ids := func(evs []model.Event) []int64 {
		out := make([]int64, len(evs))
		for i, e := range evs {
			out[i] = e.EventID
		}
		return out
	}
	wantAll := allEvents(t, s, "")
	if len(wantAll) != 2*writers*perWriter {
		t.Fatalf("%d events in the log, want %d", len(wantAll), 2*writers*perWriter)
	}
	if !slices.Equal(ids(all), ids(wantAll)) {
		t.Fatalf("a reader following the log by cursor got %d events, the log has %d: ids\n %v\nwant\n %v",
			len(all), len(wantAll), ids(all), ids(wantAll))
	}
	wantAlice := allEvents(t, s, alice)
	if len(wantAlice) != 2*2*perWriter || !slices.Equal(ids(alices), ids(wantAlice)) {
		t.Fatalf("a reader following alice's events by cursor got ids\n %v\nwant (%d)\n %v",
			ids(alices), 2*2*perWriter, ids(wantAlice))
	}
}
