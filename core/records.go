package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// actOn loads a record for a change by who.
func (s *Service) actOn(ctx context.Context, who model.Identity, recordID string) (model.Record, error) {
	rec, err := s.st.GetRecord(ctx, recordID)
	if err != nil {
		return rec, err
	}
	if err := canAct(who, rec.Owner); err != nil {
		if s.canRead(ctx, who, rec.Owner, rec.BoxKind) != nil {
			return model.Record{}, notVisible()
		}
		return rec, err
	}
	return rec, nil
}

// notVisible answers for a record the caller may not read as for one that
// does not exist: a record's id follows from its owner, box and message,
// so "forbidden" would tell whoever knows a message id whether someone
// received it (GetMessage answers the same way).
func notVisible() error { return model.NotFound("record") }

// update applies a compare-and-set and turns a lost race into a clear
// error: the lease moved on, or the record changed under the caller. With
// next set (a change that asks for the box's next record), the first claim
// is made in the same write when next would make it at once, and left in
// next.first: a worker's ack and claim then wait for the store's writer
// once, not twice. was is the record as the caller read it before the
// change (deliveryNotice). A compare-and-set lost to the very change u
// would make, ending the same lease the same way, is errRepeated with the
// record as that change left it.
func (s *Service) update(ctx context.Context, was model.Record, u *store.Update, next *nextCall) (model.Record, error) {
	if err := s.deliveryNotice(ctx, was, u); err != nil {
		return was, err
	}
	if u.To == model.Readed && u.From != model.Readed {
		u.Receipt = memberReceipt(was, u.NowMS)
	}
	var rec model.Record
	var err error
	if f, p := s.firstClaim(next, u); f != nil {
		var c store.Claimed
		if rec, c, err = s.st.UpdateThenClaim(ctx, u, p); err == nil {
			f.rec, f.err = c.Record, c.Err
			if c.Err == nil {
				s.claimed(p.Owner, p.Box, p.NowMS, p.LeaseUntilMS)
			}
			next.first = f
		}
	} else {
		rec, err = s.st.Update(ctx, u)
	}
	if err == nil {
		if rec.State == model.ClaimableState(rec.BoxKind) {
			s.notify.Changed(rec.Owner, rec.BoxKind) // a retry, a redrive, an expired lease
		} else {
			s.notify.Updated(rec.Owner, rec.BoxKind)
		}
		return rec, nil
	}
	if !errors.Is(err, model.ErrConflict) {
		return rec, err
	}
	cur, gerr := s.st.GetRecord(ctx, u.RecordID)
	if gerr != nil {
		return rec, gerr
	}
	if sameEnd(cur, u) {
		return cur, errRepeated
	}
	if u.ExpectLeaseID != "" && cur.State == u.From && (cur.Lease == nil || cur.Lease.ID != u.ExpectLeaseID) {
		return cur, &model.Error{Kind: model.ErrLeaseLost, Field: "lease_id",
			Message: "the lease expired and the record was claimed again; the holder no longer owns it"}
	}
	return cur, model.Conflict("", fmt.Sprintf("record changed concurrently: it is now %s", cur.State))
}

// firstClaim prepares the claim next's first attempt would make at once,
// if it would: not when a waiting claimer would wait without one (the box
// is known to be empty). The watch is taken before the claim, as next
// takes it before each attempt; so not for a change that makes its record
// claimable again (a nack, a retry), whose own notification would close
// that watch and send next round again for nothing.
func (s *Service) firstClaim(next *nextCall, u *store.Update) (*firstClaim, store.ClaimParams) {
	if next == nil || !next.lock || u.To == model.ClaimableState(next.box) {
		return nil, store.ClaimParams{}
	}
	owner, box := next.owner, next.box
	f := &firstClaim{changed: s.notify.WatchClaims(owner, box), tried: s.nowMS()}
	if next.req.WaitMS > 0 {
		if _, known := s.notify.knownEmpty(owner, box, f.changed, f.tried); known {
			return nil, store.ClaimParams{}
		}
	}
	return f, claimParams(next.who, owner, box, f.tried, next.lease, next.req.Holder)
}

