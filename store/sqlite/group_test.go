package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestGroupApplyInsertsRecordsTogether queues Apply writes behind a
// blocked one so they form a group, whose records are inserted together
// before the commit (commit.go). Among them: two plans racing for one
// idempotency key, a plan repeating another's records, and (in the second
// case) a write that kills the shared transaction, so that every write is
// run again alone. Either way each caller must get what it would have got
// alone, and the box must hold exactly the records reported created, with
// seqs 1…n and one unread each in the conversation.
func TestGroupApplyInsertsRecordsTogether(t *testing.T) {
	for _, breakGroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("breakGroup=%v", breakGroup), func(t *testing.T) {
			ctx := context.Background()
			s, _ := openTest(t)
			release := holdWriter(ctx, s)

			const n = 16
			const alice, th = "did:test:alice", "chat:t"
			msg := func(i int) string { return fmt.Sprintf("cymsg:%064d", i) }
			plans := make([]*store.Plan, n)
			for i := range plans {
				k := i
				if i == 8 {
					k = 7 // the same records as plan 7
				}
				m, sender := msg(k), fmt.Sprintf("did:test:sender-%d", k%3)
				plans[i] = &store.Plan{MsgID: m, MsgBody: []byte(`{"n":` + fmt.Sprint(i) + `}`), NowMS: 1000 + int64(i),
					Records: []model.Record{
						{RecordID: model.RecordID(alice, model.Inbox, m, ""), Owner: alice, BoxKind: model.Inbox,
							MsgID: m, State: model.Unread, SortKey: 1, ThreadKey: th},
						{RecordID: model.RecordID(sender, model.Outbox, m, ""), Owner: sender, BoxKind: model.Outbox,
							MsgID: m, State: model.InitialState(model.Outbox), SortKey: 1, ThreadKey: th},
					}}
				if i == 4 || i == 5 {
					plans[i].Idem = &store.Idempotency{Scope: "test", Key: "k"}
				}
			}
			results := make([]*store.ApplyResult, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range plans {
				wg.Go(func() { results[i], errs[i] = s.Apply(ctx, plans[i]) })
			}
			// A write that leaves records for the end and then fails: they
			// must go with its savepoint.
			const carol = "did:test:carol"
			lost := model.Record{RecordID: model.RecordID(carol, model.Inbox, msg(99), ""), Owner: carol,
				BoxKind: model.Inbox, MsgID: msg(99), State: model.Unread}
			wg.Go(func() {
				s.write(ctx, func(_ context.Context, tx *sql.Tx) error {
					s.deferred = append(s.deferred, recordSet{recs: []model.Record{lost}, nowMS: 1, res: &store.ApplyResult{}})
					return model.Conflict("x", "failed after its records were queued")
				})
			})
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
			if len(groups) == 0 || groups[0] < n {
				t.Fatalf("no group of all writes formed: %v", groups)
			}

			if _, err := s.GetRecord(ctx, lost.RecordID); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("the failed write's queued record was stored (%v)", err)
			}
			conflicts := 0
			created := map[string]model.Record{}
			existing := 0
			for i, err := range errs {
				if errors.Is(err, model.ErrConflict) && (i == 4 || i == 5) {
					conflicts++
					for _, r := range plans[i].Records {
						if _, err := s.GetRecord(ctx, r.RecordID); !errors.Is(err, model.ErrNotFound) {
							t.Errorf("plan %d failed, yet its record %s is stored (%v)", i, r.RecordID, err)
						}
					}
					continue
				}
				if err != nil {
					t.Fatalf("plan %d: %v", i, err)
				}
				for _, c := range results[i].Created {
					if _, dup := created[c.RecordID]; dup {
						t.Fatalf("record %s reported created twice", c.RecordID)
					}
					created[c.RecordID] = c
				}
				existing += len(results[i].Existing)
			}
			if conflicts != 1 {
				t.Fatalf("%d of the two plans sharing an idempotency key failed, want 1", conflicts)
			}
			if existing != 2 || len(created) != 2*(n-2) {
				t.Fatalf("created %d, existing %d; want %d and 2 (plan 8 repeats plan 7)", len(created), existing, 2*(n-2))
			}
			inbox, err := s.Sync(ctx, store.SyncParams{Owner: alice, Box: model.Inbox, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(inbox) != n-2 {
				t.Fatalf("alice's INBOX holds %d records, want %d", len(inbox), n-2)
			}
			for i, r := range inbox {
				if r.Seq != int64(i+1) {
					t.Fatalf("INBOX record %d has seq %d, want %d", i, r.Seq, i+1)
				}
				if c, ok := created[r.RecordID]; !ok || c.Seq != r.Seq {
					t.Fatalf("stored record %s (seq %d) is not what Apply reported: %+v", r.RecordID, r.Seq, c)
				}
			}
			convs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: alice, Limit: 10})
			if err != nil || len(convs) != 1 || convs[0].UnreadCount != int64(n-2) || convs[0].LastSeq != int64(n-2) {
				t.Fatalf("alice's conversations = %+v, %v; want one, %d unread, last seq %d", convs, err, n-2, n-2)
			}
		})
	}
}

