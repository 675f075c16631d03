package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	msqlite "modernc.org/sqlite"
)

// fault_once(name) is an SQL function that fails the first call after
// armFaultOnce(name) and passes every other: a fault that goes away, as a
// full disk does once space is freed. The driver's functions are global
// to the process and reach only connections opened after they are
// registered, hence init; each test arms its own name.
var faultsArmed sync.Map // name -> *atomic.Int32 (calls left to fail)

func init() {
	msqlite.MustRegisterScalarFunction("fault_once", 1, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		name, _ := args[0].(string)
		if v, ok := faultsArmed.Load(name); ok && v.(*atomic.Int32).Add(-1) >= 0 {
			return nil, errors.New("injected: " + name)
		}
		return int64(0), nil
	})
}

// armFaultOnce returns the count of calls of fault_once(t.Name()) left to
// fail, 0 to begin with: below 0 once a call passed.
func armFaultOnce(t *testing.T) *atomic.Int32 {
	t.Helper()
	left := new(atomic.Int32)
	faultsArmed.Store(t.Name(), left)
	t.Cleanup(func() { faultsArmed.Delete(t.Name()) })
	return left
}

// onWriter runs stmts in one write. A TEMP trigger made this way is on the
// writer's connection only: a restart is without it.
func onWriter(t *testing.T, s *Store, stmts ...string) {
	t.Helper()
	if err := s.write(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// failEvents is a TEMP trigger that fails every event of did:boom.
const failEvents = `CREATE TEMP TRIGGER boom BEFORE INSERT ON events
	WHEN NEW.owner = 'did:boom' BEGIN SELECT RAISE(ABORT, 'boom'); END`

// checkSendWhole: every record res created is stored with its seq, member
// has the record.created event of its one record and a conversation with
// one unread, and did:b's INBOX counter is at 2 (the test's second send).
func checkSendWhole(t *testing.T, s *Store, res *store.ApplyResult, member string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range res.Created {
		if r, err := s.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
			t.Fatalf("record %s: %+v, %v; want seq %d", c.RecordID, r, err, c.Seq)
		}
	}
	evs, err := s.ListEvents(ctx, store.EventFilter{Owner: member, Limit: 100})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%s's events: %+v, %v; want its record.created", member, evs, err)
	}
	if cs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: member, Limit: 10}); err != nil || len(cs) != 1 || cs[0].UnreadCount != 1 {
		t.Fatalf("%s's conversations: %+v, %v; want one, unread 1", member, cs, err)
	}
	if seq, err := s.BoxLastSeq(ctx, "did:b", model.Inbox); err != nil || seq != 2 {
		t.Fatalf("did:b's INBOX counter: %d, %v; want 2", seq, err)
	}
}

// TestAnsweredGroupRecoversFromPassingFault: a logged send is answered
// before its events are written (commit.go); when they fail once, the
// writer applies the logged writes again and goes on. Nothing stops, and
// the send is whole: records, seqs, events, conversations.
func TestAnsweredGroupRecoversFromPassingFault(t *testing.T) {
	ctx := context.Background()
	left := armFaultOnce(t)
	s := openPath(t, tempDB(t), Options{})
	onWriter(t, s, `CREATE TEMP TRIGGER flaky BEFORE INSERT ON events
		WHEN NEW.owner = 'did:flaky' BEGIN SELECT fault_once('`+t.Name()+`'); END`)
	if _, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1)); err != nil {
		t.Fatal(err)
	}
	left.Store(1)
	res, err := s.Apply(ctx, sendPlan(2, "did:a", []string{"did:flaky", "did:b"}, 2))
	if err != nil || len(res.Created) != 3 {
		t.Fatalf("the send whose events fail once: %+v, %v; want it answered with its 3 records", res, err)
	}
	if err := s.settle(ctx); err != nil {
		t.Fatalf("reads after the fault passed: %v", err)
	}
	if left.Load() > 0 {
		t.Fatal("the fault never fired: this test shows nothing")
	}
	checkSendWhole(t, s, res, "did:flaky")
	if _, err := s.Apply(ctx, sendPlan(3, "did:a", []string{"did:flaky"}, 3)); err != nil {
		t.Fatalf("a send after the recovery: %v", err)
	}
	if seq, err := s.BoxLastSeq(ctx, "did:flaky", model.Inbox); err != nil || seq != 2 {
		t.Fatalf("did:flaky's INBOX counter: %d, %v; want 2", seq, err)
	}
}

// TestLogCoveredAtCloseAfterFailedCover: as TestFailedWriteLeavesNoEntryToReplay,
// and the commit that would cover the failed append's entry fails once
// too. The callers are told their writes failed; nothing else is written
// before a clean Close, which must still cover the entry, or the next
// Open replays the send.
func TestLogCoveredAtCloseAfterFailedCover(t *testing.T) {
	ctx := context.Background()
	left := armFaultOnce(t)
	path := tempDB(t)
	s := openPath(t, path, Options{Synchronous: "FULL"})
	if _, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1)); err != nil {
		t.Fatal(err)
	}
	onWriter(t, s, failEvents, `CREATE TEMP TRIGGER pos BEFORE UPDATE ON apply_log
		BEGIN SELECT fault_once('`+t.Name()+`'); END`)
	s.applyLog.f = &faultyFile{logFile: s.applyLog.f, failSync: true, failTruncate: true} // the writer is idle
	left.Store(1)
	failed := sendPlan(2, "did:a", []string{"did:boom"}, 2)
	if _, err := s.Apply(ctx, failed); err == nil {
		t.Fatal("the send whose events fail was answered without the log: it cannot have been applied")
	}
	if left.Load() > 0 {
		t.Fatal("the commit covering the log never failed: this test shows nothing")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2 := openPath(t, path, Options{Synchronous: "FULL"})
	for _, r := range failed.Records {
		if got, err := s2.GetRecord(ctx, r.RecordID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("record %s of the send reported failed is there after Close and Open: %+v, %v", r.RecordID, got, err)
		}
	}
}

// TestFailedReplayKeepsItsEntries: Open's replay of acknowledged writes
// fails at its commit (once). Open fails, and nothing it does on the way
// out may record a position past the entries it did not apply: the next
// Open replays them.
func TestFailedReplayKeepsItsEntries(t *testing.T) {
	ctx := context.Background()
	left := armFaultOnce(t)
	path := tempDB(t)
	s := openPath(t, path, Options{})
	res, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	s.crash()
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	// A trigger in the database: every connection Open makes has it.
	if _, err := db.Exec(`CREATE TRIGGER pos BEFORE UPDATE ON apply_log BEGIN SELECT fault_once('` + t.Name() + `'); END`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	left.Store(1)
	if s2, err := Open(ctx, path, Options{}); err == nil {
		s2.Close()
		t.Fatal("Open succeeded although its replay could not commit")
	}
	if left.Load() > 0 {
		t.Fatal("the replay's commit never failed: this test shows nothing")
	}
	s3 := openPath(t, path, Options{})
	for _, c := range res.Created {
		if r, err := s3.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
			t.Fatalf("acknowledged record %s after the second Open: %+v, %v; want seq %d", c.RecordID, r, err, c.Seq)
		}
	}
}
