package sqlite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/bodies"
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
	s.bodies = bodies.New(0) // caches nothing: every read misses it
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

// TestWaitingClaimerReadsNeedNoCommit: Claimable and NextVisible answer
// from the overlay and the last commit without committing, never "no"
// when a claim would find a record, and with the earliest wake-up of both.
func TestWaitingClaimerReadsNeedNoCommit(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	const now = 1000
	n := 0
	send := func(to string) model.Record {
		t.Helper()
		n++
		res, err := s.Apply(ctx, sendPlan(n, "did:a", []string{to}, now))
		if err != nil {
			t.Fatal(err)
		}
		return res.Created[1]
	}
	claim := func(owner string) model.Record {
		t.Helper()
		r, err := s.Claim(ctx, store.ClaimParams{Owner: owner, Box: model.Inbox, From: model.Unread, To: model.Reading,
			NowMS: now, LeaseID: fmt.Sprint("lease", n), Holder: owner, LeaseUntilMS: now + 10_000})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	nack := func(r model.Record, visibleAt int64) {
		t.Helper()
		if _, err := s.Update(ctx, &store.Update{RecordID: r.RecordID, From: model.Reading, ExpectLeaseID: r.Lease.ID,
			To: model.Unread, VisibleAtMS: visibleAt, NowMS: now}); err != nil {
			t.Fatal(err)
		}
	}
	claimable := func(owner string, at int64) bool {
		t.Helper()
		ok, err := s.Claimable(ctx, owner, model.Inbox, model.Unread, at)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	settle := func() {
		t.Helper()
		if err := s.settle(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// b: committed records taken by logged claims, one by one: exact
	// answers, the last one no.
	const committed = 9
	for range committed {
		send("did:b")
	}
	settle()
	for i := range committed {
		claim("did:b")
		if got := claimable("did:b", now); got != (i < committed-1) {
			t.Fatalf("Claimable after %d of %d committed records were taken = %v", i+1, committed, got)
		}
		if !s.uncommitted.Load() {
			t.Fatalf("Claimable after %d claims committed them", i+1)
		}
	}

	// c: one committed record, taken (logged), then put back with a backoff.
	send("did:c")
	settle()
	r := claim("did:c")
	if claimable("did:c", now) {
		t.Fatal("Claimable said yes for the only record, which a logged claim took")
	}
	nack(r, now+100)
	if claimable("did:c", now+99) || !claimable("did:c", now+100) {
		t.Fatalf("Claimable before/at the backoff's end = %v/%v; want false/true", claimable("did:c", now+99), claimable("did:c", now+100))
	}
	if at, ok, err := s.NextVisible(ctx, "did:c", model.Inbox, model.Unread, now); err != nil || !ok || at != now+100 {
		t.Fatalf("NextVisible = %d %v, %v; want %d", at, ok, err, now+100)
	}

	// d: a committed backoff ending before a logged one.
	send("did:d")
	send("did:d")
	nack(claim("did:d"), now+50)
	settle()
	nack(claim("did:d"), now+200)
	if at, ok, err := s.NextVisible(ctx, "did:d", model.Inbox, model.Unread, now); err != nil || !ok || at != now+50 {
		t.Fatalf("NextVisible = %d %v, %v; want the committed %d", at, ok, err, now+50)
	}
	// And a fresh send is claimable at once, from the overlay.
	if claimable("did:d", now) {
		t.Fatal("Claimable said yes with both records in backoff")
	}
	send("did:d")
	if !claimable("did:d", now) {
		t.Fatal("Claimable said no right after a send")
	}
	if !s.uncommitted.Load() {
		t.Fatal("the reads committed the logged writes")
	}
}

// TestClaimableUnderConcurrentClaims: while claimers take committed
// records through logged claims (and the timer commits them), Claimable
// never says no while records are left that no claim has started on.
func TestClaimableUnderConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{linger: commitEvery})
	const total, workers, now = 300, 4, 1000
	for i := range total {
		if _, err := s.Apply(ctx, sendPlan(i+1, "did:a", []string{"did:b"}, now)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.settle(ctx); err != nil {
		t.Fatal(err)
	}
	var started atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				started.Add(1)
				_, err := s.Claim(ctx, store.ClaimParams{Owner: "did:b", Box: model.Inbox, From: model.Unread, To: model.Reading,
					NowMS: now, LeaseID: fmt.Sprintf("w%d-%d", w, i), Holder: "did:b", LeaseUntilMS: now + 10_000})
				if errors.Is(err, model.ErrNotFound) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for {
		ok, err := s.Claimable(ctx, "did:b", model.Inbox, model.Unread, now)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if n := started.Load(); n < total {
				t.Fatalf("Claimable said no when only %d claims of %d records had started", n, total)
			}
			break
		}
	}
	wg.Wait()
}

// TestOverlayResetDropsABigFanOut: after a commit the overlay lets the
// maps of a big fan-out go (clear would keep their buckets), and works on.
func TestOverlayResetDropsABigFanOut(t *testing.T) {
	var o overlay
	recs := make([]model.Record, overlayKeep+1)
	for i := range recs {
		recs[i] = rec(fmt.Sprintf("did:m%d", i), model.Inbox, msgID(1), "g", 1)
	}
	o.put(recs, nil)
	o.putBody(msgID(1), []byte("{}"))
	o.reset()
	if o.m != nil || o.bodies != nil || o.byState != nil || o.inBox != nil {
		t.Fatal("reset kept the maps of a big fan-out")
	}
	o.put(recs[:1], nil)
	if r, ok := o.get(recs[0].RecordID); !ok || r.Owner != recs[0].Owner || o.count(recs[0].Owner, model.Inbox) != 1 {
		t.Fatalf("after the reset: %+v, %v", r, ok)
	}
	o.reset()
	if o.m == nil || len(o.m) != 0 {
		t.Fatal("reset dropped the maps of a small overlay, or left records in them")
	}
}
