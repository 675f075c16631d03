package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// PostgreSQL-specific behaviour of consumers and retention: what concurrent
// transactions see of each other. The semantics themselves are the
// conformance suite's (store/storetest).

// schemaTx begins a transaction on the admin pool with schema first on its
// search_path, standing in for another node's transaction in flight.
func schemaTx(t *testing.T, schema string) pgx.Tx {
	t.Helper()
	tx, err := adminPool(t).Begin(t.Context())
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("set search_path: %v", err)
	}
	return tx
}

func mustExec(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	if _, err := tx.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestTerminalStates: the purge query must repeat the partial index's
// predicate exactly, and both must list model.State.IsTerminal's states.
func TestTerminalStates(t *testing.T) {
	var want []string
	for _, st := range model.States {
		if st.IsTerminal() {
			want = append(want, "'"+string(st)+"'")
		}
	}
	if got := strings.Join(want, ", "); postgres.TerminalStates != got {
		t.Fatalf("terminalStates = %s; model says %s", postgres.TerminalStates, got)
	}
	mig, err := os.ReadFile("migrations/0002_consumers.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mig), "WHERE state IN ("+postgres.TerminalStates+")") {
		t.Fatalf("0002_consumers.sql: records_terminal's predicate is not state IN (%s)", postgres.TerminalStates)
	}
}

// A body that a transaction in flight has just upserted (to reuse it) is
// left alone by an orphan purge, even when the upsert did not change it
// (its ref time was not newer): the transaction then refers to it and
// commits, and the body must still be there.
func TestPurgeSparesBodyBeingReused(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	p := plan("reused", "did:test:alice", model.Inbox, testBase)
	p.Records[0].State = model.Readed
	if _, err := s.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}

	tx := schemaTx(t, schema)
	// The writer's upsert, with a time no newer than the stored one: the
	// row is locked but not updated.
	mustExec(t, tx, postgres.SQLInsertMsg, p.MsgID, p.MsgBody, testBase)

	res, err := s.Purge(ctx, store.PurgeParams{NowMS: testBase + 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: testBase + 100},
		MessagesBeforeMS: testBase + 100, Limit: 10})
	if err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if res.Records[model.Inbox] != 1 || res.Messages != 0 {
		t.Fatalf("Purge = %+v; want the record gone and the locked body kept", res)
	}
	// The writer goes on to refer to the body, and commits.
	bob := model.RecordID("did:test:bob", model.Inbox, p.MsgID, "")
	mustExec(t, tx, `INSERT INTO records (record_id, owner, box, msg_id, state, seq, created_at_ms, updated_at_ms, sort_key)
		VALUES ($1, 'did:test:bob', 'INBOX', $2, 'UNREAD', 1, $3, $3, $3)`, bob, p.MsgID, testBase)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMessage(ctx, p.MsgID); err != nil {
		t.Fatalf("GetMessage after the reuse committed: %v", err)
	}

	// Once nothing refers to it any more, it goes.
	if _, err := s.Update(ctx, &store.Update{RecordID: bob, From: model.Unread, To: model.Readed, NowMS: testBase}); err != nil {
		t.Fatal(err)
	}
	res, err = s.Purge(ctx, store.PurgeParams{NowMS: testBase + 200,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: testBase + 200},
		MessagesBeforeMS: testBase + 200, Limit: 10})
	if err != nil || res.Records[model.Inbox] != 1 || res.Messages != 1 {
		t.Fatalf("second Purge = %+v, %v; want the record and the body gone", res, err)
	}
	if _, err := s.GetMessage(ctx, p.MsgID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage after purge: %v; want not found", err)
	}
}