// SetState is update_record_state: a user-driven transition checked
// against the transition table.
func (s *Service) SetState(ctx context.Context, who model.Identity, recordID string, req *wire.StateRequest) (*wire.StateResult, error) {
	to, err := model.ParseState(string(req.NewState))
	if err != nil {
		return nil, model.Invalid("new_state", err.(*model.Error).Message)
	}
	rec, err := s.actOn(ctx, who, recordID)
	if err != nil {
		return nil, err
	}
	repeat := repeatOf(rec, req.LeaseID, setBy(rec.BoxKind, to), to)
	if !repeat {
		// The lease first, as requireHeld: a holder that lost the record
		// hears that, not what the record's state now forbids.
		if req.LeaseID != "" && (rec.Lease == nil || rec.Lease.ID != req.LeaseID) {
			return nil, leaseLost(rec)
		}
		if err := model.CheckTransition(rec.BoxKind, rec.State, to); err != nil {
			return nil, err
		}
		if err := requireLease(who, rec, req.LeaseID); err != nil {
			return nil, err
		}
	}
	next, err := s.checkThenNext(ctx, who, rec, req.Next)
	if err != nil {
		return nil, err
	}
	body, err := s.bodyBefore(ctx, rec, orTrue(req.WithObject), next)
	if err != nil {
		return nil, err
	}
	if repeat {
		return s.thenNext(ctx, rec, orTrue(req.WithObject), body, next)
	}
	now := s.nowMS()
	u := &store.Update{RecordID: rec.RecordID, From: rec.State, ExpectLeaseID: req.LeaseID, To: to,
		Delivery: rec.Delivery, NowMS: now, EventDetail: req.Reason}
	if to == model.HeldState(rec.BoxKind) {
		u.Lease = &model.Lease{ID: newLeaseID(), Holder: who.DID, ExpiresAtMS: now + s.cfg.DefaultLease.Milliseconds()}
	} else {
		u.EndsLease = endedBy(req.LeaseID, setBy(rec.BoxKind, to))
	}
	if to == model.ClaimableState(rec.BoxKind) {
		// Moved by hand, it is claimable at once (the update leaves its
		// visibility at 0): a retry backoff it had belongs to the attempt
		// this move replaces, and a peek must not keep waiting it out.
		u.Delivery.NextRetryAtMS = 0
	}
	if to == model.DoneState(rec.BoxKind) {
		clearFailure(&u.Delivery)
	}
	if rec.State == model.Dead && to == model.ClaimableState(rec.BoxKind) {
		u.Delivery.Attempts = 0
		u.EventType = model.EventRecordRedriven
	}
	if to == model.Dead {
		u.EventType = model.EventRecordDead
	}
	out, err := s.update(ctx, rec, u, next)
	switch {
	case errors.Is(err, errRepeated):
	case err != nil:
		return nil, err
	case to == model.Dead:
		s.cfg.Metrics.Dead(rec.BoxKind)
	}
	return s.thenNext(ctx, out, orTrue(req.WithObject), body, next)
}

// clearFailure forgets, on a success, what the last failure said: a record
// done is not failing, and whoever counts records by error_code must not
// count it. last_error keeps the history.
func clearFailure(d *model.Delivery) {
	d.ErrorCode, d.ErrorMessage, d.RetryAfterMS = "", "", 0
}

// ReportDelivery is report_delivery: the holder of a claimed record says
// how it went. Success acknowledges (SENT / READED); failure retries with
// backoff or, out of attempts or not retryable, goes DEAD.
func (s *Service) ReportDelivery(ctx context.Context, who model.Identity, recordID string, req *wire.DeliveryRequest) (*wire.StateResult, error) {
	if req.Result == nil {
		return nil, model.Invalid("result", "is required")
	}
	r := req.Result
	if r.RetryAfterMS < 0 || r.RetryAfterMS > wire.MaxRetryAfterMS {
		return nil, model.Invalid("result.retry_after_ms", fmt.Sprintf("must be between 0 and %d (7 days)", wire.MaxRetryAfterMS))
	}
	if r.OK {
		// A success with a failure's fields is a report that contradicts
		// itself; taking either half would drop the other without a word.
		for _, f := range []struct {
			name string
			set  bool
		}{{"result.error_code", r.ErrorCode != ""}, {"result.error_message", r.ErrorMessage != ""},
			{"result.retryable", r.Retryable}, {"result.retry_after_ms", r.RetryAfterMS != 0}} {
			if f.set {
				return nil, model.Invalid(f.name, "is for a failure (ok false); a success takes only external_msg_id")
			}
		}
	} else if r.ExternalMsgID != "" {
		return nil, model.Invalid("result.external_msg_id", "is for a success (ok true): a failed delivery has no message on the far side")
	}
	rec, err := s.actOn(ctx, who, recordID)
	if err != nil {
		return nil, err
	}
	repeat := repeatOf(rec, req.LeaseID, model.EndedByAck, model.DoneState(rec.BoxKind))
	switch {
	case !r.OK && r.Retryable: // retried, or DEAD out of attempts
		repeat = repeatOf(rec, req.LeaseID, model.EndedByFail, model.ClaimableState(rec.BoxKind), model.Dead)
	case !r.OK:
		repeat = repeatOf(rec, req.LeaseID, model.EndedByFail, model.Dead)
	}
	if !repeat {
		if err := s.requireHeld(who, rec, req.LeaseID); err != nil {
			return nil, err
		}
	}
	next, err := s.checkThenNext(ctx, who, rec, req.Next)
	if err != nil {
		return nil, err
	}
	body, err := s.bodyBefore(ctx, rec, orTrue(req.WithObject), next)
	if err != nil {
		return nil, err
	}
	if repeat {
		return s.thenNext(ctx, rec, orTrue(req.WithObject), body, next)
	}
	leaseID := req.LeaseID
	if leaseID == "" && rec.Lease != nil {
		leaseID = rec.Lease.ID
	}
	var out model.Record
	if r.OK {
		now := s.nowMS()
		d := rec.Delivery
		d.Attempts++
		d.ExternalMsgID, d.DeliveredAtMS, d.NextRetryAtMS = r.ExternalMsgID, now, 0
		clearFailure(&d)
		out, err = s.update(ctx, rec, &store.Update{RecordID: rec.RecordID, From: rec.State, ExpectLeaseID: leaseID,
			EndsLease: endedBy(req.LeaseID, model.EndedByAck), To: model.DoneState(rec.BoxKind), Delivery: d,
			NowMS: now, EventType: model.EventRecordDelivered}, next)
	} else {
		f := failure{retryable: r.Retryable, retryAfterMS: r.RetryAfterMS, code: r.ErrorCode, msg: r.ErrorMessage}
		out, err = s.fail(ctx, rec, leaseID, req.LeaseID != "", f, "", next)
	}
	if err != nil && !errors.Is(err, errRepeated) {
		return nil, err
	}
	return s.thenNext(ctx, out, orTrue(req.WithObject), body, next)
}

