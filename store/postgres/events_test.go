package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// The event log's cursor (see events.go): an event must never be listed
// while an event with a lower id can still commit, or a reader paging by
// event id would pass the lower one for good. The concurrent version of
// this, through the driver only, is storetest's EventCursorUnderWrites.

// insertEvent appends an event in tx, through the table's default like
// every writer of the driver, and returns its id.
func insertEvent(t *testing.T, tx pgx.Tx, owner string) int64 {
	t.Helper()
	var id int64
	if err := tx.QueryRow(t.Context(), `INSERT INTO events (type, owner, at_ms) VALUES ('test.raw', $1, $2)
		RETURNING event_id`, owner, testBase).Scan(&id); err != nil {
		t.Fatalf("insert event: %v", err)
	}
	return id
}

func eventIDs(evs []model.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.EventID
	}
	return out
}

func listEvents(t *testing.T, s store.Store, f store.EventFilter) []model.Event {
	t.Helper()
	evs, err := s.ListEvents(t.Context(), f)
	if err != nil {
		t.Fatalf("ListEvents(%+v): %v", f, err)
	}
	return evs
}

// A transaction holding event id h is in flight; another commits a higher
// id c. ListEvents must not return c (nor anything from h on) until the
// first ends, waiting at most eventWait; then a reader continuing from its
// cursor gets h (unless it rolled back) and c, in id order.
func TestEventsNotPastWriterInFlight(t *testing.T) {
	const owner, other = "did:test:alice", "did:test:bob"
	for _, tc := range []struct {
		name string
		// olderCommits: the transaction that commits c got its
		// transaction id before the one holding h (so c's is the lower
		// transaction id, h's the lower event id).
		olderCommits bool
		rollback     bool
	}{
		{name: "HolderIsOlder"},
		{name: "HolderIsNewer", olderCommits: true},
		{name: "HolderRollsBack", rollback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a schema and a store each; mostly waiting
			schema := newSchema(t)
			s := openStore(t, schema)
			// Long enough that a call which did not wait for a writer
			// returns well inside it even on a loaded host under -race (CI
			// saw 318 and 718 ms with 300 ms), so that only a wait for a
			// writer takes this long.
			const wait = time.Second
			postgres.SetEventWait(s, wait)
			if _, err := s.Apply(t.Context(), plan("before", owner, model.Inbox, testBase)); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			before := listEvents(t, s, store.EventFilter{Limit: 100})
			if len(before) != 1 {
				t.Fatalf("ListEvents after one Apply = %v, want one event", eventIDs(before))
			}
			cursor := before[0].EventID

			var older pgx.Tx
			if tc.olderCommits {
				older = schemaTx(t, schema)
				mustExec(t, older, "SELECT pg_current_xact_id()")
			}
			holder := schemaTx(t, schema)
			h := insertEvent(t, holder, other)
			var c int64
			if tc.olderCommits {
				c = insertEvent(t, older, owner)
				if err := older.Commit(t.Context()); err != nil {
					t.Fatalf("commit: %v", err)
				}
			} else {
				if _, err := s.Apply(t.Context(), plan("after", owner, model.Inbox, testBase+1)); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				// Read behind the driver's back: the row is committed.
				if err := adminPool(t).QueryRow(t.Context(), "SELECT max(event_id) FROM "+
					pgx.Identifier{schema, "events"}.Sanitize()).Scan(&c); err != nil {
					t.Fatalf("read the last event id: %v", err)
				}
			}
			if c <= h {
				t.Fatalf("committed event %d, in flight %d: the test needs the lower id in flight", c, h)
			}

			for _, f := range []store.EventFilter{{Limit: 100}, {After: cursor, Limit: 100}, {Owner: owner, Limit: 100}} {
				start := time.Now()
				got := listEvents(t, s, f)
				if slices.ContainsFunc(got, func(e model.Event) bool { return e.EventID >= h }) {
					t.Fatalf("ListEvents(%+v) = ids %v while event %d is in flight", f, eventIDs(got), h)
				}
				if f.After == 0 && (len(got) != 1 || got[0].EventID != cursor) {
					t.Fatalf("ListEvents(%+v) = ids %v, want the committed prefix [%d]", f, eventIDs(got), cursor)
				}
				if d := time.Since(start); d < wait || d > 10*wait {
					t.Fatalf("ListEvents(%+v) took %v; want the wait (%v), then the committed prefix", f, d, wait)
				}
			}

			want := []int64{h, c}
			if tc.rollback {
				if err := holder.Rollback(t.Context()); err != nil {
					t.Fatalf("rollback: %v", err)
				}
				want = []int64{c}
			} else if err := holder.Commit(t.Context()); err != nil {
				t.Fatalf("commit: %v", err)
			}
			start := time.Now()
			got := listEvents(t, s, store.EventFilter{After: cursor, Limit: 100})
			if !slices.Equal(eventIDs(got), want) {
				t.Fatalf("ListEvents(after %d) once the writer ended = ids %v, want %v", cursor, eventIDs(got), want)
			}
			if d := time.Since(start); d >= wait {
				t.Fatalf("ListEvents with no writer in flight took %v", d)
			}
		})
	}
}

