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
