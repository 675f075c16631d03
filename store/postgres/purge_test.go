package postgres_test

import (
	"testing"

	"github.com/msgcenter/msgcenter/store"
)

// A body a writer holds is skipped by the pass that finds it due, and kept
// waiting: when the writer rolls back (a send refused on its idempotency
// key, say), nothing refers to the body, and a later pass deletes it.
func TestHeldOrphanBodyGoesLater(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	setup := schemaTx(t, schema)
	mustExec(t, setup, `INSERT INTO messages (msg_id, body, created_at_ms, ref_at_ms) VALUES ('cymsg:x', '\x7b7d', 1, 1)`)
	mustExec(t, setup, `INSERT INTO orphan_bodies (msg_id) VALUES ('cymsg:x')`)
	if err := setup.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	writer := schemaTx(t, schema)
	mustExec(t, writer, `SELECT 1 FROM messages WHERE msg_id = 'cymsg:x' FOR UPDATE`)
	p := store.PurgeParams{NowMS: 1e12, MessagesBeforeMS: 1e12, Limit: 100}
	if res, err := s.Purge(ctx, p); err != nil || res.Messages != 0 {
		t.Fatalf("pass while a writer holds the body: %+v, %v; want it skipped", res, err)
	}
	if err := writer.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Purge(ctx, p); err != nil || res.Messages != 1 {
		t.Fatalf("pass after the writer rolled back: %+v, %v; want the body gone", res, err)
	}
}