// A consumer created from the end of a box that a transaction is adding a
// record to waits for that transaction, and starts after its record: it is
// ordered after every record committed before it.
func TestCreateConsumerFromEndWaitsForWriter(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	const src = "did:test:src"
	if _, err := s.Apply(ctx, plan("first", src, model.Inbox, testBase)); err != nil {
		t.Fatal(err)
	}
	tx := schemaTx(t, schema)
	// What Apply's lockBoxes and insert do to the counter.
	mustExec(t, tx, `INSERT INTO box_seqs (owner, box, last_seq) VALUES ($1, 'INBOX', 0)
		ON CONFLICT (owner, box) DO UPDATE SET last_seq = box_seqs.last_seq + 1`, src)

	done := make(chan error, 1)
	c := &model.Consumer{Owner: "did:test:app", Name: "tail", SourceOwner: src, SourceBox: model.Inbox, CreatedAtMS: testBase}
	go func() { done <- s.CreateConsumer(ctx, c, true) }()
	select {
	case err := <-done:
		t.Fatalf("CreateConsumer returned (%v) while a writer held the source's counter", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("CreateConsumer: %v", err)
	}
	if c.SourceSeq != 2 {
		t.Fatalf("SourceSeq = %d; want 2, the seq the writer committed", c.SourceSeq)
	}
}

// Nodes racing to advance one consumer over the same range: exactly one
// wins, the others get model.ErrConflict and write nothing.
func TestAdvanceConsumerRace(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 4)
	ctx := t.Context()
	const owner = "did:test:app"
	c := &model.Consumer{Owner: owner, Name: "race", SourceOwner: "did:test:src", SourceBox: model.Inbox, CreatedAtMS: testBase}
	if err := nodes[0].CreateConsumer(ctx, c, false); err != nil {
		t.Fatal(err)
	}
	box := model.ConsumerBox("race")
	// The source holds both messages (a step only refers to stored bodies).
	for _, name := range []string{"adv", "adv-other"} {
		if _, err := nodes[0].Apply(ctx, plan(name, "did:test:src", model.Inbox, testBase)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i, n := range nodes {
		wg.Go(func() {
			recs := plan("adv", owner, box, testBase).Records
			if i%2 == 1 {
				// A different record id: a loser must not leave it behind.
				recs = plan("adv-other", owner, box, testBase).Records
			}
			res, err := n.AdvanceConsumer(ctx, &store.ConsumerAdvance{CreatedAtMS: testBase, Owner: owner, Name: "race",
				FromSourceSeq: 0, ToSourceSeq: 5, Records: recs, NowMS: testBase})
			switch {
			case err == nil:
				if len(res.Created) != 1 || res.Created[0].Seq != 1 {
					t.Errorf("winner's result = %+v; want one record with seq 1", res)
				}
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, model.ErrConflict):
				t.Errorf("AdvanceConsumer: %v; want success or model.ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d advances won; want exactly 1", wins)
	}
	recs, err := nodes[0].Sync(ctx, store.SyncParams{Owner: owner, Box: box})
	if err != nil || len(recs) != 1 {
		t.Fatalf("consumer box = %d records, %v; want 1", len(recs), err)
	}
	got, err := nodes[0].GetConsumer(ctx, owner, "race")
	if err != nil || got.SourceSeq != 5 {
		t.Fatalf("GetConsumer = %+v, %v; want SourceSeq 5", got, err)
	}
}

// Writers reuse bodies whose only records retention is purging at the same
// moment. The age check excludes nothing here (MessagesBeforeMS is far in
// the future), so only the locks keep a body alive: every record that
// retention does not touch must still find its body at the end.
func TestPurgeRacesBodyReuse(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 3)
	ctx := t.Context()
	const writers, perWriter = 4, 60
	var (
		wg      sync.WaitGroup
		writing sync.WaitGroup
		stop    = make(chan struct{})
		mu      sync.Mutex
		kept    []model.Record
	)
	for w := range writers {
		writing.Add(1)
		wg.Go(func() {
			defer writing.Done()
			s := nodes[w%len(nodes)]
			for i := range perWriter {
				name := fmt.Sprintf("reuse-%d-%d", w, i)
				// A plan whose only record retention may take at once...
				old := plan(name, "did:test:old", model.Inbox, testBase)
				old.Records[0].State = model.Readed
				if _, err := s.Apply(ctx, old); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				// ...and one that reuses the body for a record it keeps.
				p := plan(name, "did:test:keep", model.Inbox, testBase+1)
				if _, err := s.Apply(ctx, p); err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				mu.Lock()
				kept = append(kept, p.Records[0])
				mu.Unlock()
			}
		})
	}
	for i := range 2 {
		wg.Go(func() {
			s := nodes[(i+1)%len(nodes)]
			for {
				_, err := s.Purge(ctx, store.PurgeParams{NowMS: testBase + 10, Limit: 5,
					TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: testBase + 10},
					MessagesBeforeMS: 1 << 62})
				if err != nil {
					t.Errorf("Purge: %v", err)
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	writing.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	ids := make([]string, len(kept))
	for i, r := range kept {
		ids[i] = r.MsgID
	}
	bodies, err := nodes[0].GetMessages(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range kept {
		if _, ok := bodies[r.MsgID]; !ok {
			t.Errorf("record %s lost its body %s to a concurrent purge", r.RecordID, r.MsgID)
		}
	}
}
