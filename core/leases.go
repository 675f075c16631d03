package core

// Leases: who may finish a held record, and what a repeat of a finishing
// change is answered. A lease is the claim's proof; a change under one that
// no longer holds the record is lease_lost, unless it repeats the change
// that ended it.

import (
	"context"
	"fmt"
	"slices"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// repeatOf reports whether a holder's change under leaseID, one that
// leaves the record in one of states, was made already: its lease ended
// by its holder's own hand and the record is still as that change left
// it. The request is then a repeat whose first answer was lost (a
// timeout, a dropped connection), and it is answered with the record as
// it is, changing nothing, as SQS answers a delete under a receipt handle
// used before. A late report under a lease that ran out, or one that
// another change has followed since, is still lease_lost.
func repeatOf(rec model.Record, leaseID string, states ...model.State) bool {
	return leaseID != "" && rec.EndedLeaseID == leaseID && slices.Contains(states, rec.State)
}

// requireHeld checks that a worker's ack, failure or lease extension
// comes from the claim that holds the record. A lease that does not hold
// it is lease_lost, whatever became of the record since (claimed again,
// back in the queue after the lease ran out, or done): the worker learns
// it no longer owns it, rather than that the record is in some state it
// did not expect.
func (s *Service) requireHeld(who model.Identity, rec model.Record, leaseID string) error {
	held := model.HeldState(rec.BoxKind)
	switch {
	case leaseID != "" && (rec.State != held || rec.Lease == nil || rec.Lease.ID != leaseID):
		return &model.Error{Kind: model.ErrLeaseLost, Field: "lease_id",
			Message: fmt.Sprintf("this lease does not hold the record (it is %s now): it expired and the record moved on, this claim ended it by another change, or it is another record's", rec.State)}
	case rec.State != held:
		return &model.Error{Kind: model.ErrInvalidTransition,
			Message: fmt.Sprintf("the record is %s, not %s: claim it first", rec.State, held)}
	}
	return requireLease(who, rec, leaseID)
}

// requireLease refuses a change to a held record that does not name the
// claim holding it. The lease is what tells one claim from the next:
// workers often share a DID, and one whose lease ran out while it worked
// must not finish a record another worker has claimed since, which it
// could by naming no lease at all. An admin, acting by hand, may.
func requireLease(who model.Identity, rec model.Record, leaseID string) error {
	if leaseID != "" || isAdmin(who) || rec.State != model.HeldState(rec.BoxKind) {
		return nil
	}
	until := ""
	if rec.Lease != nil {
		until = " until " + rfc3339(rec.Lease.ExpiresAtMS)
	}
	return model.Invalid("lease_id", fmt.Sprintf("is required: the record is held by a claim%s; give the lease_id the claim returned", until))
}

// ExtendLease lets the holder keep a claimed record longer.
func (s *Service) ExtendLease(ctx context.Context, who model.Identity, recordID string, req *wire.LeaseRequest) (*wire.RecordWithMsg, error) {
	lease, err := s.leaseDuration(req.LeaseMS)
	if err != nil {
		return nil, err
	}
	rec, err := s.actOn(ctx, who, recordID)
	if err != nil {
		return nil, err
	}
	if err := s.requireHeld(who, rec, req.LeaseID); err != nil {
		return nil, err
	}
	now := s.nowMS()
	l := *rec.Lease
	l.ExpiresAtMS = now + lease.Milliseconds()
	out, err := s.update(ctx, rec, &store.Update{RecordID: rec.RecordID, From: rec.State, ExpectLeaseID: l.ID, To: rec.State,
		Delivery: rec.Delivery, Lease: &l, NowMS: now, EventType: model.EventLeaseExtended}, nil)
	if err != nil {
		return nil, err
	}
	return s.withMsg(ctx, out, true)
}