// checkThenNext checks a request's next (nil: none) for the box of rec,
// before the change it follows is made: bad input changes nothing. Its
// fields are named under "next.".
func (s *Service) checkThenNext(ctx context.Context, who model.Identity, rec model.Record, req *wire.NextRequest) (*nextCall, error) {
	if req == nil {
		return nil, nil
	}
	if !orTrue(req.LockOnTake) {
		return nil, model.Invalid("next.lock_on_take", "must be true: next claims the box's next record")
	}
	p, err := s.checkNext(ctx, who, rec.Owner, rec.BoxKind, req)
	var me *model.Error
	if errors.As(err, &me) && me.Field != "" {
		e := *me
		e.Field = "next." + e.Field
		return nil, &e
	}
	return p, err
}

// bodyBefore reads, before a change with next, the body its answer
// carries: the change's own write may make next's first claim (update),
// and once that is made nothing may fail before next hands it over, or
// the record would stay held under a lease nobody was given.
func (s *Service) bodyBefore(ctx context.Context, rec model.Record, withObj bool, next *nextCall) (json.RawMessage, error) {
	if !withObj || next == nil {
		return nil, nil
	}
	return s.st.GetMessage(ctx, rec.MsgID)
}

// thenNext answers a change with rec and, when next is set, claims the
// box's next record: JetStream's AckNext, one call where a worker made
// two. The change is made by then, so a claim cut short (a gone client,
// shutdown) answers with no next, as get_next answers nothing, and a
// claim that fails is returned as a *NextError along with the result.
// With next, body is rec's, read before the change (bodyBefore).
func (s *Service) thenNext(ctx context.Context, rec model.Record, withObj bool, body json.RawMessage, next *nextCall) (*wire.StateResult, error) {
	if next != nil {
		out := &wire.StateResult{RecordWithMsg: wire.RecordWithMsg{Record: rec, Msg: body}}
		var err error
		out.Next, err = s.next(ctx, next)
		return out, nextErr(ctx, err)
	}
	res, err := s.withMsg(ctx, rec, withObj)
	if err != nil {
		return nil, err
	}
	return &wire.StateResult{RecordWithMsg: *res}, nil
}

// nextErr is what thenNext makes of next's error: none for a claim cut
// short by the caller's going away, a *NextError for any other.
func nextErr(ctx context.Context, err error) error {
	if err == nil || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return nil
	}
	return &NextError{Err: err}
}

// NextError comes with the result of a change asked to claim the next
// record (SetState, ReportDelivery with next) when the change was made but
// the claim failed.
type NextError struct{ Err error }

func (e *NextError) Error() string {
	return "the change was made, but claiming the next record failed: " + e.Err.Error()
}

func (e *NextError) Unwrap() error { return e.Err }

// backoff is the retry delay after the n-th failed attempt: base·2^(n-1),
// capped.
func (s *Service) backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := s.cfg.BackoffBase
	for i := 1; i < n && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.BackoffMax)
}

