package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/storetest"
)

// legacyRecordID is how record ids were made before they carried their
// message's locator (schema 4 and earlier).
func legacyRecordID(owner string, box model.BoxKind, msgID string) string {
	h := sha256.New()
	for _, p := range []string{owner, string(box), msgID, ""} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "cyrec:" + hex.EncodeToString(h.Sum(nil)[:16])
}

func testMsgID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "cymsg:" + hex.EncodeToString(sum[:])
}

// openV4 creates a database at schema 4 holding what a server of that
// time wrote: two bodies, three records with old ids (one of a message
// whose body was never stored), their box counter and a conversation.
func openV4(t *testing.T) (path string, m1, m2, m3 string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "v4.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:4] {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	m1, m2, m3 = testMsgID("one"), testMsgID("two"), testMsgID("three (no body)")
	stmts := []struct {
		q    string
		args []any
	}{
		{`PRAGMA user_version = 4`, nil},
		{`INSERT INTO messages (msg_id, body, created_at_ms) VALUES (?, CAST('{"n":1}' AS BLOB), 10), (?, CAST('{"n":2}' AS BLOB), 20)`, []any{m1, m2}},
		{`INSERT INTO records (record_id, owner, box, msg_id, state, seq, created_at_ms, updated_at_ms, sort_key, thread_key)
			VALUES (?, 'did:bob', 'INBOX', ?, 'UNREAD', 1, 10, 10, 10, 't'),
			       (?, 'did:bob', 'INBOX', ?, 'READED', 2, 20, 25, 20, 't'),
			       (?, 'did:bob', 'INBOX', ?, 'UNREAD', 3, 30, 30, 30, 't')`,
			[]any{legacyRecordID("did:bob", model.Inbox, m1), m1, legacyRecordID("did:bob", model.Inbox, m2), m2,
				legacyRecordID("did:bob", model.Inbox, m3), m3}},
		{`INSERT INTO box_seqs (owner, box, last_seq) VALUES ('did:bob', 'INBOX', 3)`, nil},
	}
	for _, s := range stmts {
		if _, err := db.Exec(s.q, s.args...); err != nil {
			t.Fatalf("%s: %v", s.q, err)
		}
	}
	return path, m1, m2, m3
}

// TestMigrationKeepsOldRecordIDs opens a schema 4 database: every record
// keeps its id, seq and state, and is found, changed and deleted by its
// old id; the same message sent again finds its old record instead of
// making a second; new records are found by their located ids alone.
func TestMigrationKeepsOldRecordIDs(t *testing.T) {
	ctx := context.Background()
	path, m1, m2, m3 := openV4(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	old1 := legacyRecordID("did:bob", model.Inbox, m1)
	r, err := s.GetRecord(ctx, old1)
	if err != nil || r.RecordID != old1 || r.Seq != 1 || r.State != model.Unread || r.MsgID != m1 {
		t.Fatalf("GetRecord(old id) = %+v, %v", r, err)
	}
	// The id the record would have today finds it too (the old id is its
	// prefix): what the core derives when the message comes again.
	if r, err := s.GetRecord(ctx, model.RecordID("did:bob", model.Inbox, m1, "")); err != nil || r.RecordID != old1 {
		t.Fatalf("GetRecord(new id of an old record) = %+v, %v", r, err)
	}
	if _, err := s.Update(ctx, &store.Update{RecordID: old1, From: model.Unread, To: model.Readed, NowMS: 40,
		EventType: model.EventRecordState}); err != nil {
		t.Fatalf("Update(old id): %v", err)
	}
	if _, err := s.Update(ctx, &store.Update{RecordID: old1, From: model.Unread, To: model.Readed, NowMS: 41}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("Update(old id) from a state it left: %v, want a conflict", err)
	}

	// Sent again (the core derives today's ids): nothing new.
	again := rec("did:bob", model.Inbox, m2, "t", 50)
	res, err := s.Apply(ctx, &store.Plan{MsgID: m2, MsgBody: []byte(`{"n":2}`), NowMS: 50, Records: []model.Record{again}})
	if err != nil || len(res.Created) != 0 || len(res.Existing) != 1 {
		t.Fatalf("Apply of a message stored before the migration: %+v, %v", res, err)
	}
	// The message whose body was never stored is a stub: not readable,
	// its record still is, and a body given later fills it in.
	if _, err := s.GetMessage(ctx, m3); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage(no body) = %v, want not found", err)
	}
	if ok, err := s.CanReadMessage(ctx, "did:bob", m3); err != nil || !ok {
		t.Fatalf("CanReadMessage(did:bob, m3) = %v, %v", ok, err)
	}
	res, err = s.Apply(ctx, &store.Plan{MsgID: m3, MsgBody: []byte(`{"n":3}`), NowMS: 55,
		Records: []model.Record{rec("did:bob", model.Inbox, m3, "t", 55)}})
	if err != nil || len(res.Existing) != 1 {
		t.Fatalf("Apply(m3 with its body): %+v, %v", res, err)
	}
	if b, err := s.GetMessage(ctx, m3); err != nil || string(b) != `{"n":3}` {
		t.Fatalf("GetMessage(m3) after its body came = %q, %v", b, err)
	}

	// A new message: seqs go on, the id is located, record_ids stays as it was.
	m4 := testMsgID("four")
	fresh := rec("did:bob", model.Inbox, m4, "t", 60)
	res, err = s.Apply(ctx, &store.Plan{MsgID: m4, MsgBody: []byte(`{"n":4}`), NowMS: 60, Records: []model.Record{fresh}})
	if err != nil || len(res.Created) != 1 || res.Created[0].Seq != 4 {
		t.Fatalf("Apply(new message) = %+v, %v", res, err)
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	var filed int
	if err := s.r.QueryRow(`SELECT count(*) FROM record_ids`).Scan(&filed); err != nil || filed != 3 {
		t.Fatalf("record_ids holds %d ids (%v), want the 3 old ones", filed, err)
	}
	if got, err := s.GetRecord(ctx, fresh.RecordID); err != nil || got.Seq != 4 {
		t.Fatalf("GetRecord(new id) = %+v, %v", got, err)
	}
	recs, err := s.Sync(ctx, store.SyncParams{Owner: "did:bob", Box: model.Inbox, Limit: 10})
	if err != nil || len(recs) != 4 {
		t.Fatalf("Sync = %d records, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("Sync: record %d has seq %d", i, r.Seq)
		}
	}

	// Retention takes an old record's id with it.
	pr, err := s.Purge(ctx, store.PurgeParams{NowMS: 100, TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: 100}, MessagesBeforeMS: 100})
	if err != nil || pr.Records[model.Inbox] != 2 {
		t.Fatalf("Purge = %+v, %v (want the two READED records)", pr, err)
	}
	if err := s.r.QueryRow(`SELECT count(*) FROM record_ids`).Scan(&filed); err != nil || filed != 1 {
		t.Fatalf("record_ids holds %d ids after the purge (%v), want 1", filed, err)
	}
	if _, err := s.GetRecord(ctx, old1); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetRecord(purged) = %v", err)
	}
	if _, err := s.GetMessage(ctx, m1); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage(body of purged records) = %v", err)
	}
}

