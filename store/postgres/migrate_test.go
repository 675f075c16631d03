package postgres_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/storetest"
)

// Migration 0008 names the sender of the entries stored before it: a
// post_send's source, else its from; a dispatch's ingress tunnel; nobody
// when neither is there.
func TestMigrationNamesScheduledSenders(t *testing.T) {
	schema, tx := schemaAtVersion(t, 7)
	entries := storetest.ScheduledSenderCases
	id := func(name string) string {
		sum := sha256.Sum256([]byte(name))
		return "cymsg:" + hex.EncodeToString(sum[:])
	}
	for i, e := range entries {
		var ctx []byte
		if e.Ctx != "" {
			ctx = []byte(e.Ctx)
		}
		mustExec(t, tx, `INSERT INTO messages (msg_id, body, created_at_ms) VALUES ($1, $2, 1)`, id(e.Name), []byte(e.Body))
		mustExec(t, tx, `INSERT INTO scheduled (op, msg_id, ctx, due_at_ms, created_at_ms) VALUES ($1, $2, $3, $4, 1)`,
			e.Op, id(e.Name), ctx, 100+i)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("commit: %v", err)
	}

	s := openStore(t, schema) // applies 0008 and later
	got, _, err := s.ListScheduled(t.Context(), store.ScheduleQuery{Limit: 10})
	if err != nil || len(got) != len(entries) {
		t.Fatalf("ListScheduled = %d entries, %v", len(got), err)
	}
	for i, e := range entries {
		if got[i].Sender != e.Want {
			t.Errorf("%s entry %q: sender %q, want %q", e.Op, e.Name, got[i].Sender, e.Want)
		}
	}
	mine, n, err := s.ListScheduled(t.Context(), store.ScheduleQuery{Sender: "did:tun", Limit: 10})
	if err != nil || n != 1 || len(mine) != 1 || mine[0].MsgID != id("tunnel") {
		t.Fatalf("the tunnel's entries: %d of %d, %v", len(mine), n, err)
	}
}

// schemaAtVersion creates a schema with the first n migrations applied, as
// a server of that time left it, and returns it with an open transaction
// in it for the test to fill (it commits before opening a store).
func schemaAtVersion(t *testing.T, n int) (string, pgx.Tx) {
	t.Helper()
	schema := newSchema(t)
	if _, err := adminPool(t).Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	tx := schemaTx(t, schema)
	mustExec(t, tx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) < n {
		t.Fatalf("migrations: %v, %v; want at least %d", names, err, n)
	}
	for v, name := range names[:n] {
		sql, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, string(sql))
		mustExec(t, tx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", v+1, filepath.Base(name))
	}
	return schema, tx
}