// Only writers of this schema's events hold the log back: a long
// transaction elsewhere (another table, or another schema's event log)
// does not.
func TestEventsIgnoreOtherTransactions(t *testing.T) {
	const owner = "did:test:alice"
	schema, elsewhere := newSchema(t), newSchema(t)
	s := openStore(t, schema)
	openStore(t, elsewhere) // creates its tables
	postgres.SetEventWait(s, time.Minute)

	otherLog := schemaTx(t, elsewhere)
	insertEvent(t, otherLog, owner)
	otherTable := schemaTx(t, schema)
	mustExec(t, otherTable, "INSERT INTO groups (group_did, updated_at_ms) VALUES ('did:test:g', 1)")

	start := time.Now()
	if _, err := s.Apply(t.Context(), plan("mine", owner, model.Inbox, testBase)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := listEvents(t, s, store.EventFilter{Owner: owner, Limit: 100})
	if len(got) != 1 || got[0].Type != model.EventRecordCreated {
		t.Fatalf("ListEvents = %v, want the one record.created", eventIDs(got))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Apply and ListEvents took %v: other transactions held the event log back", d)
	}
}

// The wait for a writer in flight ends with the caller's context.
func TestEventsWaitRespectsContext(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	postgres.SetEventWait(s, time.Minute)
	holder := schemaTx(t, schema)
	insertEvent(t, holder, "did:test:bob")
	if _, err := s.Apply(t.Context(), plan("after", "did:test:alice", model.Inbox, testBase)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 100})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ListEvents with a writer in flight and a 200ms context = ids %v, %v; want the context's error",
			eventIDs(evs), err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ListEvents returned %v after its context ended", d)
	}
}

// Migration 0003 turns the identity column into a sequence default: a
// database that already has events keeps counting from where it was, past
// ids whose events are gone.
func TestEventIDsSurviveMigration(t *testing.T) {
	schema, tx := schemaAtVersion(t, 2)
	for range 5 {
		insertEvent(t, tx, "did:test:old")
	}
	mustExec(t, tx, "DELETE FROM events WHERE event_id >= 4") // the newest, as if purged
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("commit: %v", err)
	}

	s := openStore(t, schema) // applies 0003
	if vs := schemaVersions(t, schema); len(vs) < 3 {
		t.Fatalf("schema_migrations = %v after Open, want 0003 applied", vs)
	}
	if _, err := s.Apply(t.Context(), plan("new", "did:test:new", model.Inbox, testBase)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := listEvents(t, s, store.EventFilter{Limit: 100})
	if !slices.Equal(eventIDs(got), []int64{1, 2, 3, 6}) {
		t.Fatalf("event ids after the migration = %v, want [1 2 3 6]: old ids kept, no id reused", eventIDs(got))
	}
}
