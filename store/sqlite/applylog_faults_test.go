package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Failures around the apply log: lost transactions, failing files, a
// second Store, cancelled callers, logs that cannot be replayed.

// TestLostTransactionKeepsLoggedSends: when the shared transaction is lost
// (here a write rolls it back), the sends already answered from it are
// applied again before anything else runs, with the same seqs.
func TestLostTransactionKeepsLoggedSends(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	var created []model.Record
	for i := range 4 {
		res, err := s.Apply(ctx, sendPlan(i, "did:a", []string{"did:b"}, int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, res.Created...)
	}
	if !s.uncommitted.Load() {
		t.Fatal("the sends were committed already: the test loses nothing")
	}
	err := s.write(ctx, breakTx)
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("the breaking write: %v", err)
	}
	for _, c := range created {
		if r, err := s.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
			t.Fatalf("answered record %s after the transaction was lost: %+v, %v", c.RecordID, r, err)
		}
	}
	evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 100})
	if err != nil || len(evs) != len(created) {
		t.Fatalf("%d events, %v; want one per record (%d)", len(evs), err, len(created))
	}
	if _, err := s.Apply(ctx, sendPlan(9, "did:a", []string{"did:b"}, 9)); err != nil {
		t.Fatalf("a send after the recovery: %v", err)
	}
}

