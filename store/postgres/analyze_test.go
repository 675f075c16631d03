package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/store/postgres"
)

// A box whose records were all read: a claimer's probe for an unread one
// should cost the few unread entries of records_box_state, not every
// record the box ever had. Without statistics (a new database, before
// autovacuum's first ANALYZE) PostgreSQL walks another index of the box;
// the store analyzes a table once it has grown, and the probe is cheap.
func TestGrownTablesAreAnalyzed(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	postgres.StopUpkeep(s)
	ctx := t.Context()
	tx := schemaTx(t, schema)
	mustExec(t, tx, `INSERT INTO records (record_id, owner, box, msg_id, state, seq, created_at_ms, updated_at_ms, sort_key)
		SELECT 'cyrec:big' || g, 'did:test:big', 'INBOX', 'cymsg:big' || g, 'READED', g, 0, 0, g
		FROM generate_series(1, 3000) g`)
	// Counts reach the statistics when the backend next reports, which an
	// idle one does only every 10 s unless asked (PostgreSQL 15 and later).
	mustExec(t, tx, "SELECT pg_stat_force_next_flush()")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	const probe = `EXPLAIN SELECT EXISTS (SELECT 1 FROM records
		WHERE owner = 'did:test:big' AND box = 'INBOX' AND state = 'UNREAD' AND visible_at_ms <= 1)`
	plan := func() string {
		rows, err := postgres.Pool(s).Query(ctx, probe)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if p := plan(); strings.Contains(p, "records_box_state") {
		t.Fatalf("before any ANALYZE the probe should walk another index over the whole box (what this test guards against), got:\n%s", p)
	}

	var analyzed []string
	for deadline := time.Now().Add(15 * time.Second); !slices.Contains(analyzed, "records"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("records (3,000 rows, never analyzed) was not analyzed; last run analyzed %v", analyzed)
		}
		var err error
		if analyzed, err = postgres.AnalyzeGrown(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if p := plan(); !strings.Contains(p, "using records_box_state") || strings.Count(p, " using ") != 1 {
		t.Fatalf("after ANALYZE the probe should use records_box_state alone, got:\n%s", p)
	}
	if again, err := postgres.AnalyzeGrown(ctx, s); err != nil || slices.Contains(again, "records") {
		t.Fatalf("a second look analyzed %v (%v); records has not grown since", again, err)
	}
	var n int64
	if err := adminPool(t).QueryRow(ctx, fmt.Sprintf(`SELECT analyze_count FROM pg_stat_user_tables
		WHERE schemaname = '%s' AND relname = 'records'`, schema)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("records analyzed %d times (%v), want once", n, err)
	}
}
