package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

const schedBatch = 256

// runScheduler materializes delayed messages as they come due. It sleeps
// until the earliest due time, and is kicked when an earlier one arrives.
func (s *Service) runScheduler(ctx context.Context) {
	s.runDue(ctx, "materialize delayed messages", s.schedKick, s.st.NextDue,
		func(ctx context.Context, now int64) (int, error) { return s.materializeDue(ctx, now, "") })
}

// runDue is a background loop over work that comes due (delayed messages,
// Mails): it runs pass with the time now, again at once while a pass does
// something, and otherwise sleeps until next says the earliest due time
// (IdleRecheck at most) or kick wakes it.
func (s *Service) runDue(ctx context.Context, what string, kick <-chan struct{},
	next func(context.Context) (int64, bool, error), pass func(context.Context, int64) (int, error)) {
	for {
		n, err := pass(ctx, s.nowMS())
		if err != nil && ctx.Err() == nil {
			s.log.Error(what, "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		if n > 0 && err == nil {
			continue
		}
		wait := s.cfg.IdleRecheck
		if err == nil {
			if at, ok, err := next(ctx); err == nil && ok {
				wait = min(wait, max(time.Duration(at-s.nowMS())*time.Millisecond, 0))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// materializeDue turns every entry due by beforeMS (for one recipient, or
// all) into records, in due order, and returns how many it materialized.
func (s *Service) materializeDue(ctx context.Context, beforeMS int64, recipient string) (int, error) {
	s.schedMu.Lock()
	defer s.schedMu.Unlock()
	total := 0
	for {
		due, err := s.st.DueScheduled(ctx, store.DueParams{BeforeMS: beforeMS, Recipient: recipient, Limit: schedBatch})
		if err != nil {
			return total, err
		}
		for i := range due {
			err := s.materialize(ctx, &due[i])
			if errors.Is(err, model.ErrConflict) {
				continue // another node or a flush got there first
			}
			if err != nil {
				return total, err
			}
			total++
		}
		if len(due) < schedBatch {
			return total, nil
		}
	}
}

// materialize plans a due entry as if it were sent now and writes the plan
// together with the deletion of the entry, so it happens exactly once.
func (s *Service) materialize(ctx context.Context, e *store.ScheduleEntry) error {
	m, err := message.Decode(e.MsgBody)
	if err != nil {
		return err
	}
	c, err := s.check(ctx, m)
	if err != nil && (errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrTooLarge)) {
		// The message was valid when scheduled; if contacts changed so that
		// it no longer plans (say a group was dissolved), drop the entry
		// rather than retry forever, and say so in the log.
		return s.dropEntry(ctx, e, "dropping delayed message that no longer validates", "err", err)
	}
	if err != nil {
		return err
	}
	now := s.nowMS()
	var p *store.Plan
	switch e.Op {
	case opDispatch:
		var ingress *model.Route
		if len(e.Ctx) > 0 {
			_ = json.Unmarshal(e.Ctx, &ingress)
		}
		p, _, err = s.planDispatch(ctx, c, ingress, now)
	default:
		// A member posting in a group's name speaks for it only while a
		// member: one removed since is refused now, as a post made now
		// would be (canSpeakFor).
		if m := c.msg; c.isGroup && m.Source != "" && m.Source != m.From {
			ok, err := s.st.IsSubscriber(ctx, m.From, m.Source)
			if err != nil {
				return err
			}
			if !ok {
				return s.dropEntry(ctx, e, "dropping delayed group post: its author left the group", "group", m.From, "author", m.Source)
			}
		}
		// A recipient that became a group since would get the message
		// in the group's own INBOX, which no member reads, as a send made
		// now would be refused for (noGroupRecipient).
		if err := s.noGroupRecipient(ctx, c.msg.To); errors.Is(err, model.ErrInvalid) {
			return s.dropEntry(ctx, e, "dropping delayed message: a recipient is a group now ("+err.Error()+")")
		} else if err != nil {
			return err
		}
		var sc *wire.SendCtx
		if len(e.Ctx) > 0 {
			_ = json.Unmarshal(e.Ctx, &sc)
		}
		var res *wire.PostSendResult
		p, res, err = s.planPostSend(ctx, c, sc, now, false)
		if err == nil && !res.OK && !c.isGroup {
			// Every recipient blocks the author now: a send made now
			// would reach no one and be answered "blocked"; this one has
			// no one to answer but the author's event log. (A group post
			// still goes to the group's log, as one made now does.)
			return s.dropEntry(ctx, e, "dropping delayed message: every recipient blocks its author now ("+
				strings.Join(res.DroppedRecipients, ", ")+")")
		}
		if err == nil && len(res.DroppedRecipients) > 0 {
			s.log.Info("delayed message: some recipients block its author now and do not get it",
				"msg_id", e.MsgID, "dropped", res.DroppedRecipients)
		}
	}
	if err != nil {
		return err
	}
	p.ConsumeSchedule = e.ID
	return s.apply(ctx, p)
}

// dropEntry removes a due entry without delivering anything, as a cancel
// does (its body too, unless something else refers to it), and says why in
// the log and in a message.schedule_dropped event: retrying it would fail
// the same way for ever. An entry gone already was taken by another node.
func (s *Service) dropEntry(ctx context.Context, e *store.ScheduleEntry, why string, args ...any) error {
	s.log.Warn(why, append([]any{"msg_id", e.MsgID}, args...)...)
	err := s.st.CancelScheduled(ctx, e.ID, s.nowMS(), why)
	if errors.Is(err, model.ErrNotFound) {
		return nil
	}
	return err
}

// Scheduled lists pending delayed messages, soonest first: an admin's
// choice of them, or, for anyone else, those it sent (a sender named in q
// must be the caller).
func (s *Service) Scheduled(ctx context.Context, who model.Identity, q wire.ScheduledQuery) (*wire.ScheduledResult, error) {
	if err := message.CheckDID("sender", q.Sender, false); err != nil {
		return nil, err
	}
	if err := message.CheckDID("recipient", q.Recipient, false); err != nil {
		return nil, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	sq := store.ScheduleQuery{Sender: q.Sender, Recipient: q.Recipient, Limit: limit}
	if !isAdmin(who) {
		if q.Sender != "" && q.Sender != who.DID {
			return nil, model.Forbidden(fmt.Sprintf("%s may list only the delayed messages it sent, not those of %s", who.DID, q.Sender))
		}
		sq.Sender = who.DID
		if who.Role != model.RoleTunnel {
			sq.Op = opPostSend // what mayCancel would let it cancel
		}
	}
	items, n, err := s.st.ListScheduled(ctx, sq)
	if err != nil {
		return nil, err
	}
	res := &wire.ScheduledResult{Count: n, Items: make([]wire.ScheduledItem, 0, len(items))}
	for i := range items {
		res.Items = append(res.Items, scheduledItem(&items[i]))
	}
	return res, nil
}

func scheduledItem(e *store.ScheduleEntry) wire.ScheduledItem {
	return wire.ScheduledItem{ID: e.ID, Op: e.Op, MsgID: e.MsgID, Recipients: e.Recipients, Sender: e.Sender,
		DueAtMS: e.DueAtMS, ScheduledDeliveryTime: rfc3339(e.DueAtMS), CreatedAtMS: e.CreatedAtMS}
}

// CancelScheduled cancels a pending delayed message: nothing of it is
// delivered. An admin may, and whoever sent it (mayCancel); to anyone else
// an entry is not found, whether or not it exists, as a message one cannot
// read is. An entry already delivered is not found either.
func (s *Service) CancelScheduled(ctx context.Context, who model.Identity, id int64) (*wire.ScheduledItem, error) {
	if id <= 0 {
		return nil, model.Invalid("id", "must be a positive integer")
	}
	e, err := s.st.GetScheduled(ctx, id)
	if err != nil {
		return nil, err
	}
	if !isAdmin(who) && !mayCancel(who, &e) {
		return nil, model.NotFound("scheduled entry")
	}
	if err := s.st.CancelScheduled(ctx, id, s.nowMS(), ""); err != nil {
		return nil, err
	}
	it := scheduledItem(&e)
	return &it, nil
}

// mayCancel says whether who sent e (ScheduleEntry.Sender): the author of
// a post_send; the tunnel that made a dispatch (or that an admin's names in
// its ingress_ctx). Who is named in a dispatched message's from is an
// outside party, not its sender here.
func mayCancel(who model.Identity, e *store.ScheduleEntry) bool {
	if e.Sender == "" || e.Sender != who.DID {
		return false
	}
	return e.Op != opDispatch || who.Role == model.RoleTunnel
}

// FlushScheduled materializes pending delayed messages now, in due order
// (admin only).
func (s *Service) FlushScheduled(ctx context.Context, who model.Identity, req *wire.FlushRequest) (*wire.FlushResult, error) {
	if err := requireAdmin(who, "flushing scheduled messages"); err != nil {
		return nil, err
	}
	if err := message.CheckDID("recipient", req.Recipient, false); err != nil {
		return nil, err
	}
	n, err := s.materializeDue(ctx, math.MaxInt64, req.Recipient)
	if err != nil {
		return nil, err
	}
	return &wire.FlushResult{Flushed: n}, nil
}

func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return wire.DefaultLimit, nil
	case limit < 0 || limit > wire.MaxLimit:
		return 0, model.Invalid("limit", "must be between 0 (the default) and 1000")
	}
	return limit, nil
}
