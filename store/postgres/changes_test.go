package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// heldWriter holds the store's change writer at its next batch, so that
// the calls made meanwhile queue for the batch after it.
type heldWriter struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	sizes   []int
}

func holdChanges(t *testing.T, s *postgres.Store) *heldWriter {
	t.Helper()
	if n := postgres.ChangeWriters(s); n != 1 {
		t.Skipf("the pool_max_conns of %s gives %d change writers; holding one does not queue the calls", "MSGCENTER_TEST_POSTGRES_URL", n)
	}
	h := &heldWriter{entered: make(chan struct{}), release: make(chan struct{})}
	postgres.HoldChanges(s, func(n int) {
		h.mu.Lock()
		h.sizes = append(h.sizes, n)
		h.mu.Unlock()
		if h.armed.CompareAndSwap(true, false) {
			close(h.entered)
			<-h.release
		}
	})
	return h
}

// queue runs block, which the writer holds, then each of calls on its own
// goroutine; once all of them wait for the writer it lets it go, and
// waits for every call to return.
func (h *heldWriter) queue(t *testing.T, s *postgres.Store, block func(), calls ...func()) {
	t.Helper()
	h.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(block)
	<-h.entered
	for _, c := range calls {
		wg.Go(c)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, _, handing := postgres.ChangeGroups(s); handing == int64(len(calls)) {
			break
		}
		if time.Now().After(deadline) {
			close(h.release)
			t.Fatalf("the %d calls never all waited for the writer", len(calls))
		}
	}
	time.Sleep(10 * time.Millisecond) // from the count to the channel send
	close(h.release)
	wg.Wait()
}

// batches lists the sizes of the batches the writer ran.
func (h *heldWriter) batches() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sizes)
}

