package sqlite

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestAckReadsNeedNoCommit: after a logged claim, the ack's read of the
// record comes from the overlay, with the claim's lease, and commits
// nothing; after the commit the same read comes from the database.
func TestAckReadsNeedNoCommit(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	res, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 1))
	if err != nil {
		t.Fatal(err)
	}
	inbox := res.Created[1]
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "did:b", Box: model.Inbox, From: model.Unread, To: model.Reading,
		NowMS: 2, LeaseID: "l1", Holder: "did:b", LeaseUntilMS: 100})
	if err != nil || claimed.RecordID != inbox.RecordID {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	got, err := s.GetRecord(ctx, inbox.RecordID)
	if err != nil || got.State != model.Reading || got.Lease == nil || got.Lease.ID != "l1" {
		t.Fatalf("read after the claim: %+v, %v; want READING under lease l1", got, err)
	}
	if !s.uncommitted.Load() {
		t.Fatal("the read committed the claim (or the claim was not logged)")
	}
	got.Lease.ID = "changed by a caller"
	if again, _ := s.GetRecord(ctx, inbox.RecordID); again.Lease.ID != "l1" {
		t.Fatalf("a caller changed what the overlay holds: %+v", again.Lease)
	}
	acked, err := s.Update(ctx, &store.Update{RecordID: inbox.RecordID, From: model.Reading, ExpectLeaseID: "l1", To: model.Readed, NowMS: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRecord(ctx, inbox.RecordID); err != nil || !reflect.DeepEqual(got, acked) {
		t.Fatalf("read after the ack: %+v, %v; want %+v", got, err, acked)
	}
	if _, err := s.Sync(ctx, store.SyncParams{Owner: "did:b", Box: model.Inbox}); err != nil { // commits
		t.Fatal(err)
	}
	if s.uncommitted.Load() {
		t.Fatal("a box read left the writes uncommitted")
	}
	if got, err := s.GetRecord(ctx, inbox.RecordID); err != nil || !reflect.DeepEqual(got, acked) {
		t.Fatalf("read after the commit: %+v, %v; want %+v", got, err, acked)
	}
	// A write of another kind (committed at once) changes it later: the
	// overlay must not answer the old state.
	if r, err := s.Purge(ctx, store.PurgeParams{NowMS: 10, Limit: 10, TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: 10}}); err != nil ||
		r.Records[model.Inbox] != 1 {
		t.Fatalf("purge: %+v, %v", r, err)
	}
	if got, err := s.GetRecord(ctx, inbox.RecordID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("read after the purge: %+v, %v; want not found", got, err)
	}
}

// TestBodyReadsNeedNoCommit: a body the body cache no longer holds is
// read without committing the logged writes: from the overlay while its
// send is uncommitted, from the database once committed, and a body never
// stored is not found. A consumer working through a backlog larger than
// the cache used to force a commit per claim here.
func TestBodyReadsNeedNoCommit(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	s.bodies = newBodyCache(0) // caches nothing: every read misses it
	committed := sendPlan(1, "did:a", []string{"did:b"}, 1)
	if _, err := s.Apply(ctx, committed); err != nil {
		t.Fatal(err)
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	pending := sendPlan(2, "did:a", []string{"did:b"}, 2)
	if _, err := s.Apply(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if !s.uncommitted.Load() {
		t.Fatal("the send was not logged")
	}
	for _, p := range []*store.Plan{committed, pending} {
		if got, err := s.GetMessage(ctx, p.MsgID); err != nil || string(got) != string(p.MsgBody) {
			t.Fatalf("GetMessage(%s) = %q, %v; want %q", p.MsgID, got, err, p.MsgBody)
		}
	}
	if _, err := s.GetMessage(ctx, msgID(3)); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage of a body never stored: %v; want not found", err)
	}
	got, err := s.GetMessages(ctx, []string{committed.MsgID, msgID(3), pending.MsgID})
	want := map[string][]byte{committed.MsgID: committed.MsgBody, pending.MsgID: pending.MsgBody}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("GetMessages = %q, %v; want %q", got, err, want)
	}
	if !s.uncommitted.Load() {
		t.Fatal("a body read committed the logged send")
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	if b, ok := s.overlay.body(pending.MsgID); ok {
		t.Fatalf("the commit left the body in the overlay: %q", b)
	}
	if got, err := s.GetMessage(ctx, pending.MsgID); err != nil || string(got) != string(pending.MsgBody) {
		t.Fatalf("GetMessage after the commit = %q, %v; want %q", got, err, pending.MsgBody)
	}
}
