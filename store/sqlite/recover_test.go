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

// faultOnce is an SQL function, fault_once(name), that fails the first
// call after arm(name) and passes every other: a fault that goes away, as
// a full disk does once space is freed. The driver's functions are global
// to the process, so each test arms its own name.
var (
	faultOnceReg sync.Once
	faultsArmed  sync.Map // name -> *atomic.Int32 (calls left to fail)
)

func armFaultOnce(t *testing.T, name string) *atomic.Int32 {
	t.Helper()
	faultOnceReg.Do(func() {
		err := msqlite.RegisterScalarFunction("fault_once", 1, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			name, _ := args[0].(string)
			if v, ok := faultsArmed.Load(name); ok && v.(*atomic.Int32).Add(-1) >= 0 {
				return nil, errors.New("injected: " + name)
			}
			return int64(0), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	left := new(atomic.Int32)
	left.Store(1)
	faultsArmed.Store(name, left)
	t.Cleanup(func() { faultsArmed.Delete(name) })
	return left
}

// TestAnsweredGroupRecoversFromPassingFault: a logged send is answered
// before its events are written (commit.go); when they fail once, the
// writer applies the logged writes again and goes on. Nothing stops, and
// the send is whole: records, events, box counters, conversations.
func TestAnsweredGroupRecoversFromPassingFault(t *testing.T) {
	ctx := context.Background()
	left := armFaultOnce(t, t.Name())
	left.Store(0) // armed once the trigger is in
	s := openPath(t, tempDB(t), Options{})
	if err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TEMP TRIGGER flaky BEFORE INSERT ON events
			WHEN NEW.owner = 'did:flaky' BEGIN SELECT fault_once('`+t.Name()+`'); END`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
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
	if left.Load() >= 0 {
		t.Fatal("the fault never fired: this test shows nothing")
	}
	for _, c := range res.Created {
		if r, err := s.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
			t.Fatalf("record %s: %+v, %v; want seq %d", c.RecordID, r, err, c.Seq)
		}
	}
	evs, err := s.ListEvents(ctx, store.EventFilter{Owner: "did:flaky", Limit: 100})
	if err != nil || len(evs) != 1 {
		t.Fatalf("did:flaky's events: %+v, %v; want its record.created", evs, err)
	}
	if cs, err := s.ListConversations(ctx, "did:flaky", 10); err != nil || len(cs) != 1 || cs[0].UnreadCount != 1 {
		t.Fatalf("did:flaky's conversations: %+v, %v; want one, unread 1", cs, err)
	}
	if seq, err := s.BoxLastSeq(ctx, "did:b", model.Inbox); err != nil || seq != 2 {
		t.Fatalf("did:b's INBOX counter: %d, %v; want 2", seq, err)
	}
	if _, err := s.Apply(ctx, sendPlan(3, "did:a", []string{"did:flaky"}, 3)); err != nil {
		t.Fatalf("a send after the recovery: %v", err)
	}
	if seq, err := s.BoxLastSeq(ctx, "did:flaky", model.Inbox); err != nil || seq != 2 {
		t.Fatalf("did:flaky's INBOX counter: %d, %v; want 2", seq, err)
	}
}