// TestFailedInsertLeavesNoRecords: the bulk inserts run without SQLite's
// statement journal (INSERT OR FAIL, bulk.go), so a row that fails leaves
// the rows before it in the transaction. Whoever runs them must then drop
// the whole transaction, or roll back to a savepoint before them: a send
// whose third record collides stores none of its four, in the shared
// transaction and when it runs again alone.
func TestFailedInsertLeavesNoRecords(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	before, err := s.Apply(ctx, sendPlan(1, "did:z", []string{"did:y"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	p := sendPlan(2, "did:a", []string{"did:b", "did:c", "did:d"}, 2)
	// A row elsewhere under the id of the send's third record (did:c's) and
	// the number its message will get (the next after the first send's):
	// records_msg is unique, and the writer does not probe the records of
	// a message it has just stored (seqcache.go).
	if err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO records (record_id, owner, box, msg_id, state, seq,
				created_at_ms, updated_at_ms, sort_key, msg_ref)
			VALUES (?, 'did:squatter', 'INBOX', 'cymsg:squatter', 'UNREAD', 1, 1, 1, 1,
				(SELECT max(msg_ref) + 1 FROM messages))`, p.Records[2].RecordID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, p); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("a send colliding with a stored record: %v, want a UNIQUE constraint error", err)
	}
	for _, r := range p.Records {
		if got, err := s.GetRecord(ctx, r.RecordID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("record of the failed send in %s's %s: %+v, %v; want none", r.Owner, r.BoxKind, got, err)
		}
	}
	evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 100})
	if err != nil || len(evs) != len(before.Created) {
		t.Fatalf("%d events, %v; want only the first send's %d", len(evs), err, len(before.Created))
	}
	for _, owner := range []string{"did:a", "did:b"} {
		if cs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: owner, Limit: 10}); err != nil || len(cs) != 0 {
			t.Fatalf("%s's conversations after the failed send: %+v, %v; want none", owner, cs, err)
		}
	}
	// Nothing of the failed send holds a seq either.
	res, err := s.Apply(ctx, sendPlan(3, "did:a", []string{"did:b"}, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Created {
		if r.Seq != 1 {
			t.Fatalf("the next send's record in %s's %s has seq %d, want 1", r.Owner, r.BoxKind, r.Seq)
		}
	}
}

// TestAnsweredGroupSurvivesItsLastRows: a logged send is answered once its
// records are in, before its events and conversations are
// written (commit.go). If those fail, the send stays answered, and nothing
// of it is lost: the writer applies the logged writes again, and when that
// fails too (here the fault is still there) it stops, reads fail rather
// than miss the send, and a restart replays it whole.
func TestAnsweredGroupSurvivesItsLastRows(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	first, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	onWriter(t, s, failEvents) // on the writer's connection only: a restart is without it
	second, err := s.Apply(ctx, sendPlan(2, "did:a", []string{"did:boom", "did:b"}, 2))
	if err != nil || len(second.Created) != 3 {
		t.Fatalf("the send whose events fail: %+v, %v; want it answered with its 3 records", second, err)
	}
	if _, err := s.ListEvents(ctx, store.EventFilter{Limit: 100}); err == nil {
		t.Fatal("a read after the answered send could not be applied succeeded: it would miss the send")
	}
	s.crash()
	s2 := openPath(t, path, Options{})
	for _, c := range first.Created {
		if r, err := s2.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
			t.Fatalf("record %s after the restart: %+v, %v; want seq %d", c.RecordID, r, err, c.Seq)
		}
	}
	checkSendWhole(t, s2, second, "did:boom")
}

// TestRecoverReplaysWhatWasLogged: a caller may reuse its plan once Apply
// returned; a lost transaction must bring back what was acknowledged, not
// what the caller's memory holds now.
func TestRecoverReplaysWhatWasLogged(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	p := sendPlan(1, "did:a", []string{"did:b"}, 1)
	res, err := s.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	*p = *sendPlan(2, "did:c", []string{"did:d"}, 2) // reused by the caller
	if err := s.write(ctx, breakTx); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("the breaking write: %v", err)
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Created {
		if _, err := s.GetRecord(ctx, c.RecordID); err != nil {
			t.Fatalf("acknowledged record %s after recovery: %v", c.RecordID, err)
		}
	}
	for _, r := range p.Records {
		if _, err := s.GetRecord(ctx, r.RecordID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("recovery applied a plan nobody sent (%s): %v", r.RecordID, err)
		}
	}
}

// TestSecondOpenIsRefused: a second Store on a live database (another
// process, or msgcenter migrate beside a server) would replay or cut
// entries the first has not committed.
func TestSecondOpenIsRefused(t *testing.T) {
	path := tempDB(t)
	s := openPath(t, path, Options{})
	if _, err := s.Apply(context.Background(), sendPlan(1, "did:a", []string{"did:b"}, 1)); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(context.Background(), path, Options{}); err == nil || !strings.Contains(err.Error(), "open in another process") {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open of a live database: %v", err)
	}
	if !s.uncommitted.Load() {
		t.Fatal("the refused Open committed or replayed the first store's writes")
	}
	s.Close()
	s3 := openPath(t, path, Options{}) // once closed, it opens
	s3.Close()
}

// TestLogFailureCommitsInstead: when an append fails and cannot even be cut
// back, the writes are committed before they are answered, the log is used
// no more, and nothing in it is applied twice after a crash.
func TestLogFailureCommitsInstead(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	first, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	s.applyLog.f.Close() // every write and truncate on it fails from now on
	second, err := s.Apply(ctx, sendPlan(2, "did:a", []string{"did:b"}, 2))
	if err != nil {
		t.Fatalf("a send after the log failed: %v", err)
	}
	if s.uncommitted.Load() {
		t.Fatal("a send was answered from a log that failed")
	}
	third, err := s.Apply(ctx, sendPlan(3, "did:a", []string{"did:b"}, 3))
	if err != nil || s.uncommitted.Load() {
		t.Fatalf("the next send: %v (uncommitted %v)", err, s.uncommitted.Load())
	}
	before := snap(t, s, []string{"did:a", "did:b"})
	s.crash()
	s2 := openPath(t, path, Options{})
	if after := snap(t, s2, []string{"did:a", "did:b"}); !reflect.DeepEqual(before, after) {
		t.Fatalf("after the crash:\n%+v\nbefore:\n%+v", after, before)
	}
	for _, res := range []*store.ApplyResult{first, second, third} {
		for _, c := range res.Created {
			if r, err := s2.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
				t.Fatalf("record %s: %+v, %v", c.RecordID, r, err)
			}
		}
	}
}

// TestCancelledCallerKeepsTheGroup: interrupting a statement rolls back
// SQLite's whole transaction, which holds other callers' writes; a
// caller's cancellation must not reach the statements.
func TestCancelledCallerKeepsTheGroup(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	if _, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := s.write(cctx, func(ctx context.Context, tx *sql.Tx) error {
		go func() { time.Sleep(5 * time.Millisecond); cancel() }()
		var n int
		return tx.QueryRowContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 2000000)
			SELECT count(*) FROM c`).Scan(&n)
	})
	if err != nil {
		t.Fatalf("a write whose caller gave up while it ran: %v", err)
	}
}

