package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// threadInbox stores n unread inbox records of owner in one thread.
func threadInbox(t *testing.T, s store.Store, owner, thread string, n int) {
	t.Helper()
	for i := range n {
		p := plan(fmt.Sprintf("%s-%d", thread, i), owner, model.Inbox, int64(1000+i))
		p.Records[0].ThreadKey = thread
		if _, err := s.Apply(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
}

// claimAck claims the first unread record of owner's inbox under lease and
// acks it.
func claimAck(ctx context.Context, s store.Store, owner, lease string) error {
	rec, err := s.Claim(ctx, store.ClaimParams{Owner: owner, Box: model.Inbox, From: model.Unread,
		To: model.Reading, NowMS: 2000, LeaseID: lease, Holder: owner, LeaseUntilMS: 60_000})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if _, err := s.Update(ctx, &store.Update{RecordID: rec.RecordID, From: model.Reading,
		ExpectLeaseID: lease, To: model.Readed, NowMS: 2100}); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// readAll claims and acks n records of owner's inbox.
func readAll(t *testing.T, s store.Store, owner string, n int) {
	t.Helper()
	for i := range n {
		if err := claimAck(t.Context(), s, owner, fmt.Sprintf("L%d", i)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

func unreadOf(t *testing.T, s store.Store, owner, thread string) int64 {
	t.Helper()
	cs, err := s.ListConversations(t.Context(), store.ConversationQuery{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.ThreadKey == thread {
			return c.UnreadCount
		}
	}
	t.Fatalf("no conversation %q among %+v", thread, cs)
	return 0
}

// pendingDeltas counts the deltas not folded yet, and reads the row's own
// count, as another session sees them.
func pendingDeltas(t *testing.T, schema, owner, thread string) (deltas, row int64) {
	t.Helper()
	q := func(sql string) int64 {
		var n int64
		if err := adminPool(t).QueryRow(t.Context(), fmt.Sprintf(sql, pgx.Identifier{schema}.Sanitize()), owner, thread).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	return q(`SELECT count(*) FROM %s.conversation_unread WHERE owner = $1 AND thread_key = $2`),
		q(`SELECT unread_count FROM %s.conversations WHERE owner = $1 AND thread_key = $2`)
}

// An ack appends a delta instead of updating the conversation's row, the
// count read is exact before and after folding, and a fold skips (without
// waiting for) a row another transaction holds.
func TestUnreadDeltasFold(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	postgres.StopUpkeep(s)
	const owner, thread = "did:test:fold", "chat:fold"
	threadInbox(t, s, owner, thread, 5)
	readAll(t, s, owner, 3)
	if got := unreadOf(t, s, owner, thread); got != 2 {
		t.Fatalf("unread after 3 of 5 read = %d, want 2", got)
	}
	if d, row := pendingDeltas(t, schema, owner, thread); d != 3 || row != 5 {
		t.Fatalf("before folding: %d deltas, row %d; want 3 deltas on a row of 5", d, row)
	}

	// A send in flight holds the row: the fold passes over it.
	tx := schemaTx(t, schema)
	mustExec(t, tx, `SELECT 1 FROM conversations WHERE owner = $1 AND thread_key = $2 FOR UPDATE`, owner, thread)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := postgres.FoldUnread(ctx, s)
	if err != nil || n != 0 {
		t.Fatalf("fold with the row held = %d, %v; want 0 conversations and no wait", n, err)
	}
	if got := unreadOf(t, s, owner, thread); got != 2 {
		t.Fatalf("unread with the row held = %d, want 2", got)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}

	if n, err := postgres.FoldUnread(ctx, s); err != nil || n != 1 {
		t.Fatalf("fold = %d, %v; want 1 conversation", n, err)
	}
	if d, row := pendingDeltas(t, schema, owner, thread); d != 0 || row != 2 {
		t.Fatalf("after folding: %d deltas, row %d; want none on a row of 2", d, row)
	}
	if got := unreadOf(t, s, owner, thread); got != 2 {
		t.Fatalf("unread after folding = %d, want 2", got)
	}
	readAll(t, s, owner, 2)
	if got := unreadOf(t, s, owner, thread); got != 0 {
		t.Fatalf("unread after all read = %d, want 0", got)
	}
}

// The store folds on its own: a read inbox leaves no deltas behind.
func TestUnreadDeltasFoldInTheBackground(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	const owner, thread = "did:test:bg", "chat:bg"
	threadInbox(t, s, owner, thread, 4)
	readAll(t, s, owner, 4)
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, row := pendingDeltas(t, schema, owner, thread)
		if d == 0 && row == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the acks: %d deltas left, row %d; want them folded into a row of 0", d, row)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := unreadOf(t, s, owner, thread); got != 0 {
		t.Fatalf("unread = %d, want 0", got)
	}
}

// A row held by a send costs a fold that row only: the statement's batch
// counts the rows it locked, so the rest of the pass goes on.
func TestUnreadFoldPassesOverAHeldRow(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	postgres.StopUpkeep(s)
	const owner = "did:test:many"
	const n = 600 // more than one statement's batch
	for i := range n {
		threadInbox(t, s, owner, fmt.Sprintf("th%04d", i), 1)
	}
	readAll(t, s, owner, n)
	tx := schemaTx(t, schema)
	mustExec(t, tx, `SELECT 1 FROM conversations WHERE owner = $1 AND thread_key = 'th0000' FOR UPDATE`, owner)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if got, err := postgres.FoldUnread(ctx, s); err != nil || got != n-1 {
		t.Fatalf("a pass with one row held folded %d conversations (%v), want %d", got, err, n-1)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := postgres.FoldUnread(ctx, s); err != nil || got != 1 {
		t.Fatalf("the next pass folded %d conversations (%v), want the one held before", got, err)
	}
}

// Sends, acks and folds on two nodes at once: no count read is below
// zero, and at the end every count is the number of unread records and
// nothing is left to fold.
func TestUnreadCountsUnderConcurrentFolds(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of concurrent load")
	}
	schema := newSchema(t)
	nodes := []*postgres.Store{openStore(t, schema), openStore(t, schema)}
	const owner, rounds = "did:test:busy", 40
	threads := []string{"chat:a", "chat:b", "chat:c"}
	var writers, folders sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 2*len(nodes))
	for i, s := range nodes {
		folders.Go(func() { // beside each node's own folder, as fast as it goes
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := postgres.FoldUnread(t.Context(), s); err != nil {
					errs <- err
					return
				}
			}
		})
		writers.Go(func() { // three sends, then a claim and an ack, per round
			for r := range rounds {
				for _, th := range threads {
					p := plan(fmt.Sprintf("busy-%d-%d-%s", i, r, th), owner, model.Inbox, int64(1000+r))
					p.Records[0].ThreadKey = th
					if _, err := s.Apply(t.Context(), p); err != nil {
						errs <- err
						return
					}
				}
				if err := claimAck(t.Context(), s, owner, fmt.Sprintf("L%d-%d", i, r)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	written := make(chan struct{})
	go func() { writers.Wait(); close(written) }()
	for reading := true; reading; {
		select {
		case <-written:
			reading = false
		default:
		}
		cs, err := nodes[0].ListConversations(t.Context(), store.ConversationQuery{Owner: owner})
		if err != nil {
			t.Error(err)
			break
		}
		for _, c := range cs {
			if c.UnreadCount < 0 {
				t.Errorf("%s read %d unread", c.ThreadKey, c.UnreadCount)
			}
		}
	}
	<-written
	close(stop)
	folders.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	rows, err := adminPool(t).Query(t.Context(), fmt.Sprintf(`SELECT thread_key, count(*) FROM %s.records
		WHERE owner = $1 AND box = 'INBOX' AND state IN ('UNREAD', 'READING') GROUP BY thread_key`,
		pgx.Identifier{schema}.Sanitize()), owner)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for rows.Next() {
		var th string
		var n int64
		if err := rows.Scan(&th, &n); err != nil {
			t.Fatal(err)
		}
		want[th] = n
	}
	for _, th := range threads {
		if got := unreadOf(t, nodes[1], owner, th); got != want[th] {
			t.Errorf("%s: %d unread read, %d records unread", th, got, want[th])
		}
	}
	if _, err := postgres.FoldUnread(t.Context(), nodes[0]); err != nil {
		t.Fatal(err)
	}
	for _, th := range threads {
		if d, row := pendingDeltas(t, schema, owner, th); d != 0 || row != want[th] {
			t.Errorf("%s after the last fold: %d deltas, row %d; want none on a row of %d", th, d, row, want[th])
		}
	}
}
