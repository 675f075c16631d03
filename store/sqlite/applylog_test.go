package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// crash stops s as kill -9 would, as far as the database and the apply log
// can tell: the writer stops without committing, its open transaction is
// discarded and the log stays as it is. Close is a no-op afterwards.
func (s *Store) crash() {
	s.abandon.Store(true)
	s.closeOnce.Do(func() {
		s.stopLoop()
		<-s.ckDone
		if s.pt.tx != nil {
			_ = s.pt.tx.Rollback()
		}
		s.st.close()
		s.rstmts.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
		s.closeErr = errors.Join(s.r.Close(), s.ck.Close(), s.w.Close(), s.applyLog.close())
	})
}

// openPath opens a Store at path, closed when the test ends. Unless opts
// says otherwise, logged writes stay uncommitted until a read
// or Close commits them: the tests look at that state, and a slow machine
// must not commit it away on the timer under them.
func openPath(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	if opts.linger == 0 {
		opts.linger = time.Hour
	}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tempDB(t *testing.T) string {
	return filepath.Join(t.TempDir(), "msgcenter.db")
}

// msgID is a message id of the right shape for n.
func msgID(n int) string { return fmt.Sprintf("cymsg:%064d", n) }

// sendPlan is a post_send of message n from from to each of to, at nowMS.
func sendPlan(n int, from string, to []string, nowMS int64) *store.Plan {
	m := msgID(n)
	p := &store.Plan{MsgID: m, MsgBody: []byte(fmt.Sprintf(`{"n":%d}`, n)), NowMS: nowMS}
	p.Records = append(p.Records, rec(from, model.Outbox, m, "dm:"+to[0], nowMS))
	for _, d := range to {
		p.Records = append(p.Records, rec(d, model.Inbox, m, "dm:"+from, nowMS))
	}
	return p
}

// snapshot is everything a client can read of the boxes involved, the
// event log and the conversations, for comparing two stores.
type snapshot struct {
	Boxes  map[string][]model.Record
	Events []model.Event
	Convs  map[string][]model.Conversation
}

// fataler is a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func snap(t fataler, s *Store, owners []string) snapshot {
	t.Helper()
	ctx := context.Background()
	out := snapshot{Boxes: map[string][]model.Record{}, Convs: map[string][]model.Conversation{}}
	for _, o := range owners {
		for _, b := range []model.BoxKind{model.Inbox, model.Outbox} {
			recs, err := s.Sync(ctx, store.SyncParams{Owner: o, Box: b, Limit: 10000})
			if err != nil {
				t.Fatal(err)
			}
			out.Boxes[o+"/"+string(b)] = recs
		}
		convs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: o, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out.Convs[o] = convs
	}
	evs, err := s.ListEvents(ctx, store.EventFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	out.Events = evs
	return out
}

// logSize is how many bytes of entries the apply log holds (after its
// header).
func logSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + logFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	return max(0, fi.Size()-int64(len(logMagic)))
}

// TestApplyLogReplaysAcknowledgedSends: sends answered but not committed
// when the process dies are applied at the next Open, with the seqs and
// event ids they were answered with, and exactly what a store that never
// crashed holds.
func TestApplyLogReplaysAcknowledgedSends(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	ref := openPath(t, tempDB(t), Options{})
	owners := []string{"did:a", "did:b", "did:c"}
	var subs []string
	for i := range 100 {
		subs = append(subs, fmt.Sprintf("did:sub%d", i))
	}
	var plans []*store.Plan
	for i := range 30 {
		plans = append(plans, sendPlan(i, owners[i%3], []string{owners[(i+1)%3]}, int64(1000+i)))
	}
	plans = append(plans, plans[4]) // a repeat: its records exist
	plans = append(plans, sendPlan(100, "did:a", subs, 2000))
	idem := sendPlan(101, "did:a", []string{"did:b"}, 2001)
	idem.Idem = &store.Idempotency{Scope: "did:a/post_send", Key: "k1"}
	plans = append(plans, idem)

	var got []*store.ApplyResult
	for _, p := range plans {
		res, err := s.Apply(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res)
	}
	// The same key for another message is refused, logged or not.
	clash := sendPlan(102, "did:a", []string{"did:b"}, 2002)
	clash.Idem = idem.Idem
	if _, err := s.Apply(ctx, clash); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("idempotency clash: %v", err)
	}
	if !s.uncommitted.Load() || logSize(t, path) == 0 {
		t.Fatal("nothing was waiting in the apply log: the test crashes nothing")
	}
	s.crash()

	s2 := openPath(t, path, Options{})
	if n := logSize(t, path); n != 0 {
		t.Fatalf("apply log holds %d bytes after the replay, want 0", n)
	}
	for i, res := range got {
		for _, c := range res.Created {
			r, err := s2.GetRecord(ctx, c.RecordID)
			if err != nil {
				t.Fatalf("plan %d: record %s answered created is gone after the crash: %v", i, c.RecordID, err)
			}
			if r.Seq != c.Seq {
				t.Fatalf("plan %d: record %s has seq %d after replay, was answered with %d", i, c.RecordID, r.Seq, c.Seq)
			}
		}
	}
	for _, p := range plans {
		if _, err := ref.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	all := append(owners, subs...)
	if a, b := snap(t, s2, all), snap(t, ref, all); !reflect.DeepEqual(a, b) {
		t.Fatalf("after the crash and replay the store differs from one that never crashed")
	}
	// Replayed once only: sending everything again changes nothing (a
	// keyed plan is a repeat of its key's send).
	for i, p := range plans {
		res, err := s2.Apply(ctx, p)
		if _, repeat := errors.AsType[*store.KeyRepeated](err); repeat && p.Idem != nil {
			continue
		}
		if err != nil || len(res.Created) != 0 {
			t.Fatalf("plan %d again after replay: %+v, %v; want nothing created", i, res, err)
		}
	}
	if _, err := s2.Apply(ctx, clash); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("the idempotency key did not survive the crash: %v", err)
	}
}