// TestReplayFailureKeepsTheLog: a logged write that fails on replay means
// the log and the database do not belong together; Open says so, keeps
// the log, and opens once the log is moved aside.
func TestReplayFailureKeepsTheLog(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	res, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	// A state change the database cannot take: its compare-and-set expects
	// a lease the record never had.
	u := &store.Update{RecordID: res.Created[1].RecordID, From: model.Reading, ExpectLeaseID: "nope", To: model.Readed, NowMS: 2}
	payload, err := (&loggedWrite{update: u}).encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	s.crash()
	if err := (&applyLog{f: mustOpen(t, path+logFileSuffix), size: int64(len(logMagic))}).append([]uint64{2}, [][]byte{payload}); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, path, Options{}); err == nil || !strings.Contains(err.Error(), "move") {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("Open with a log entry that cannot be replayed: %v", err)
	}
	if logSize(t, path) == 0 {
		t.Fatal("the log was emptied although its entry was not applied")
	}
	if err := os.Rename(path+logFileSuffix, path+logFileSuffix+".aside"); err != nil {
		t.Fatal(err)
	}
	openPath(t, path, Options{})
}

// TestForeignLogIsRefused: a log in another format, or with parameters
// this binary does not know, is not replayed by guesswork.
func TestForeignLogIsRefused(t *testing.T) {
	ctx := context.Background()
	for name, content := range map[string][]byte{
		"other format":  []byte("MCAPLOG9"),
		"unknown field": nil, // written below
	} {
		t.Run(name, func(t *testing.T) {
			path := tempDB(t)
			s := openPath(t, path, Options{})
			s.Close()
			if content != nil {
				if err := os.WriteFile(path+logFileSuffix, content, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				l := &applyLog{f: mustOpen(t, path+logFileSuffix), size: int64(len(logMagic))}
				if err := l.append([]uint64{1}, [][]byte{[]byte(`U{"RecordID":"r","Renamed":1}`)}); err != nil {
					t.Fatal(err)
				}
			}
			if s2, err := Open(ctx, path, Options{}); err == nil || !strings.Contains(err.Error(), "aside") {
				if s2 != nil {
					s2.Close()
				}
				t.Fatalf("Open: %v", err)
			}
		})
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// faultyFile makes the log's calls fail on demand.
type faultyFile struct {
	logFile
	failSync, failTruncate bool
}

func (f *faultyFile) Sync() error {
	if f.failSync {
		return errors.New("injected: sync failed")
	}
	return f.logFile.Sync()
}

func (f *faultyFile) Truncate(n int64) error {
	if f.failTruncate {
		return errors.New("injected: truncate failed")
	}
	return f.logFile.Truncate(n)
}

// TestFailedAppendUsesUpItsSequence: an entry can reach the file although
// its append failed (here its fsync fails and cutting it back fails too).
// The writer commits the claim instead, and that commit must cover the
// entry, or the restart would claim a second record.
func TestFailedAppendUsesUpItsSequence(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{Synchronous: "FULL"})
	for i := range 2 {
		if _, err := s.Apply(ctx, sendPlan(i, "did:a", []string{"did:b"}, int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	faulty := &faultyFile{logFile: s.applyLog.f, failSync: true, failTruncate: true}
	s.applyLog.f = faulty // the writer is idle: nothing else touches the log now
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "did:b", Box: model.Inbox, From: model.Unread, To: model.Reading,
		NowMS: 5, LeaseID: "l", Holder: "did:b", LeaseUntilMS: 1000})
	if err != nil {
		t.Fatalf("claim while the log fails: %v", err)
	}
	if s.uncommitted.Load() {
		t.Fatal("the claim was answered from a log that failed")
	}
	if logSize(t, path) == 0 {
		t.Fatal("the failed entry is not in the file: the test shows nothing")
	}
	s.crash()
	s2 := openPath(t, path, Options{Synchronous: "FULL"})
	held, err := s2.Sync(ctx, store.SyncParams{Owner: "did:b", Box: model.Inbox, States: []model.State{model.Reading}})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].RecordID != claimed.RecordID {
		t.Fatalf("after the restart %d records are held (%+v), want only the one claimed", len(held), held)
	}
}

// TestFailedWriteLeavesNoEntryToReplay: a send whose append failed and
// could not be cut back is in the file, and then its own rows fail too, so
// the caller is told it failed. The entry must not come back on the
// restart: the writer records that the log is covered up to it even
// though nothing it answered is left to commit.
func TestFailedWriteLeavesNoEntryToReplay(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{Synchronous: "FULL"})
	if _, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1)); err != nil {
		t.Fatal(err)
	}
	onWriter(t, s, failEvents)
	s.applyLog.f = &faultyFile{logFile: s.applyLog.f, failSync: true, failTruncate: true} // the writer is idle
	failed := sendPlan(2, "did:a", []string{"did:boom"}, 2)
	if _, err := s.Apply(ctx, failed); err == nil {
		t.Fatal("the send whose events fail was answered without the log: it cannot have been applied")
	}
	if logSize(t, path) == 0 {
		t.Fatal("the failed entry is not in the file: the test shows nothing")
	}
	s.crash()
	s2 := openPath(t, path, Options{Synchronous: "FULL"})
	for _, r := range failed.Records {
		if got, err := s2.GetRecord(ctx, r.RecordID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("record %s of the send reported failed is there after the restart: %+v, %v", r.RecordID, got, err)
		}
	}
	// Nor does it hold a seq: the boxes it wrote into stand where the
	// first send left them.
	for _, c := range []struct {
		owner string
		box   model.BoxKind
		want  int64
	}{{"did:a", model.Outbox, 1}, {"did:boom", model.Inbox, 0}} {
		if seq, err := s2.BoxLastSeq(ctx, c.owner, c.box); err != nil || seq != c.want {
			t.Fatalf("%s's %s last seq after the restart: %d, %v; want %d", c.owner, c.box, seq, err, c.want)
		}
	}
}