// TestMigrationKeepsCountersAheadOfRecords: a store of schema 4 whose box
// counter is past its highest record (retention deleted the newest)
// keeps handing out seqs after the counter once inserts no longer write
// it (0006).
func TestMigrationKeepsCountersAheadOfRecords(t *testing.T) {
	ctx := context.Background()
	path, _, _, _ := openV4(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE box_seqs SET last_seq = 5 WHERE owner = 'did:bob' AND box = 'INBOX'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openPath(t, path, Options{})
	if last, err := s.BoxLastSeq(ctx, "did:bob", model.Inbox); err != nil || last != 5 {
		t.Fatalf("BoxLastSeq after the upgrade = %d, %v; want the counter's 5", last, err)
	}
	res, err := s.Apply(ctx, sendPlan(7, "did:alice", []string{"did:bob"}, 100))
	if err != nil || len(res.Created) != 2 || res.Created[1].Owner != "did:bob" || res.Created[1].Seq != 6 {
		t.Fatalf("send after the upgrade = %+v, %v; want did:bob's record at seq 6", res, err)
	}
}

// Migration 0009 names the sender of the entries stored before it: a
// post_send's source, else its from; a dispatch's ingress tunnel; nobody
// when neither is there.
func TestMigrationNamesScheduledSenders(t *testing.T) {
	db, path := dbAtVersion(t, 8)
	for i, e := range storetest.ScheduledSenderCases {
		m := storetest.ScheduledSenderMsgID(e.Name)
		var ctx any
		if e.Ctx != "" {
			ctx = []byte(e.Ctx)
		}
		if _, err := db.Exec(`INSERT INTO messages (msg_id, body, created_at_ms) VALUES (?, ?, 1)`, m, []byte(e.Body)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO scheduled (op, msg_id, ctx, due_at_ms, created_at_ms) VALUES (?, ?, ?, ?, 1)`,
			e.Op, m, ctx, 100+i); err != nil {
			t.Fatal(err)
		}
	}
	storetest.RequireScheduledSenders(t, openAtVersion(t, db, path, 8))
}

// Migration 0013 clears the last record of the conversations whose record
// retention deleted before it cleared them itself.
func TestMigrationForgetsGoneRecordsInConversations(t *testing.T) {
	db, path := dbAtVersion(t, 12)
	for _, c := range storetest.GoneRecordCases {
		m, rec := storetest.GoneRecordMsgID(c.Name), storetest.GoneRecordID(c.Owner, c.Name)
		if c.Stored {
			res, err := db.Exec(`INSERT INTO messages (msg_id, body, created_at_ms) VALUES (?, X'7B7D', 1)`, m)
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := res.LastInsertId()
			if _, err := db.Exec(`INSERT INTO records (record_id, owner, box, msg_id, state, seq, created_at_ms,
				updated_at_ms, sort_key, thread_key, msg_ref) VALUES (?, ?, 'INBOX', ?, 'UNREAD', 1, 1, 1, 1, ?, ?)`,
				rec, c.Owner, m, c.Thread, ref); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(`INSERT INTO conversations (owner, thread_key, last_msg_id, last_record_id, last_box,
			last_seq, unread_count, updated_at_ms) VALUES (?, ?, ?, ?, 'INBOX', 1, 1, 1)`, c.Owner, c.Thread, m, rec); err != nil {
			t.Fatal(err)
		}
	}
	storetest.RequireGoneRecordsForgotten(t, openAtVersion(t, db, path, 12))
}

// dbAtVersion creates a database with the first n migrations applied, as
// a server of that time left it, for the test to fill before
// openAtVersion.
func dbAtVersion(t *testing.T, n int) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", n))
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:n] {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	return db, path
}

// openAtVersion marks db as at version n, closes it and opens it as a
// Store, which applies the later migrations.
func openAtVersion(t *testing.T, db *sql.DB, path string, n int) *Store {
	t.Helper()
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, n)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
