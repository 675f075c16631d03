package postgres_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/store/storetest"
)

// Migration 0008 names the sender of the entries stored before it: a
// post_send's source, else its from; a dispatch's ingress tunnel; nobody
// when neither is there.
func TestMigrationNamesScheduledSenders(t *testing.T) {
	schema, tx := schemaAtVersion(t, 7)
	id := storetest.ScheduledSenderMsgID
	for i, e := range storetest.ScheduledSenderCases {
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
	storetest.RequireScheduledSenders(t, s)
}

// Migration 0012 clears the last record of the conversations whose record
// retention deleted before it cleared them itself.
func TestMigrationForgetsGoneRecordsInConversations(t *testing.T) {
	schema, tx := schemaAtVersion(t, 11)
	for _, c := range storetest.GoneRecordCases {
		m, rec := storetest.GoneRecordMsgID(c.Name), storetest.GoneRecordID(c.Owner, c.Name)
		if c.Stored {
			mustExec(t, tx, `INSERT INTO messages (msg_id, body, created_at_ms) VALUES ($1, '{}', 1) ON CONFLICT DO NOTHING`, m)
			mustExec(t, tx, `INSERT INTO records (record_id, owner, box, msg_id, state, seq, created_at_ms,
				updated_at_ms, sort_key, thread_key) VALUES ($1, $2, 'INBOX', $3, 'UNREAD', 1, 1, 1, 1, $4)`,
				rec, c.Owner, m, c.Thread)
		}
		mustExec(t, tx, `INSERT INTO conversations (owner, thread_key, last_msg_id, last_record_id, last_box,
			last_seq, unread_count, updated_at_ms) VALUES ($1, $2, $3, $4, 'INBOX', 1, 1, 1)`, c.Owner, c.Thread, m, rec)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("commit: %v", err)
	}

	s := openStore(t, schema) // applies 0012 and later
	storetest.RequireGoneRecordsForgotten(t, s)
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
