package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a dir?#%", "msg.db")
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// holdWriter blocks the writer with a write that waits for release, so
// the writes queued meanwhile run as one group.
func holdWriter(ctx context.Context, s *Store) (release func()) {
	hold, started := make(chan struct{}), make(chan struct{})
	go s.write(ctx, func(context.Context, *sql.Tx) error { close(started); <-hold; return nil }) //nolint:errcheck
	<-started
	return func() { close(hold) }
}

// breakTx is a write that rolls the writer's shared transaction back and
// fails, taking the rest of its group down with it.
func breakTx(_ context.Context, tx *sql.Tx) error {
	tx.Exec("ROLLBACK") //nolint:errcheck // the point: the shared transaction is gone
	return model.Conflict("x", "rolled the shared transaction back")
}

func rec(owner string, box model.BoxKind, msg, thread string, sortKey int64, tags ...string) model.Record {
	return model.Record{
		RecordID: model.RecordID(owner, box, msg, ""), Owner: owner, BoxKind: box, MsgID: msg,
		State: model.InitialState(box), ThreadKey: thread, SortKey: sortKey, Tags: tags,
		CreatedAtMS: sortKey, UpdatedAtMS: sortKey,
	}
}

func TestOpenPragmasAndMigrations(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at its path: %v", err)
	}
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "missing", "x.db"), Options{}); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing dir: %v", err)
	}
	var mode, sync string
	if err := s.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	if err := s.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != "1" {
		t.Fatalf("synchronous = %q, %v", sync, err)
	}
	// Migrations sort through files; the writer's own sorts stay in memory.
	var temp int
	if err := s.w.QueryRow("PRAGMA temp_store").Scan(&temp); err != nil || temp != 2 {
		t.Fatalf("writer temp_store = %d, %v; want 2 (MEMORY)", temp, err)
	}
	var qo int
	if err := s.r.QueryRow("PRAGMA query_only").Scan(&qo); err != nil || qo != 1 {
		t.Fatalf("reader query_only = %d, %v", qo, err)
	}
	if _, err := s.r.Exec("DELETE FROM tokens"); err == nil {
		t.Fatal("reader pool accepted a write")
	}
	// BEGIN IMMEDIATE: a write tx holds the write lock from its first
	// statement, so a second process cannot sneak a write in.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec("INSERT INTO tokens VALUES ('h', 'd', 'admin', 1)"); err == nil {
		t.Fatal("write succeeded while an immediate tx was open")
	}
	tx.Rollback()
	s.Close()

	s2, err := Open(ctx, path, Options{Synchronous: "full"})
	if err != nil {
		t.Fatal(err)
	}
	var v int
	s2.w.QueryRow("PRAGMA user_version").Scan(&v)
	if v != 16 {
		t.Fatalf("user_version = %d", v)
	}
	s2.w.Exec("PRAGMA user_version = 99")
	s2.Close()
	_, err = Open(ctx, path, Options{})
	if err == nil || !strings.Contains(err.Error(), "schema version 99 is newer than this msgcenter (knows 16)") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := Open(ctx, path, Options{Synchronous: "OFF"}); err == nil {
		t.Fatal("synchronous OFF accepted")
	}
}

