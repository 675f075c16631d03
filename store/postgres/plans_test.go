package postgres_test

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// genericPlan is the plan PostgreSQL caches for a prepared statement after
// a few executions, made now on one of the store's own connections.
func genericPlan(t *testing.T, s *postgres.Store, sql, exec string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var plan string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "PREPARE plan_probe AS "+sql); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE plan_probe"+exec)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan = strings.Join(lines, "\n")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DEALLOCATE plan_probe")
		return err
	})
	if err != nil {
		t.Fatalf("plan of %.60s…: %v", sql, err)
	}
	return plan
}

var planIndex = regexp.MustCompile(`(?:Index Scan|Index Only Scan) using (\w+) on records|Bitmap Index Scan on (records\w*)`)

// recordsAccess lists how a plan reaches rows of records: the indexes it
// scans, and "seq" for a sequential scan.
func recordsAccess(plan string) []string {
	var out []string
	for _, m := range planIndex.FindAllStringSubmatch(plan, -1) {
		out = append(out, m[1]+m[2])
	}
	if strings.Contains(plan, "Seq Scan on records") {
		out = append(out, "seq")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The statements that find one record keep to the index made for that in
// the plan a connection caches, however few records there were when the
// plan was made. A plan is made after a few executions, here while the box
// holds its first 30 records, and kept until autovacuum next analyzes the
// table: a plan that scanned the table, or an index on a column that does
// not pick one record, then read more with every record stored. With
// sequential scans allowed again (a URL may ask for it) the first plan is
// the one this test guards against.
func TestGenericPlansUseIndexes(t *testing.T) {
	statements := []struct {
		name, sql, exec string
		want            []string // the indexes the plan may use, no sequential scan
	}{
		{"GetRecord", postgres.SQLGetRecord, "('a', 'b')", []string{"records_pkey"}},
		{"Update", postgres.SQLUpdate, "('READED', 0, 0, '', 0, '', '', 0, '', 0, NULL, NULL, NULL, 0, 'a', 'READING', '', 'record.state', '', -1, '{INBOX}', 'b', '', '', '', '', '', '', '', 0, '', '', '', '')", []string{"records_pkey"}},
		{"Claim", postgres.SQLClaim, "('READING', 'L', 'h', 1, 1, 'o', 'INBOX', 'UNREAD', 0, '{INBOX}')", []string{"records_box_state", "records_pkey"}},
		{"PurgeGroupLog", postgres.SQLPurgeGroupLog, "(1, 10)", []string{"records_group_log", "records_pkey"}},
	}
	schema := newSchema(t)
	def := openStore(t, schema)
	for i := range 30 {
		if _, err := def.Apply(t.Context(), plan(fmt.Sprintf("few-%d", i), "did:test:few", model.Inbox, int64(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range statements {
		plan := genericPlan(t, def, st.sql, st.exec)
		if got := recordsAccess(plan); !slices.Equal(got, st.want) {
			t.Errorf("%s's generic plan reaches records by %v, want %v:\n%s", st.name, got, st.want, plan)
		}
	}

	seq := openWithParam(t, schema, "enable_seqscan", "on")
	if got := recordsAccess(genericPlan(t, seq, postgres.SQLGetRecord, "('a', 'b')")); !slices.Contains(got, "seq") {
		t.Errorf("with enable_seqscan=on in the URL, GetRecord's generic plan reaches records by %v; want the sequential scan this test guards against", got)
	}
}

// Scans are costed out only where plans are kept: with prepared statements
// (pgx's default), not when every statement is planned for its arguments,
// as PgBouncer in transaction mode needs, where a SET would stay behind on
// the pooler's connection for its next client.
func TestSeqScansOffOnlyWithPreparedStatements(t *testing.T) {
	schema := newSchema(t)
	exec := openWithParam(t, schema, "default_query_exec_mode", "exec")
	for _, c := range []struct {
		name string
		s    *postgres.Store
		want string
	}{{"prepared statements", openStore(t, schema), "off"}, {"default_query_exec_mode=exec", exec, "on"}} {
		var got string
		if err := postgres.Pool(c.s).QueryRow(t.Context(), "SHOW enable_seqscan").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("with %s, enable_seqscan is %s; want %s", c.name, got, c.want)
		}
	}
}

// openWithParam opens a store in schema with key=value added to the test
// URL's parameters.
func openWithParam(t *testing.T, schema, key, value string) *postgres.Store {
	t.Helper()
	u, err := url.Parse(testURL(t))
	if err != nil || u.Scheme == "" {
		t.Skipf("the test URL is not a postgres:// URL; cannot add %s to it", key)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	s, err := postgres.Open(t.Context(), u.String(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
