package sqlite

import (
	"context"
	"database/sql"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// The retention index only helps if its state list is the query's, word
// for word, and both must be model.State.IsTerminal's.
func TestRetentionStatesMatchModel(t *testing.T) {
	var want []string
	for _, st := range model.States {
		if st.IsTerminal() {
			want = append(want, "'"+string(st)+"'")
		}
	}
	got := strings.Split(terminalStates, ", ")
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("terminalStates = %v, model's terminal states are %v", got, want)
	}
	// The index as the migrations left it (0002 made it, 0005 made it
	// again on the rebuilt table).
	s, _ := openTest(t)
	var def string
	if err := s.r.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'records_retention'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(def, "WHERE state IN ("+terminalStates+")") {
		t.Fatalf("records_retention is %q: not exactly state IN (%s)", def, terminalStates)
	}
}

// queryPlan returns EXPLAIN QUERY PLAN's details for q, one line each.
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.w.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	return b.String()
}

// Purge's statements walk indexes, never a whole table of records.
func TestPurgePlans(t *testing.T) {
	s, _ := openTest(t)
	q, args := terminalQuery(map[model.BoxKind]int64{model.Inbox: 5, model.ConsumerFamily: 7}, 10)
	for _, c := range []struct {
		name, plan string
		want       []string
	}{
		{"terminal", queryPlan(t, s, q, args...), []string{"USING INDEX records_retention", "USING INDEX consumers_source"}},
		{"acked", queryPlan(t, s, ackedQuery, 10), []string{"USING INDEX records_box_seq", "USING INDEX consumers_source"}},
		{"group log", queryPlan(t, s, groupLogQuery, 5, 10), []string{"USING INDEX records_group_log", "USING INDEX consumers_source"}},
		{"idempotency keys", queryPlan(t, s, keysQuery, 5, 10), []string{"USING COVERING INDEX idempotency_age", "USING PRIMARY KEY"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.plan, w) {
				t.Errorf("%s purge plan lacks %q:\n%s", c.name, w, c.plan)
			}
		}
		if strings.Contains(c.plan, "SCAN r") {
			t.Errorf("%s purge plan scans records:\n%s", c.name, c.plan)
		}
	}
}