// failure is what a failed attempt reports.
type failure struct {
	retryable    bool
	retryAfterMS int64
	code, msg    string
}

// fail counts a failed attempt of a held record and puts it back to wait
// for max(backoff, retry_after) or, when it may not retry, makes it DEAD.
// byHolder says the lease's holder reports it, naming its lease, rather
// than the reaper or an admin: the record then keeps the lease as ended
// by its holder (Record.Ended), and the report's repeat is known.
func (s *Service) fail(ctx context.Context, rec model.Record, leaseID string, byHolder bool, f failure, eventType string, next *nextCall) (model.Record, error) {
	now := s.nowMS()
	d := rec.Delivery
	d.Attempts++
	code, msg, retryable := f.code, f.msg, f.retryable
	d.ErrorCode, d.ErrorMessage, d.RetryAfterMS = code, msg, f.retryAfterMS
	d.LastError = code
	if code == "" {
		d.LastError = msg
	} else if msg != "" {
		d.LastError = code + ": " + msg
	}
	u := &store.Update{RecordID: rec.RecordID, From: rec.State, ExpectLeaseID: leaseID, NowMS: now, EventType: eventType}
	if byHolder {
		u.EndsLease = endedBy(leaseID, model.EndedByFail)
	}
	limit := s.cfg.MaxAttempts
	if rec.BoxKind == model.TunnelOutbox {
		limit = s.cfg.TunnelMaxAttempts
	}
	if retryable && d.Attempts < limit {
		wait := max(s.backoff(d.Attempts), time.Duration(f.retryAfterMS)*time.Millisecond)
		d.NextRetryAtMS = now + wait.Milliseconds()
		u.To, u.VisibleAtMS = model.ClaimableState(rec.BoxKind), d.NextRetryAtMS
		if u.EventType == "" {
			u.EventType = model.EventRecordRetry
		}
		u.EventDetail = fmt.Sprintf("attempt %d failed (%s); retry at %s", d.Attempts, d.LastError, rfc3339(d.NextRetryAtMS))
	} else {
		d.NextRetryAtMS = 0
		u.To = model.Dead
		if u.EventType == "" {
			u.EventType = model.EventRecordDead
		}
		u.EventDetail = fmt.Sprintf("attempt %d failed (%s); dead", d.Attempts, d.LastError)
	}
	u.Delivery = d
	out, err := s.update(ctx, rec, u, next)
	if err != nil {
		return out, err // errRepeated included: the first counted it
	}
	if u.To == model.Dead {
		s.cfg.Metrics.Dead(rec.BoxKind)
	} else {
		s.cfg.Metrics.Retried(rec.BoxKind)
	}
	return out, nil
}

// Redrive returns a DEAD record to its waiting state with attempts reset.
func (s *Service) Redrive(ctx context.Context, who model.Identity, recordID string) (*wire.RecordWithMsg, error) {
	rec, err := s.actOn(ctx, who, recordID)
	if err != nil {
		return nil, err
	}
	out, err := s.redrive(ctx, rec)
	if err != nil {
		return nil, err
	}
	return s.withMsg(ctx, out, true)
}

func (s *Service) redrive(ctx context.Context, rec model.Record) (model.Record, error) {
	if rec.State != model.Dead {
		return rec, &model.Error{Kind: model.ErrInvalidTransition, Message: fmt.Sprintf("only DEAD records can be redriven; this one is %s", rec.State)}
	}
	d := rec.Delivery
	d.Attempts, d.NextRetryAtMS = 0, 0
	return s.update(ctx, rec, &store.Update{RecordID: rec.RecordID, From: model.Dead, To: model.ClaimableState(rec.BoxKind),
		Delivery: d, NowMS: s.nowMS(), EventType: model.EventRecordRedriven}, nil)
}

// RedriveBox redrives up to limit DEAD records of a box, oldest first: in
// seq order, the box's own, since messages created in the same millisecond
// share a sort key.
func (s *Service) RedriveBox(ctx context.Context, who model.Identity, owner string, box model.BoxKind, req *wire.RedriveRequest) (*wire.RedriveResult, error) {
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	limit, err := checkLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	recs, err := s.st.Sync(ctx, store.SyncParams{Owner: owner, Box: box, States: []model.State{model.Dead}, Limit: limit})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		if err := s.noSuchConsumer(ctx, owner, box); err != nil {
			return nil, err
		}
	}
	res := &wire.RedriveResult{RecordIDs: []string{}}
	for _, r := range recs {
		if _, err := s.redrive(ctx, r); err != nil {
			if errors.Is(err, model.ErrConflict) {
				continue
			}
			return nil, err
		}
		res.Redriven++
		res.RecordIDs = append(res.RecordIDs, r.RecordID)
	}
	return res, nil
}