// TestGroupWritesSeeEarlierApplies: a group is its writes one after the
// other, in queue order, although Apply's records are inserted late. Here
// a write queued after an Apply must see its record, and keep it even
// when that write fails; and a consumer's deletion, which removes bodies
// no record refers to, must not take the body of a message an earlier
// Apply of the group just gave a record (its only other record being in
// the consumer's box).
func TestGroupWritesSeeEarlierApplies(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const m = "cymsg:0000000000000000000000000000000000000000000000000000000000000001"
	const m2 = "cymsg:0000000000000000000000000000000000000000000000000000000000000002"
	body := []byte(`{"x":1}`)
	if err := s.CreateConsumer(ctx, &model.Consumer{Owner: "a", Name: "c", SourceOwner: "b", SourceBox: model.Inbox}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, &store.Plan{MsgID: m, MsgBody: body, NowMS: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AdvanceConsumer(ctx, &store.ConsumerAdvance{Owner: "a", Name: "c", FromSourceSeq: 0, ToSourceSeq: 1,
		Records: []model.Record{rec("a", model.ConsumerBox("c"), m, "", 1)}, NowMS: 2}); err != nil {
		t.Fatal(err)
	}

	release := holdWriter(ctx, s)
	var groups []int
	s.onGroup = func(n int) { groups = append(groups, n) }
	carol, dave := rec("carol", model.Inbox, m, "", 1), rec("dave", model.Inbox, m2, "", 1)
	var seen int
	steps := []func() error{
		func() error {
			_, err := s.Apply(ctx, &store.Plan{MsgID: m, MsgBody: body, NowMS: 10, Records: []model.Record{carol}})
			return err
		},
		func() error {
			err := s.write(ctx, func(_ context.Context, tx *sql.Tx) error {
				if err := tx.QueryRow(`SELECT count(*) FROM records WHERE record_id = ?`, carol.RecordID).Scan(&seen); err != nil {
					return err
				}
				return model.Conflict("x", "fails after looking")
			})
			if !errors.Is(err, model.ErrConflict) {
				return fmt.Errorf("failing write: %v", err)
			}
			return nil
		},
		func() error { return s.DeleteConsumer(ctx, "a", "c", 11) },
		func() error {
			_, err := s.Apply(ctx, &store.Plan{MsgID: m2, MsgBody: body, NowMS: 12, Records: []model.Record{dave}})
			return err
		},
	}
	errs := make(chan error, len(steps))
	for _, step := range steps {
		go func() { errs <- step() }()
		time.Sleep(30 * time.Millisecond) // queue in this order
	}
	release()
	for range steps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(groups) == 0 || groups[0] != len(steps) {
		t.Fatalf("the writes did not form one group: %v", groups)
	}
	if seen != 1 {
		t.Fatalf("a write queued after an Apply saw %d of its records, want 1", seen)
	}
	for _, r := range []model.Record{carol, dave} {
		if _, err := s.GetRecord(ctx, r.RecordID); err != nil {
			t.Fatalf("record %s: %v", r.RecordID, err)
		}
	}
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE msg_id = ?`, m).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("carol's record is stored but its body is gone (count %d)", n)
	}
}
