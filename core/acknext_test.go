package core

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// sendAndClaim dispatches texts to who's INBOX and claims the first.
func sendAndClaim(t *testing.T, s *Service, who model.Identity, texts ...string) *wire.RecordWithMsg {
	t.Helper()
	ctx := context.Background()
	for _, txt := range texts {
		if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{who.DID}, txt)}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := s.Next(ctx, who, who.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || held == nil {
		t.Fatalf("claim: %v, %v", held, err)
	}
	return held
}

// claimBreaks fails every claim once broken is set.
type claimBreaks struct {
	store.Store
	broken bool
}

var errDisk = errors.New("disk on fire")

func (c *claimBreaks) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	if c.broken {
		return model.Record{}, errDisk
	}
	return c.Store.Claim(ctx, p)
}

// UpdateThenClaim's claim fails the same way; its update stands.
func (c *claimBreaks) UpdateThenClaim(ctx context.Context, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed, error) {
	if c.broken {
		rec, err := c.Store.Update(ctx, u)
		return rec, store.Claimed{Err: errDisk}, err
	}
	return c.Store.UpdateThenClaim(ctx, u, p)
}

// An ack whose next claim fails stands: SetState returns the acked record
// with a *NextError, and a canceled claim (a gone client, shutdown) is no
// next at all, as for get_next.
func TestAckNextWhenTheClaimFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &claimBreaks{Store: openTestStore(t)}
	s := New(st, Config{})
	bob := agent("did:bob")
	held := sendAndClaim(t, s, bob, "one", "two", "three")
	st.broken = true
	res, err := s.SetState(ctx, bob, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID, Next: &wire.NextRequest{}})
	var ne *NextError
	if !errors.As(err, &ne) || !errors.Is(err, errDisk) || res == nil || res.Record.State != model.Readed || res.Next != nil {
		t.Fatalf("SetState = %+v, %v; want the acked record and a NextError", res, err)
	}
	if rec, err := st.GetRecord(ctx, held.Record.RecordID); err != nil || rec.State != model.Readed {
		t.Fatalf("stored %+v, %v; the ack must stand", rec, err)
	}

	st.broken = false
	second, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || second == nil {
		t.Fatalf("claim: %v, %v", second, err)
	}
	if third, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{}); err != nil || third == nil {
		t.Fatalf("claim: %v, %v", third, err)
	}
	// The box is empty: next waits, and the caller goes away meanwhile.
	gone, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { time.Sleep(500 * time.Millisecond); cancel() }()
	res, err = s.ReportDelivery(gone, bob, second.Record.RecordID, &wire.DeliveryRequest{LeaseID: second.Record.Lease.ID, Result: &wire.DeliveryResult{OK: true}, Next: &wire.NextRequest{WaitMS: 30_000}})
	if err != nil || res.Record.State != model.Readed || res.Next != nil {
		t.Fatalf("report whose next was canceled = %+v, %v; want the acked record, no next, no error", res, err)
	}
}

// bodyBreaks fails the next GetMessage once armed.
type bodyBreaks struct {
	store.Store
	armed bool
}

func (b *bodyBreaks) GetMessage(ctx context.Context, msgID string) ([]byte, error) {
	if b.armed {
		b.armed = false
		return nil, errDisk
	}
	return b.Store.GetMessage(ctx, msgID)
}

// claimedCounter counts Metrics.Claimed.
type claimedCounter struct {
	noMetrics
	n atomic.Int64
}

func (c *claimedCounter) Claimed(model.BoxKind) { c.n.Add(1) }

// An ack with next whose answer cannot be read (the acked message's body)
// fails before it changes anything: its write would make next's claim,
// and a claim nobody is told of stays held until its lease runs out.
func TestAckNextFailsWholeBeforeItsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &bodyBreaks{Store: openTestStore(t)}
	s := New(st, Config{})
	bob := agent("did:bob")
	held := sendAndClaim(t, s, bob, "one", "two")
	st.armed = true
	if res, err := s.SetState(ctx, bob, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID, Next: &wire.NextRequest{}}); !errors.Is(err, errDisk) {
		t.Fatalf("SetState with next while the body cannot be read = %+v, %v; want the read's error", res, err)
	}
	recs, err := st.Sync(ctx, store.SyncParams{Owner: bob.DID, Box: model.Inbox, Limit: 10})
	if err != nil || len(recs) != 2 {
		t.Fatalf("sync: %d records, %v", len(recs), err)
	}
	if recs[0].State != model.Reading || recs[0].Lease == nil || recs[0].Lease.ID != held.Record.Lease.ID || recs[1].State != model.Unread {
		t.Fatalf("after the failed ack: %s under %+v and %s; want READING under the first lease, and UNREAD", recs[0].State, recs[0].Lease, recs[1].State)
	}
}

// The claim an ack makes with its change counts as a claim (metrics, the
// reaper's schedule), and a claimer back for more at a box known to be
// empty makes no claim write, as get_next does not.
func TestAckNextClaimIsAClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &claimCounter{Store: openTestStore(t)}
	m := &claimedCounter{}
	s := New(st, Config{Metrics: m})
	bob := agent("did:bob")
	held := sendAndClaim(t, s, bob, "one", "two")
	res, err := s.SetState(ctx, bob, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID, Next: &wire.NextRequest{}})
	if err != nil || res.Next == nil {
		t.Fatalf("ack with next: %+v, %v", res, err)
	}
	if n := m.n.Load(); n != 2 {
		t.Fatalf("Metrics.Claimed counted %d claims, want 2 (get_next's and the ack's next)", n)
	}

	// A waiter finds the box empty and says so; an ack that asks for the
	// next record with a wait then waits without a claim write.
	waiter, stop := context.WithCancel(ctx)
	defer stop()
	go s.Next(waiter, bob, bob.DID, model.Inbox, &wire.NextRequest{WaitMS: 30_000}) //nolint:errcheck // stopped below
	waitFor(t, "the waiter to find the box empty", func() bool {
		_, ok := s.notify.knownEmpty(bob.DID, model.Inbox, s.notify.WatchClaims(bob.DID, model.Inbox), s.nowMS())
		return ok
	})
	before := st.claims.Load()
	res, err = s.SetState(ctx, bob, res.Next.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: res.Next.Record.Lease.ID, Next: &wire.NextRequest{WaitMS: 50}})
	if err != nil || res.Record.State != model.Readed || res.Next != nil {
		t.Fatalf("ack with next at an empty box: %+v, %v", res, err)
	}
	if n := st.claims.Load() - before; n != 0 {
		t.Fatalf("the ack made %d claim writes at a box known to be empty, want 0", n)
	}
}
