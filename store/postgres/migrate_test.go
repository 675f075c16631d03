package postgres_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/store"
)

// Migration 0008 names the sender of the entries stored before it: a
// post_send's source, else its from; a dispatch's ingress tunnel; nobody
// when neither is there.
func TestMigrationNamesScheduledSenders(t *testing.T) {
	schema := newSchema(t)
	if _, err := adminPool(t).Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	tx := schemaTx(t, schema)
	mustExec(t, tx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(names) < 8 {
		t.Fatalf("migrations: %v, %v", names, err)
	}
	for v, name := range names[:7] {
		sql, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, string(sql))
		mustExec(t, tx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", v+1, filepath.Base(name))
	}
	entries := []struct {
		op, name, body, ctx, want string
	}{
		{"post_send", "from", `{"from":"did:a","to":["did:b"]}`, `{}`, "did:a"},
		{"post_send", "source", `{"from":"did:grp","source":"did:m","to":[]}`, `null`, "did:m"},
		{"dispatch", "tunnel", `{"from":"did:ext","to":["did:b"]}`, `{"tunnel_did":"did:tun","platform":"tg"}`, "did:tun"},
		{"dispatch", "no ingress", `{"from":"did:ext","to":["did:b"]}`, ``, ""},
		{"dispatch", "null ingress", `{"from":"did:ext","to":["did:b"]}`, `null`, ""},
		{"post_send", "a NUL in its text", `{"content":{"content":"a\u0000b"},"from":"did:nul","to":["did:b"]}`, `{}`, "did:nul"},
		{"dispatch", "a NUL in its ingress", `{"from":"did:ext","to":["did:b"]}`, `{"tunnel_did":"did:tun2","address":"a\u0000b"}`, "did:tun2"},
	}
	id := func(name string) string {
		sum := sha256.Sum256([]byte(name))
		return "cymsg:" + hex.EncodeToString(sum[:])
	}
	for i, e := range entries {
		var ctx []byte
		if e.ctx != "" {
			ctx = []byte(e.ctx)
		}
		mustExec(t, tx, `INSERT INTO messages (msg_id, body, created_at_ms) VALUES ($1, $2, 1)`, id(e.name), []byte(e.body))
		mustExec(t, tx, `INSERT INTO scheduled (op, msg_id, ctx, due_at_ms, created_at_ms) VALUES ($1, $2, $3, $4, 1)`,
			e.op, id(e.name), ctx, 100+i)
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
		if got[i].Sender != e.want {
			t.Errorf("%s entry %q: sender %q, want %q", e.op, e.name, got[i].Sender, e.want)
		}
	}
	mine, n, err := s.ListScheduled(t.Context(), store.ScheduleQuery{Sender: "did:tun", Limit: 10})
	if err != nil || n != 1 || len(mine) != 1 || mine[0].MsgID != id("tunnel") {
		t.Fatalf("the tunnel's entries: %d of %d, %v", len(mine), n, err)
	}
}
