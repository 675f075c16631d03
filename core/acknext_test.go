package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

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
	for _, txt := range []string{"one", "two", "three"} {
		if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:a", []string{bob.DID}, txt)}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := s.Next(ctx, bob, bob.DID, model.Inbox, &wire.NextRequest{})
	if err != nil || held == nil {
		t.Fatalf("claim: %v, %v", held, err)
	}
	st.broken = true
	res, err := s.SetState(ctx, bob, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed, Next: &wire.NextRequest{}})
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
	res, err = s.ReportDelivery(gone, bob, second.Record.RecordID, &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, Next: &wire.NextRequest{WaitMS: 30_000}})
	if err != nil || res.Record.State != model.Readed || res.Next != nil {
		t.Fatalf("report whose next was canceled = %+v, %v; want the acked record, no next, no error", res, err)
	}
}