func TestApplyClaimUpdate(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	r1 := rec("bob", model.Inbox, "m1", "t1", 10, "x", "y")
	r2 := rec("bob", model.Inbox, "m2", "t1", 20)
	idem := &store.Idempotency{Scope: "alice|dispatch", Key: "k1"}
	res, err := s.Apply(ctx, &store.Plan{MsgID: "m1", MsgBody: []byte(`{"a":1}`), NowMS: 5, Idem: idem,
		Records: []model.Record{r1, r2, r1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 2 || res.Created[0].Seq != 1 || res.Created[1].Seq != 2 ||
		len(res.Existing) != 1 || res.Existing[0] != r1.RecordID {
		t.Fatalf("apply: %+v", res)
	}
	r3 := rec("carol", model.Inbox, "m1", "t1", 30)
	if _, err = s.Apply(ctx, &store.Plan{MsgID: "m1", NowMS: 6, Idem: idem, Records: []model.Record{r2, r3}}); !errors.As(err, new(*store.KeyRepeated)) {
		t.Fatalf("re-apply: %v, want a repeat", err)
	}
	if _, err := s.GetRecord(ctx, r3.RecordID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a repeat wrote: %v", err)
	}
	_, err = s.Apply(ctx, &store.Plan{MsgID: "other", NowMS: 6, Idem: idem,
		Records: []model.Record{rec("bob", model.Inbox, "other", "", 1)}})
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("idem conflict: %v", err)
	}
	if _, err := s.GetRecord(ctx, rec("bob", model.Inbox, "other", "", 1).RecordID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("conflicting plan wrote: %v", err)
	}
	if _, err := s.Apply(ctx, &store.Plan{MsgID: "m1", NowMS: 7, ConsumeSchedule: 42}); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("consume missing schedule: %v", err)
	}
	got, err := s.GetRecord(ctx, r1.RecordID)
	if err != nil || got.Seq != 1 || len(got.Tags) != 2 || got.Lease != nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	if b, err := s.GetMessage(ctx, "m1"); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("message: %s %v", b, err)
	}
	conv, _ := s.ListConversations(ctx, store.ConversationQuery{Owner: "bob", Limit: 10})
	if len(conv) != 1 || conv[0].UnreadCount != 2 || conv[0].LastSeq != 2 {
		t.Fatalf("conversations: %+v", conv)
	}

	c, err := s.Claim(ctx, store.ClaimParams{Owner: "bob", Box: model.Inbox, From: model.Unread, To: model.Reading,
		NowMS: 100, LeaseID: "L1", Holder: "h", LeaseUntilMS: 400})
	if err != nil || c.RecordID != r1.RecordID || c.State != model.Reading || c.Lease == nil || c.Lease.ID != "L1" {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if exp, _ := s.ExpiredLeases(ctx, 400, 10); len(exp) != 1 {
		t.Fatalf("expired: %+v", exp)
	}
	if at, ok, _ := s.NextLeaseExpiry(ctx); !ok || at != 400 {
		t.Fatalf("next lease expiry %d %v", at, ok)
	}
	_, err = s.Update(ctx, &store.Update{RecordID: r1.RecordID, From: model.Reading, ExpectLeaseID: "nope",
		To: model.Readed, NowMS: 101})
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("wrong lease: %v", err)
	}
	_, err = s.Update(ctx, &store.Update{RecordID: "nope", From: model.Reading, To: model.Readed, NowMS: 101})
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	u, err := s.Update(ctx, &store.Update{RecordID: r1.RecordID, From: model.Reading, ExpectLeaseID: "L1",
		To: model.Readed, NowMS: 102, Delivery: model.Delivery{Attempts: 1}})
	if err != nil || u.State != model.Readed || u.Lease != nil || u.Delivery.Attempts != 1 || u.UpdatedAtMS != 102 {
		t.Fatalf("update: %+v %v", u, err)
	}
	conv, _ = s.ListConversations(ctx, store.ConversationQuery{Owner: "bob", Limit: 10})
	if conv[0].UnreadCount != 1 {
		t.Fatalf("unread after read: %+v", conv)
	}
	// Retry backoff: invisible until 500.
	_, err = s.Update(ctx, &store.Update{RecordID: r1.RecordID, From: model.Readed, To: model.Unread,
		VisibleAtMS: 500, NowMS: 103})
	if err != nil {
		t.Fatal(err)
	}
	c, err = s.Claim(ctx, store.ClaimParams{Owner: "bob", Box: model.Inbox, From: model.Unread, To: model.Reading, NowMS: 104})
	if err != nil || c.RecordID != r2.RecordID {
		t.Fatalf("claim skips invisible: %+v %v", c, err)
	}
	if _, err = s.Claim(ctx, store.ClaimParams{Owner: "bob", Box: model.Inbox, From: model.Unread, To: model.Reading, NowMS: 105}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("claim empty: %v", err)
	}
	if at, ok, _ := s.NextVisible(ctx, "bob", model.Inbox, model.Unread, 105); !ok || at != 500 {
		t.Fatalf("next visible %d %v", at, ok)
	}
	evs, _ := s.ListEvents(ctx, store.EventFilter{Owner: "bob"})
	if len(evs) != 6 || evs[0].Type != model.EventRecordCreated || evs[2].Type != model.EventRecordClaimed {
		t.Fatalf("events: %+v", evs)
	}
	page, _ := s.ListRecords(ctx, store.ListParams{Owner: "bob", Box: model.Inbox, Tag: "y", Limit: 10})
	if len(page) != 1 || page[0].RecordID != r1.RecordID {
		t.Fatalf("tag filter: %+v", page)
	}
	page, _ = s.ListRecords(ctx, store.ListParams{Owner: "bob", Box: model.Inbox, Desc: true, Limit: 10,
		CursorSortKey: 20, CursorRecordID: r2.RecordID})
	if len(page) != 1 || page[0].RecordID != r1.RecordID {
		t.Fatalf("desc cursor: %+v", page)
	}
}

func TestConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const n = 500
	var recs []model.Record
	for i := range n {
		recs = append(recs, rec("w", model.TunnelOutbox, fmt.Sprintf("m%d", i), "", int64(i)))
	}
	if _, err := s.Apply(ctx, &store.Plan{MsgID: "m", MsgBody: []byte("{}"), NowMS: 1, Records: recs}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := s.Claim(ctx, store.ClaimParams{Owner: "w", Box: model.TunnelOutbox, From: model.Wait,
					To: model.Sending, NowMS: 2, LeaseID: fmt.Sprint(g), LeaseUntilMS: 1000})
				if errors.Is(err, model.ErrNotFound) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Update(ctx, &store.Update{RecordID: r.RecordID, From: model.Sending,
					ExpectLeaseID: fmt.Sprint(g), To: model.Sent, NowMS: 3}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[r.RecordID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("claimed %d distinct records, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("%s claimed %d times", id, c)
		}
	}
	counts, _ := s.CountRecords(ctx)
	if len(counts) != 1 || counts[0].State != model.Sent || counts[0].Count != n {
		t.Fatalf("counts: %+v", counts)
	}
}

func TestScheduleContactsReceipts(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	e := &store.ScheduleEntry{Op: "dispatch", MsgID: "m1", MsgBody: []byte("{}"), Ctx: []byte(`{"x":1}`),
		Recipients: []string{"z", "a"}, DueAtMS: 50, CreatedAtMS: 1}
	id, created, err := s.Schedule(ctx, e, &store.Idempotency{Scope: "s", Key: "k"})
	if err != nil || !created {
		t.Fatal(id, created, err)
	}
	id2, created, err := s.Schedule(ctx, e, nil)
	if err != nil || created || id2 != id {
		t.Fatal(id2, created, err)
	}
	due, err := s.DueScheduled(ctx, store.DueParams{BeforeMS: 50, Recipient: "a", Limit: 10})
	if err != nil || len(due) != 1 || strings.Join(due[0].Recipients, ",") != "z,a" || string(due[0].Ctx) != `{"x":1}` {
		t.Fatalf("due: %+v %v", due, err)
	}
	if due, _ := s.DueScheduled(ctx, store.DueParams{BeforeMS: 49}); len(due) != 0 {
		t.Fatalf("early: %+v", due)
	}
	list, total, err := s.ListScheduled(ctx, store.ScheduleQuery{Limit: 10})
	if err != nil || total != 1 || len(list) != 1 {
		t.Fatal(list, total, err)
	}
	if _, err := s.Apply(ctx, &store.Plan{MsgID: "m1", NowMS: 60, ConsumeSchedule: id}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.NextDue(ctx); ok {
		t.Fatal("entry not consumed")
	}

	if err := s.SetGroupSubscribers(ctx, "g", nil, "", 1); err != nil {
		t.Fatal(err)
	}
	if subs, err := s.GroupSubscribers(ctx, "g"); err != nil || subs == nil || len(subs) != 0 {
		t.Fatal(subs, err)
	}
	if _, err := s.GroupSubscribers(ctx, "nog"); !errors.Is(err, model.ErrNotFound) {
		t.Fatal(err)
	}
	s.SetGroupSubscribers(ctx, "g", []string{"b", "a", "b"}, "", 2)
	if subs, _ := s.GroupSubscribers(ctx, "g"); strings.Join(subs, ",") != "a,b" {
		t.Fatal(subs)
	}
	s.SetBlock(ctx, "a", "spam", true, 1)
	s.SetBlock(ctx, "c", "spam", true, 1)
	s.SetBlock(ctx, "c", "spam", false, 1)
	if b, _ := s.BlockedBy(ctx, "spam", []string{"a", "b", "c"}); len(b) != 1 || !b["a"] {
		t.Fatal(b)
	}
	if r, _ := s.Routes(ctx, "x"); r == nil || len(r) != 0 {
		t.Fatal(r)
	}
	s.SetRoutes(ctx, "x", []model.ContactRoute{{TunnelDID: "t2", Priority: 2}, {TunnelDID: "t1"}}, 1)
	if r, _ := s.Routes(ctx, "x"); len(r) != 2 || r[0].TunnelDID != "t2" || r[0].Priority != 2 {
		t.Fatal(r)
	}

	put := func(at int64, st model.ReceiptStatus) model.Receipt {
		r, err := s.PutReceipt(ctx, model.Receipt{MsgID: "m1", Reader: "a", GroupID: "g", AtMS: at, Status: st}, at)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	put(10, model.ReceiptReaded)
	if r := put(5, model.ReceiptUnread); r.Status != model.ReceiptReaded || r.AtMS != 10 {
		t.Fatalf("older receipt won: %+v", r)
	}
	if rs, _ := s.ListReceipts(ctx, store.ReceiptFilter{GroupID: "g", Reader: "a"}); len(rs) != 1 {
		t.Fatal(rs)
	}
	s.PutToken(ctx, "h", model.Identity{DID: "d", Role: model.RoleAgent}, 1)
	if id, err := s.Token(ctx, "h"); err != nil || id.DID != "d" || id.Role != model.RoleAgent {
		t.Fatal(id, err)
	}
	if _, err := s.Token(ctx, "nope"); !errors.Is(err, model.ErrNotFound) {
		t.Fatal(err)
	}
}

// TestQueryPlans guards the hot queries against a schema change that
// silently turns them into scans or sorts.
func TestQueryPlans(t *testing.T) {
	s, _ := openTest(t)
	for _, c := range []struct{ q, want string }{
		{`SELECT rowid FROM records WHERE owner = 'a' AND box = 'b' AND state = 'c' AND visible_at_ms <= 1 ORDER BY seq LIMIT 1`, "records_box_state"},
		{`SELECT * FROM records WHERE owner = 'a' AND box = 'b' AND seq > 1 ORDER BY seq LIMIT 5`, "records_box_seq"},
		{`SELECT * FROM records WHERE owner = 'a' AND box = 'b' AND (sort_key, record_id) < (1, 'x') ORDER BY sort_key DESC, record_id DESC LIMIT 5`, "records_box_sort"},
		{`SELECT * FROM records WHERE lease_until_ms IS NOT NULL AND lease_until_ms <= 5 ORDER BY lease_until_ms LIMIT 5`, "records_lease"},
		{`SELECT owner FROM blocks WHERE blocked = 's' AND owner IN (SELECT value FROM json_each('["a"]'))`, "PRIMARY KEY"},
		{`SELECT * FROM conversations WHERE owner = 'a' ORDER BY updated_at_ms DESC, thread_key LIMIT 5`, "conversations_recent"},
		{`SELECT * FROM scheduled WHERE due_at_ms <= 5 ORDER BY due_at_ms, sched_id LIMIT 5`, "scheduled_due"},
		{sqlClaimable, "records_box_state (owner=? AND box=? AND state=?)"},
		{sqlNextVisible, "records_box_state (owner=? AND box=? AND state=?)"},
		// A record by id: next to the messages its id locates, else among
		// the ids that locate none.
		{`SELECT * FROM records WHERE rid = ` + ridParams(1, 2), "SEARCH records USING INTEGER PRIMARY KEY (rowid=?)"},
		{`SELECT * FROM records WHERE rid = ` + ridParams(1, 2), "SEARCH m USING COVERING INDEX messages_id (msg_id>? AND msg_id<?)"},
		{`SELECT * FROM records WHERE rid = ` + ridParams(1, 2), "SEARCH r USING COVERING INDEX records_msg (msg_ref=? AND record_id=?)"},
		{`SELECT * FROM records WHERE rid = ` + ridParams(1, 2), "SEARCH record_ids USING PRIMARY KEY (record_id=?)"},
		{bulkExists.sql(4), "SEARCH m USING COVERING INDEX messages_id (msg_id>? AND msg_id<?)"},
		{bulkExists.sql(4), "SEARCH r USING COVERING INDEX records_msg (msg_ref=? AND record_id=?)"},
		{bulkExists.sql(4), "SEARCH record_ids USING PRIMARY KEY (record_id=?)"},
		{bulkSeqs.sql(4), "SEARCH b USING PRIMARY KEY (owner=? AND box=?)"},
		{bulkSeqs.sql(4), "SEARCH r USING COVERING INDEX records_box_seq (owner=? AND box=?)"},
		{boxLastSeq, "SEARCH box_seqs USING PRIMARY KEY (owner=? AND box=?)"},
		{boxLastSeq, "SEARCH records USING COVERING INDEX records_box_seq (owner=? AND box=?)"},
		{`SELECT 1 FROM messages m JOIN records r ON r.msg_ref = m.msg_ref WHERE m.msg_id = ?1 AND r.owner = ?2`,
			"SEARCH r USING INDEX records_msg (msg_ref=?)"},
		{`SELECT 1 FROM messages WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.msg_ref = messages.msg_ref)`,
			"SEARCH r USING COVERING INDEX records_msg (msg_ref=?)"},
	} {
		args := make([]any, strings.Count(c.q, "?")) // the bulk statements' parameters
		for i := range args {
			args[i] = "x"
		}
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+c.q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			rows.Scan(&id, &parent, &unused, &detail)
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, c.want) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s\n  plan: %s", c.q, p)
		}
	}
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// TestGroupCommit queues writes behind a blocked one so they run as one
// group, and checks that a failing write, even one that kills the shared
// transaction, takes down only itself.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	release := holdWriter(ctx, s)
	const n = 24
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.write(ctx, func(_ context.Context, tx *sql.Tx) error {
				if _, err := tx.Exec("INSERT INTO tokens VALUES (?, 'd', 'agent', 1)", fmt.Sprint(i)); err != nil {
					return err
				}
				switch i {
				case 5:
					return model.Conflict("x", "refused")
				case 9:
					tx.Exec("ROLLBACK") // the whole shared transaction is gone
					return model.Conflict("x", "broke it")
				}
				return nil
			})
		}()
	}
	var groups []int
	s.onGroup = func(size int) { groups = append(groups, size) }
	// Give every writer time to block on the queue before the group forms.
	time.Sleep(200 * time.Millisecond)
	release()
	wg.Wait()
	t.Logf("groups: %v", groups)
	if len(groups) == 0 || groups[0] < 2 {
		t.Fatalf("no group formed: %v", groups)
	}
	for i, err := range errs {
		_, terr := s.Token(ctx, fmt.Sprint(i))
		switch i {
		case 5, 9:
			if !errors.Is(err, model.ErrConflict) || !errors.Is(terr, model.ErrNotFound) {
				t.Errorf("write %d: err %v, token %v", i, err, terr)
			}
		default:
			if err != nil || terr != nil {
				t.Errorf("write %d: err %v, token %v", i, err, terr)
			}
		}
	}
}