// inbox stores n records in owner's INBOX and returns them in seq order.
func inbox(t *testing.T, s *postgres.Store, owner string, n int) []model.Record {
	t.Helper()
	var recs []model.Record
	for i := range n {
		res, err := s.Apply(t.Context(), plan(fmt.Sprintf("%s-%d", owner, i), owner, model.Inbox, int64(1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, res.Created...)
	}
	return recs
}

func claimAs(owner, holder, lease string) store.ClaimParams {
	return store.ClaimParams{Owner: owner, Box: model.Inbox, From: model.Unread, To: model.Reading,
		NowMS: 2000, LeaseID: lease, Holder: holder, LeaseUntilMS: 60_000}
}

func ackOf(rec model.Record, lease string) *store.Update {
	return &store.Update{RecordID: rec.RecordID, From: model.Reading, ExpectLeaseID: lease, To: model.Readed, NowMS: 2100}
}

// TestChangesShareACommit: claims, acks and acks with their next claim
// that queue while the writer works go into one transaction, and each
// gets what it would have got alone: every claim a record of its own, an
// ack under a lost lease its conflict and no claim, the acks their states.
func TestChangesShareACommit(t *testing.T) {
	s := openStore(t, newSchema(t))
	ctx := t.Context()
	const owner = "did:test:share"
	recs := inbox(t, s, owner, 8)
	h := holdChanges(t, s)
	var held []model.Record
	for i := range 3 {
		rec, err := s.Claim(ctx, claimAs(owner, owner, fmt.Sprintf("L%d", i)))
		if err != nil || rec.RecordID != recs[i].RecordID {
			t.Fatalf("claim %d: %+v, %v", i, rec, err)
		}
		held = append(held, rec)
	}

	type claimOut struct {
		rec model.Record
		err error
	}
	var blocker, c1, c2 claimOut
	var ack0, utc1, utc2 struct {
		rec model.Record
		c   store.Claimed
		err error
	}
	h.queue(t, s,
		func() { blocker.rec, blocker.err = s.Claim(ctx, claimAs(owner, owner, "B")) },
		func() { ack0.rec, ack0.err = s.Update(ctx, ackOf(held[0], "L0")) },
		func() {
			utc1.rec, utc1.c, utc1.err = s.UpdateThenClaim(ctx, ackOf(held[1], "L1"), claimAs(owner, owner, "N1"))
		},
		func() {
			utc2.rec, utc2.c, utc2.err = s.UpdateThenClaim(ctx, ackOf(held[2], "stolen"), claimAs(owner, owner, "N2"))
		},
		func() { c1.rec, c1.err = s.Claim(ctx, claimAs(owner, owner, "C1")) },
		func() { c2.rec, c2.err = s.Claim(ctx, claimAs(owner, owner, "C2")) },
	)

	if groups, grouped, _ := postgres.ChangeGroups(s); groups < 1 || grouped < 2 {
		t.Fatalf("%d groups carried %d calls (batches %v); want the queued calls in a group", groups, grouped, h.batches())
	}
	if ack0.err != nil || ack0.rec.State != model.Readed {
		t.Fatalf("ack: %+v, %v", ack0.rec, ack0.err)
	}
	if utc1.err != nil || utc1.rec.State != model.Readed || utc1.c.Err != nil || utc1.c.Record.State != model.Reading {
		t.Fatalf("ack with next: %+v, %+v, %v", utc1.rec, utc1.c, utc1.err)
	}
	if !errors.Is(utc2.err, model.ErrConflict) || utc2.c.Record.RecordID != "" || utc2.c.Err != nil {
		t.Fatalf("ack under a lost lease: %+v, %+v, %v; want a conflict and no claim", utc2.rec, utc2.c, utc2.err)
	}
	taken := map[string]string{}
	for name, c := range map[string]claimOut{"blocker": blocker, "c1": c1, "c2": c2, "next": {utc1.c.Record, utc1.c.Err}} {
		if c.err != nil || c.rec.State != model.Reading {
			t.Fatalf("claim %s: %+v, %v", name, c.rec, c.err)
		}
		if other, dup := taken[c.rec.RecordID]; dup {
			t.Fatalf("claims %s and %s both took %s", name, other, c.rec.RecordID)
		}
		taken[c.rec.RecordID] = name
	}
	want := map[model.State]int{model.Readed: 2, model.Reading: 1 + 4, model.Unread: 1}
	got := map[model.State]int{}
	for _, r := range recs {
		cur, err := s.GetRecord(ctx, r.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		got[cur.State]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("states after the group: %v, want %v", got, want)
	}
}

// TestFailedChangeGroupRunsEachAlone: one call of a group fails (a trigger
// refuses its claim's event), which aborts the group's transaction; every
// call then runs alone, so only the refused one fails.
func TestFailedChangeGroupRunsEachAlone(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	const owner = "did:test:alone"
	recs := inbox(t, s, owner, 4)
	h := holdChanges(t, s)
	held, err := s.Claim(ctx, claimAs(owner, owner, "L0"))
	if err != nil {
		t.Fatal(err)
	}
	fn := pgx.Identifier{schema, "refuse_bad"}.Sanitize()
	ddl := "CREATE FUNCTION " + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'claims by bad refused'; END $$;
		CREATE TRIGGER refuse_bad BEFORE INSERT ON ` + pgx.Identifier{schema, "events"}.Sanitize() + `
		FOR EACH ROW WHEN (NEW.type = '` + model.EventRecordClaimed + `' AND NEW.detail = 'holder=bad') EXECUTE FUNCTION ` + fn + `()`
	if _, err := adminPool(t).Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}

	var blockErr, badErr, goodErr, ackErr error
	var good, acked model.Record
	h.queue(t, s,
		func() { _, blockErr = s.Claim(ctx, claimAs(owner, owner, "B")) },
		func() { _, badErr = s.Claim(ctx, claimAs(owner, "bad", "X")) },
		func() { good, goodErr = s.Claim(ctx, claimAs(owner, owner, "G")) },
		func() { acked, ackErr = s.Update(ctx, ackOf(held, "L0")) },
	)

	if b := h.batches(); slices.Max(b) < 2 {
		t.Fatalf("batches %v: the calls never met in a group", b)
	}
	if groups, _, _ := postgres.ChangeGroups(s); groups != 0 {
		t.Fatalf("%d groups committed; the refused claim's group must not", groups)
	}
	if badErr == nil || errors.Is(badErr, model.ErrNotFound) {
		t.Fatalf("refused claim: %v; want its error", badErr)
	}
	if blockErr != nil || goodErr != nil || good.State != model.Reading || ackErr != nil || acked.State != model.Readed {
		t.Fatalf("the others: block %v, good %+v %v, ack %+v %v", blockErr, good, goodErr, acked, ackErr)
	}
	last, err := s.GetRecord(ctx, recs[3].RecordID)
	if err != nil || last.State != model.Unread {
		t.Fatalf("the record the refused claim would have taken: %+v, %v; want it unclaimed", last, err)
	}
}

// TestLockedRowHoldsUpOnlyItsCall: a group whose update waits for a row
// another transaction holds gives up after the group's lock timeout, and
// its calls run alone: the claim goes through while the row is still
// locked, and the update waits for it on its own.
func TestLockedRowHoldsUpOnlyItsCall(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	const owner = "did:test:locked"
	inbox(t, s, owner, 4)
	h := holdChanges(t, s)
	held, err := s.Claim(ctx, claimAs(owner, owner, "L0"))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := adminPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "records"}.Sanitize()+" WHERE record_id = $1 FOR UPDATE", held.RecordID); err != nil {
		t.Fatal(err)
	}
	var release sync.Once
	var waited atomic.Bool
	let := func() { release.Do(func() { _ = tx.Rollback(context.Background()) }) }
	// Had the claim waited for the row, it would wait for ever: a watchdog
	// lets the row go, and the test fails.
	watchdog := time.AfterFunc(20*time.Second, func() { waited.Store(true); let() })
	defer watchdog.Stop()
	claimed := make(chan error, 1)
	var acked model.Record
	var ackErr error
	h.queue(t, s,
		func() { _, _ = s.Claim(ctx, claimAs(owner, owner, "B")) },
		func() { acked, ackErr = s.Update(ctx, ackOf(held, "L0")) },
		func() {
			_, err := s.Claim(ctx, claimAs(owner, owner, "C"))
			claimed <- err
			let() // only now does the row's holder let go
		},
	)
	if waited.Load() {
		t.Fatal("the claim waited for a row lock its group's update was waiting for")
	}
	if err := <-claimed; err != nil {
		t.Fatalf("claim beside the locked row: %v", err)
	}
	if ackErr != nil || acked.State != model.Readed {
		t.Fatalf("update of the locked row: %+v, %v; want it done once the row was free", acked, ackErr)
	}
	if b := h.batches(); slices.Max(b) < 2 {
		t.Fatalf("batches %v: the calls never met in a group", b)
	}
}