// TestReplayOfALoggedRepeat: a binary before migration 0015 logged a keyed
// send's repeat as a write of its own. Replayed now, when a repeat is
// refused (store.KeyRepeated), it is skipped: Open succeeds, and the send
// is in the store once.
func TestReplayOfALoggedRepeat(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	p := sendPlan(1, "did:a", []string{"did:b"}, 1)
	p.Idem = &store.Idempotency{Scope: "did:a|post_send", Key: "k"}
	if _, err := s.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	payload, err := (&loggedWrite{apply: p}).encode()
	if err != nil {
		t.Fatal(err)
	}
	s.crash()
	if logSize(t, path) == 0 {
		t.Fatal("the send was committed: the test replays nothing")
	}
	l := &applyLog{f: mustOpen(t, path+logFileSuffix), size: logSize(t, path) + int64(len(logMagic))}
	if err := l.append([]uint64{2}, [][]byte{payload}); err != nil {
		t.Fatal(err)
	}
	s2 := openPath(t, path, Options{})
	for _, r := range p.Records {
		if _, err := s2.GetRecord(ctx, r.RecordID); err != nil {
			t.Fatalf("record %s after the replay: %v", r.RecordID, err)
		}
	}
	items, err := s2.Sync(ctx, store.SyncParams{Owner: "did:b", Box: model.Inbox, Limit: 10})
	if err != nil || len(items) != 1 {
		t.Fatalf("did:b's inbox after the replay: %d records, %v; want the send once", len(items), err)
	}
}