// A database made by the previous version gains the new schema on Open
// and keeps its data.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{ms[0].SQL, "PRAGMA user_version = 1",
		`INSERT INTO messages VALUES ('m1', X'7B7D', 1)`,
		`INSERT INTO records (record_id, owner, box, msg_id, state, seq, created_at_ms, updated_at_ms, sort_key)
			VALUES ('r1', 'bob', 'INBOX', 'm1', 'READED', 1, 1, 1, 1)`,
		`INSERT INTO box_seqs VALUES ('bob', 'INBOX', 1)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.w.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(ms) {
		t.Fatalf("user_version = %d, %v; want %d", v, err, len(ms))
	}
	c := &model.Consumer{Owner: "alice", Name: "c", SourceOwner: "bob", SourceBox: model.Inbox, CreatedAtMS: 5}
	if err := s.CreateConsumer(ctx, c, true); err != nil || c.SourceSeq != 1 {
		t.Fatalf("CreateConsumer on a migrated database: SourceSeq %d, %v", c.SourceSeq, err)
	}
	res, err := s.Purge(ctx, store.PurgeParams{NowMS: 10, MessagesBeforeMS: 10, Limit: 10,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: 10}})
	if err != nil || !maps.Equal(res.Records, map[model.BoxKind]int64{model.Inbox: 1}) || res.Messages != 1 {
		t.Fatalf("Purge on a migrated database = %+v, %v; want the old record and its body", res, err)
	}
}

// Writes issued together share one transaction (commit.go); a consumer
// write that fails inside such a group must roll back only itself.
func TestConsumerWritesInGroup(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateConsumer(ctx, &model.Consumer{Owner: "a", Name: "c", SourceOwner: "b", SourceBox: model.Inbox}, false); err != nil {
		t.Fatal(err)
	}
	rec := rec("a", model.ConsumerBox("c"), "m", "", 1)
	groups := 0
	s.onGroup = func(int) { groups++ }
	// Block the writer so the next writes queue up and run as one group.
	release := holdWriter(ctx, s)
	errs := make(chan error, 3)
	go func() {
		_, err := s.AdvanceConsumer(ctx, &store.ConsumerAdvance{Owner: "a", Name: "c", FromSourceSeq: 7, ToSourceSeq: 8,
			Records: []model.Record{rec}, NowMS: 2})
		errs <- err
	}()
	go func() {
		_, err := s.AdvanceConsumer(ctx, &store.ConsumerAdvance{Owner: "a", Name: "c", FromSourceSeq: 0, ToSourceSeq: 1,
			Records: []model.Record{rec}, NowMS: 2})
		errs <- err
	}()
	go func() { _, err := s.AckConsumer(ctx, "a", "nope", 1, 3); errs <- err }()
	// Give the writers time to queue so they run as one group (as
	// TestGroupCommit does); the outcome must be the same either way.
	time.Sleep(100 * time.Millisecond)
	release()
	var conflicts, notFound, ok int
	for range 3 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case strings.Contains(err.Error(), "examined its source"):
			conflicts++
		case strings.Contains(err.Error(), "not found"):
			notFound++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 1 || conflicts != 1 || notFound != 1 {
		t.Fatalf("ok %d, conflicts %d, not found %d; want 1 each", ok, conflicts, notFound)
	}
	t.Logf("groups formed: %d", groups)
	c, err := s.GetConsumer(ctx, "a", "c")
	if err != nil || c.SourceSeq != 1 {
		t.Fatalf("consumer = %+v, %v; want SourceSeq 1", c, err)
	}
	if r, err := s.GetRecord(ctx, rec.RecordID); err != nil || r.Seq != 1 {
		t.Fatalf("record = %+v, %v; want seq 1", r, err)
	}
}

// TestSeqsContinueAfterPurgeAndReopen: a writer that does not remember a
// box (a new process) takes its last seq from box_seqs once retention has
// deleted the box's newest records (migration 0006), so the next record
// gets the seq after the deleted ones and not the one after the highest
// left.
func TestSeqsContinueAfterPurgeAndReopen(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	for n := 1; n <= 3; n++ {
		p := sendPlan(n, "did:a", []string{"did:b"}, int64(n))
		if n > 1 {
			p.Records[1].State = model.Readed // did:b's INBOX record
		}
		if _, err := s.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Purge(ctx, store.PurgeParams{NowMS: 1000, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: 100}})
	if err != nil || res.Records[model.Inbox] != 2 {
		t.Fatalf("Purge = %+v, %v; want did:b's two newest INBOX records gone", res, err)
	}
	s.Close()

	// The send first: its seqs come from the writer's own probe, and
	// BoxLastSeq's is another query.
	s = openPath(t, path, Options{})
	p := sendPlan(4, "did:a", []string{"did:b"}, 4)
	got, err := s.Apply(ctx, p)
	if err != nil || len(got.Created) != 2 {
		t.Fatalf("send after the restart: %+v, %v", got, err)
	}
	if r := got.Created[1]; r.Owner != "did:b" || r.Seq != 4 {
		t.Fatalf("did:b's record after the purge and a restart: %s seq %d, want did:b seq 4", r.Owner, r.Seq)
	}
	if r := got.Created[0]; r.Seq != 4 { // did:a's OUTBOX kept every record
		t.Fatalf("did:a's OUTBOX record has seq %d, want 4", r.Seq)
	}
	if last, err := s.BoxLastSeq(ctx, "did:b", model.Inbox); err != nil || last != 4 {
		t.Fatalf("BoxLastSeq after the purge, a restart and a send = %d, %v; want 4", last, err)
	}
}

// TestSeqTriggerInPlace: the trigger that keeps a deleted record's seq
// (migration 0006) is on records as the migrations leave them, and no
// statement of the driver writes records with REPLACE, whose deletions
// would pass it by.
func TestSeqTriggerInPlace(t *testing.T) {
	s, _ := openTest(t)
	var tbl string
	if err := s.r.QueryRow(`SELECT tbl_name FROM sqlite_master WHERE type = 'trigger' AND name = 'records_keep_seq'`).Scan(&tbl); err != nil || tbl != "records" {
		t.Fatalf("trigger records_keep_seq: on %q, %v; want it on records", tbl, err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the package's files: %v, %v", files, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(strings.Fields(strings.ToUpper(string(src))), " "), "REPLACE INTO RECORDS") {
			t.Errorf("%s writes records with REPLACE", f)
		}
	}
}

// No partial index of records may be conditioned on an equality with a
// constant: SQLite then re-plans, every time it runs, each statement that
// compares that column with a bound parameter (a claim's box = ?), since
// the value might make the index usable (migration 0007). Nor on a
// function call (GLOB, LIKE, …): one might fail, so SQLite gives every
// multi-row insert into records a statement journal (migration 0014). An
// IN list of several constants or a BETWEEN of constants does neither
// (measured with sqlite3_stmt_status: a claim's box = ? re-prepared on
// every run against box = 'X' and box IN ('X'), never against the GLOB or
// the BETWEEN).
func TestPartialIndexesNeedNoReplan(t *testing.T) {
	s, _ := openTest(t)
	rows, err := s.r.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' AND sql LIKE '% WHERE %'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	// an equality, also as == or as an IN list of one (SQLite reads it as
	// an equality)
	eq := regexp.MustCompile(`(?i)\bWHERE\b.*(\b\w+\s*==?\s*'|\bIN\s*\(\s*'[^',]*'\s*\))`)
	call := regexp.MustCompile(`(?i)\b(GLOB|LIKE|REGEXP|MATCH)\b|\b(\w+)\s*\(`)
	n := 0
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		n++
		if eq.MatchString(def) {
			t.Errorf("partial index %s is conditioned on an equality: %s", name, def)
		}
		_, cond, _ := strings.Cut(strings.ToUpper(def), " WHERE ")
		for _, m := range call.FindAllStringSubmatch(cond, -1) {
			if m[1] != "" || m[2] != "IN" {
				t.Errorf("partial index %s is conditioned on a function call (%s): %s", name, m[0], def)
			}
		}
	}
	if n < 3 { // records_lease, records_retention, records_group_log
		t.Fatalf("found %d partial indexes of records, want at least 3", n)
	}
}