// TestApplyLogTornTail: an entry cut short or corrupted by the crash was
// never acknowledged; the ones before it are applied and the rest is cut.
func TestApplyLogTornTail(t *testing.T) {
	ctx := context.Background()
	for name, tail := range map[string][]byte{
		"short header":  {9, 0, 0},
		"short payload": append(binary.LittleEndian.AppendUint32(nil, 100), make([]byte, 30)...),
		"bad checksum":  append(append(binary.LittleEndian.AppendUint32(nil, 2), 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0), '{', '}'),
	} {
		t.Run(name, func(t *testing.T) {
			path := tempDB(t)
			s := openPath(t, path, Options{})
			var created []model.Record
			for i := range 3 {
				res, err := s.Apply(ctx, sendPlan(i, "did:a", []string{"did:b"}, int64(i+1)))
				if err != nil {
					t.Fatal(err)
				}
				created = append(created, res.Created...)
			}
			s.crash()
			f, err := os.OpenFile(path+logFileSuffix, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tail); err != nil {
				t.Fatal(err)
			}
			f.Close()
			s2 := openPath(t, path, Options{})
			for _, c := range created {
				if r, err := s2.GetRecord(ctx, c.RecordID); err != nil || r.Seq != c.Seq {
					t.Fatalf("record %s: %+v, %v", c.RecordID, r, err)
				}
			}
			if n := logSize(t, path); n != 0 {
				t.Fatalf("apply log holds %d bytes after the replay", n)
			}
			// The log works on after its tail was cut.
			if _, err := s2.Apply(ctx, sendPlan(9, "did:a", []string{"did:b"}, 9)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestApplyLogEntriesACommitCoversAreSkipped: the process may die after a
// commit but before the log is emptied; those entries are not applied a
// second time. Applying a send again is a no-op while its records exist
// (their ids are derived), so the test makes the difference visible: a
// record read and purged after the commit must not come back.
func TestApplyLogEntriesACommitCoversAreSkipped(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	var first model.Record
	for i := range 5 {
		res, err := s.Apply(ctx, sendPlan(i, "did:a", []string{"did:b"}, int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.Created[1] // did:b's INBOX record
		}
	}
	logged, err := os.ReadFile(path + logFileSuffix)
	if err != nil || len(logged) == 0 {
		t.Fatalf("apply log: %d bytes, %v", len(logged), err)
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "did:b", Box: model.Inbox, From: model.Unread, To: model.Reading,
		NowMS: 10, LeaseID: "l", Holder: "did:b", LeaseUntilMS: 1000})
	if err != nil || claimed.RecordID != first.RecordID {
		t.Fatalf("claim: %+v, %v; want %s", claimed, err, first.RecordID)
	}
	if _, err := s.Update(ctx, &store.Update{RecordID: first.RecordID, From: model.Reading, ExpectLeaseID: "l",
		To: model.Readed, NowMS: 11}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Purge(ctx, store.PurgeParams{NowMS: 20, Limit: 10,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: 20}}); err != nil || res.Records[model.Inbox] != 1 {
		t.Fatalf("purge: %+v, %v; want the read record gone", res, err)
	}
	before := snap(t, s, []string{"did:a", "did:b"})
	s.crash()
	if err := os.WriteFile(path+logFileSuffix, logged, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openPath(t, path, Options{})
	if r, err := s2.GetRecord(ctx, first.RecordID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a purged record came back from a log entry a commit had covered: %+v, %v", r, err)
	}
	if after := snap(t, s2, []string{"did:a", "did:b"}); !reflect.DeepEqual(before, after) {
		t.Fatalf("entries a commit covered were applied again:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestApplyLogAfterAGap: with --durability normal an OS crash can lose the
// database's last commit after the log was emptied for it. Open must not
// refuse to start: what the log holds is applied.
func TestApplyLogAfterAGap(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	var res []*store.ApplyResult
	for i := range 2 {
		r, err := s.Apply(ctx, sendPlan(i, "did:a", []string{"did:b"}, int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	s.crash()
	logged, err := os.ReadFile(path + logFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	h := len(logMagic) // the file header, then the first entry
	first := h + logHeaderSize + int(binary.LittleEndian.Uint32(logged[h:h+4]))
	if err := os.WriteFile(path+logFileSuffix, append(logged[:h:h], logged[first:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openPath(t, path, Options{})
	if _, err := s2.GetRecord(ctx, res[0].Created[0].RecordID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the first send, lost in the gap, is there: %v", err)
	}
	for _, c := range res[1].Created {
		if _, err := s2.GetRecord(ctx, c.RecordID); err != nil {
			t.Fatalf("the send after the gap was not applied: %v", err)
		}
	}
}

// TestApplyLogCommitsOnItsOwn: sends are committed within commitEvery
// even when nobody reads, and the log is emptied.
func TestApplyLogCommitsOnItsOwn(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{linger: commitEvery})
	if _, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.uncommitted.Load() || logSize(t, path) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not committed %s after the send (log %d bytes)", 5*time.Second, logSize(t, path))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestApplyLogFullDurability runs the crash with --durability full: the
// log is fsynced before a send is answered.
func TestApplyLogFullDurability(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{Synchronous: "FULL"})
	if !s.applyLog.sync {
		t.Fatal("FULL durability does not fsync the apply log")
	}
	res, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	s.crash()
	s2 := openPath(t, path, Options{Synchronous: "FULL"})
	for _, c := range res.Created {
		if _, err := s2.GetRecord(ctx, c.RecordID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApplyLogReplaysNotices: an Update answered but not committed when
// the process dies is replayed with its notice, the second event it owes
// another owner (a delivery's author).
func TestApplyLogReplaysNoticesAndReceipts(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	res, err := s.Apply(ctx, sendPlan(0, "did:a", []string{"did:b"}, 1000))
	if err != nil {
		t.Fatal(err)
	}
	var inbox model.Record
	for _, r := range res.Created {
		if r.BoxKind == model.Inbox {
			inbox = r
		}
	}
	rcpt := model.Receipt{MsgID: inbox.MsgID, Iss: "did:b", Reader: "did:b", GroupID: "did:g", AtMS: 1001, Status: model.ReceiptReaded}
	if _, err := s.Update(ctx, &store.Update{RecordID: inbox.RecordID, From: model.Unread, To: model.Readed, NowMS: 1001,
		Notice: &store.Notice{Owner: "did:c", Type: model.EventDeliverySent, Detail: "told"}, Receipt: &rcpt}); err != nil {
		t.Fatal(err)
	}
	if !s.uncommitted.Load() || logSize(t, path) == 0 {
		t.Fatal("nothing was waiting in the apply log: the test crashes nothing")
	}
	s.crash()

	s2 := openPath(t, path, Options{})
	evs, err := s2.ListEvents(ctx, store.EventFilter{Owner: "did:c", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != model.EventDeliverySent || evs[0].RecordID != inbox.RecordID || evs[0].Detail != "told" {
		t.Fatalf("did:c's events after the replay: %+v; want the notice", evs)
	}
	got, err := s2.ListReceipts(ctx, store.ReceiptFilter{MsgID: inbox.MsgID, Limit: 10})
	if err != nil || len(got) != 1 || got[0] != rcpt {
		t.Fatalf("receipts after the replay = %+v, %v; want %+v", got, err, rcpt)
	}
	if evs, err = s2.ListEvents(ctx, store.EventFilter{Owner: "did:g", Limit: 10}); err != nil || len(evs) != 1 || evs[0].Type != model.EventReceiptSet {
		t.Fatalf("did:g's events after the replay = %+v, %v; want its receipt.set", evs, err)
	}
}
