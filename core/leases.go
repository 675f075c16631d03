package core

// Leases: who may finish a held record, and what a repeat of a finishing
// change is answered. A lease is the claim's proof; a change under one that
// no longer holds the record is lease_lost, unless it repeats the change
// that ended it.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// repeatOf reports whether a holder's change under leaseID, of the kind
// by and leaving the record in one of states, was made already: its lease
// ended by its holder's own change of that kind and the record is still
// as that change left it. The request is then a repeat whose first answer
// was lost (a timeout, a dropped connection), and it is answered with the
// record as it is, changing nothing, as SQS answers a delete under a
// receipt handle used before. A report under a lease that ran out, one of
// another kind (a failure after a release), or one that another change
// has followed since, is still lease_lost.
func repeatOf(rec model.Record, leaseID string, by model.EndedBy, states ...model.State) bool {
	e := rec.Ended
	return leaseID != "" && e != nil && e.ID == leaseID && e.By == by && slices.Contains(states, rec.State)
}

// setBy is the kind of change a state set under a lease is: setting the
// done state is an ack, as a success reported is.
func setBy(box model.BoxKind, to model.State) model.EndedBy {
	if to == model.DoneState(box) {
		return model.EndedByAck
	}
	return model.EndedBySet
}

// endedBy is the ended lease a holder's change under leaseID leaves on
// its record; none for a change that names no lease (an admin's).
func endedBy(leaseID string, by model.EndedBy) *model.EndedLease {
	if leaseID == "" {
		return nil
	}
	return &model.EndedLease{ID: leaseID, By: by}
}

// errRepeated is update's answer when its compare-and-set lost to the
// very change it would have made (the same ending of the same lease): a
// repeat sent while the first was still being written, or a store's own
// retry of a write whose commit answer it lost. The record is as the
// caller asked; it must neither fail nor count the change a second time.
var errRepeated = errors.New("core: the change was made by a repeat")

// sameEnd reports whether cur is what u, ending a lease, would have made.
func sameEnd(cur model.Record, u *store.Update) bool {
	return u.EndsLease != nil && cur.Ended != nil && *cur.Ended == *u.EndsLease && cur.State == u.To
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
		return leaseLost(rec)
	case rec.State != held:
		return &model.Error{Kind: model.ErrInvalidTransition,
			Message: fmt.Sprintf("the record is %s, not %s: claim it first", rec.State, held)}
	}
	return requireLease(who, rec, leaseID)
}

// leaseLost is the error of a change under a lease that does not hold rec.
func leaseLost(rec model.Record) error {
	return &model.Error{Kind: model.ErrLeaseLost, Field: "lease_id",
		Message: fmt.Sprintf("this lease does not hold the record (it is %s now): it expired and the record moved on, this claim ended it by another change, or it is another record's", rec.State)}
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
