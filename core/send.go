package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// Operation names, also used to scope idempotency keys and scheduled
// entries.
const (
	opDispatch = "dispatch"
	opPostSend = "post_send"
)

// checked is a validated message ready to plan.
type checked struct {
	msg     *message.Message
	id      string
	body    []byte
	isGroup bool // from is a known group and source is set
	// to, when set, is who planDispatch writes a direct message to
	// instead of msg.to, blocks already applied: a Mail's audience.
	to []string
	// delivery is the group's, when isGroup: read when the message is
	// planned, so a delayed message follows the group as it is when due.
	delivery model.GroupDelivery
	// shared holds threadKey's answer when it is the same for every owner
	// (a group, a large direct conversation), and groupTag a
	// group INBOX record's tag: a fan-out asks for them once per member,
	// and they were a string each (a tenth of a big fan-out's plan,
	// docs/benchmarks.md, nineteenth round). people are a direct
	// conversation's participants, sorted.
	shared   string
	groupTag string
	people   []string
	// topic is the message's topic, or the one a reply continues
	// (replyTopic).
	topic string
}

func (s *Service) check(ctx context.Context, m *message.Message) (*checked, error) {
	if m == nil {
		return nil, model.Invalid("msg", "is required")
	}
	var delivery model.GroupDelivery // "" unless from is a group
	if m.From != "" {
		d, err := s.st.GroupDelivery(ctx, m.From)
		if err != nil {
			return nil, err
		}
		delivery = d
	}
	fromGroup := delivery != ""
	if fromGroup && m.Source == "" && len(m.To) == 0 {
		return nil, model.Invalid("msg.source", "a group message needs its author in source (or recipients in to)")
	}
	body, err := m.Validate(s.cfg.MaxMessageBytes, fromGroup)
	if err != nil {
		return nil, err
	}
	c := &checked{msg: m, id: message.IDOf(body), body: body, isGroup: fromGroup && m.Source != ""}
	if c.isGroup {
		c.delivery = delivery
	}
	if m.Thread != nil && m.Thread.Topic != "" {
		c.topic = m.Thread.Topic
	} else if c.topic, err = s.replyTopic(ctx, m); err != nil {
		return nil, err
	}
	return c, nil
}

// dueTime turns delay_ms / deliver_at_ms into an absolute due time. A delay
// of zero or less, or a due time not in the future, means immediate.
func (s *Service) dueTime(delayMS, deliverAtMS *int64, nowMS int64) (int64, bool, error) {
	if delayMS != nil && deliverAtMS != nil {
		return 0, false, model.Invalid("delay_ms", "give delay_ms or deliver_at_ms, not both")
	}
	maxMS := s.cfg.MaxDelay.Milliseconds()
	switch {
	case delayMS != nil && *delayMS > 0:
		if *delayMS > maxMS {
			return 0, false, model.Invalid("delay_ms", fmt.Sprintf("must be at most %d (%s)", maxMS, s.cfg.MaxDelay))
		}
		return nowMS + *delayMS, true, nil
	case deliverAtMS != nil && *deliverAtMS > nowMS:
		if *deliverAtMS-nowMS > maxMS {
			return 0, false, model.Invalid("deliver_at_ms", fmt.Sprintf("must be at most %s in the future", s.cfg.MaxDelay))
		}
		return *deliverAtMS, true, nil
	}
	return 0, false, nil
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// scheduledFor is a delayed send's due time for its answer. A repeat of a
// keyed delayed send answers the due time of the entry the key made, past
// if it came due already; zero when the key made none (store.Schedule),
// and the answer then names no time.
func scheduledFor(due int64) string {
	if due == 0 {
		return ""
	}
	return rfc3339(due)
}

// recipientsOf lists who a message is for, for the scheduled listing.
func recipientsOf(c *checked) []string {
	if c.isGroup {
		return []string{c.msg.From}
	}
	return uniq(c.msg.To)
}

// Dispatch stores an inbound message and puts it in its recipients'
// inboxes (or, for a group message, in the group's inbox and each
// subscriber's).
func (s *Service) Dispatch(ctx context.Context, who model.Identity, req *wire.DispatchRequest) (*wire.DispatchResult, error) {
	if who.Role != model.RoleAdmin && who.Role != model.RoleTunnel {
		return nil, model.Forbidden("dispatch needs a tunnel or admin token; agents send with post_send")
	}
	if who.Role == model.RoleTunnel && req.IngressCtx != nil && req.IngressCtx.TunnelDID == "" {
		// A tunnel's own dispatch came in through it, said or not: the
		// records keep that (and let it read the message: CameThrough).
		ing := *req.IngressCtx
		ing.TunnelDID = who.DID
		req.IngressCtx = &ing
	}
	if err := checkIngress(who, req.IngressCtx); err != nil {
		return nil, err
	}
	if err := checkIdemKey(req.IdempotencyKey); err != nil {
		return nil, err
	}
	c, err := s.check(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	if err := checkRecipients(who, c); err != nil {
		return nil, err
	}
	if err := s.tunnelSpeaksFor(ctx, who, c); err != nil {
		return nil, err
	}
	if req.Aggregate != nil {
		return s.aggregate(ctx, who, req, c)
	}
	var res *wire.DispatchResult
	// The tunnel that sent it: the caller, whether or not it names itself
	// in ingress_ctx (checkIngress); for an admin's dispatch, the one it
	// names, if any.
	o := sendOpts{req.DelayMS, req.DeliverAtMS, req.IdempotencyKey, req.IngressCtx, ""}
	switch {
	case who.Role == model.RoleTunnel:
		o.sender = who.DID
	case req.IngressCtx != nil:
		o.sender = req.IngressCtx.TunnelDID
	}
	out, err := s.send(ctx, who, c, opDispatch, o,
		func(now int64) (p *store.Plan, answer any, err error) {
			p, res, err = s.planDispatch(ctx, c, req.IngressCtx, now)
			return p, res, err
		})
	if err != nil {
		return nil, err
	}
	return answerOf(out, res, func() *wire.DispatchResult {
		return &wire.DispatchResult{OK: true, MsgID: c.id, ScheduledDeliveryTime: scheduledFor(out.due), ScheduledID: out.id,
			DeliveredRecipients: []string{}, DroppedRecipients: []string{}, DeliveredAgents: []string{}}
	})
}

// PostSend stores an outbound message: a copy in the author's OUTBOX, a
// TUNNEL_OUTBOX record per chosen route of each routed recipient, and an
// INBOX record for each local recipient.
func (s *Service) PostSend(ctx context.Context, who model.Identity, req *wire.PostSendRequest) (*wire.PostSendResult, error) {
	if req.Msg == nil {
		return nil, model.Invalid("msg", "is required")
	}
	if !isAdmin(who) && req.Msg.LogicalSender() != who.DID {
		return nil, model.Forbidden(fmt.Sprintf("%s may post_send only as itself (msg.source if set, else msg.from)", who.DID))
	}
	if err := checkSendCtx(req.SendCtx); err != nil {
		return nil, err
	}
	if err := checkIdemKey(req.IdempotencyKey); err != nil {
		return nil, err
	}
	c, err := s.check(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	if err := checkRecipients(who, c); err != nil {
		return nil, err
	}
	if err := s.canSpeakFor(ctx, who, c); err != nil {
		return nil, err
	}
	if c.isGroup && len(c.msg.To) > 0 {
		// It would be dropped without a word: a group message goes to the
		// group's subscribers and external chat only.
		return nil, model.Invalid("msg.to", fmt.Sprintf("a message from group %s goes to its subscribers; leave msg.to empty, or send the others a message of their own", c.msg.From))
	}
	if err := s.noGroupRecipient(ctx, c.msg.To); err != nil {
		return nil, err
	}
	if req.DelayMS != nil || req.DeliverAtMS != nil { // a send made now is checked as it plans
		if err := s.checkSendRoutes(ctx, c, req.SendCtx); err != nil {
			return nil, err
		}
	}
	var res *wire.PostSendResult
	out, err := s.send(ctx, who, c, opPostSend, sendOpts{req.DelayMS, req.DeliverAtMS, req.IdempotencyKey, req.SendCtx, c.msg.LogicalSender()},
		func(now int64) (p *store.Plan, answer any, err error) {
			p, res, err = s.planPostSend(ctx, c, req.SendCtx, now, true)
			return p, res, err
		})
	if err != nil {
		return nil, err
	}
	return answerOf(out, res, func() *wire.PostSendResult {
		return &wire.PostSendResult{OK: true, MsgID: c.id, ScheduledDeliveryTime: scheduledFor(out.due), ScheduledID: out.id,
			Deliveries: []wire.Delivery{}, LocalRecipients: []string{}, DroppedRecipients: []string{}}
	})
}

// noGroupRecipient refuses a post_send naming a group in msg.to: the
// group would get the message in its own INBOX, which none of its members
// reads, and the sender would be told it was delivered. (A dispatch is
// not refused: a tunnel that drops what msgcenter refuses would lose the
// message, where the group's INBOX keeps it for an admin.)
func (s *Service) noGroupRecipient(ctx context.Context, to []string) error {
	for i, d := range to {
		delivery, err := s.st.GroupDelivery(ctx, d)
		if err != nil {
			return err
		}
		if delivery != "" {
			return model.Invalid(fmt.Sprintf("msg.to[%d]", i), fmt.Sprintf("%s is a group: post to it with msg.from = the group and msg.source = the author, and no msg.to", d))
		}
	}
	return nil
}

// sendOpts are the parts of a dispatch or post_send request besides the
// message.
type sendOpts struct {
	delayMS, deliverAtMS *int64
	idemKey              string
	opCtx                any // ingress_ctx or send_ctx, kept for a delayed plan
	// sender of a delayed message, who may list and cancel it: the author
	// of a post_send, the tunnel a dispatch's ingress_ctx names.
	sender string
}

// sent is how send went: scheduled, with the entry's due time and id, or
// planned and written now (the plan filled in the caller's result), or a
// repeat of a keyed send made now, which wrote nothing and is answered as
// that send was (answer, its result as JSON).
type sent struct {
	scheduled bool
	due, id   int64
	repeat    bool
	answer    []byte
}

// aggregatedAnswer is what a key bound by an aggregated dispatch keeps in
// place of an answer: a repeat of the part finds its bucket again
// (AddMailPart), and a repeat without aggregate is not the same request.
var aggregatedAnswer = []byte(`"aggregated"`)

// answerOf is a send's answer: its plan's (planned), the entry's when it
// was scheduled, or the first send's when it was a repeat.
func answerOf[T any](out sent, planned *T, scheduled func() *T) (*T, error) {
	switch {
	case out.repeat:
		return firstAnswer(out.answer, planned)
	case out.scheduled:
		return scheduled(), nil
	}
	return planned, nil
}

// firstAnswer is the answer a repeat gets: the first send's, kept with its
// key. A key bound before answers were kept has none; the repeat, which
// wrote nothing either, is then answered from its own plan.
func firstAnswer[T any](answer []byte, planned *T) (*T, error) {
	if answer == nil {
		return planned, nil
	}
	var first T
	if err := json.Unmarshal(answer, &first); err != nil {
		return nil, fmt.Errorf("decode the answer kept with an idempotency key: %w", err)
	}
	return &first, nil
}

// send is what dispatch and post_send share: schedule the message when it
// is delayed, or plan and write it now. A send whose idempotency key a
// delayed send bound is a repeat of that one, made at or after its due
// time (a deliver_at_ms no longer in the future): it is answered with the
// entry, as a repeat before it is, and sends nothing (store.KeyScheduled).
func (s *Service) send(ctx context.Context, who model.Identity, c *checked, op string, o sendOpts, plan func(now int64) (p *store.Plan, answer any, err error)) (sent, error) {
	now := s.nowMS()
	due, delayed, err := s.dueTime(o.delayMS, o.deliverAtMS, now)
	if err != nil {
		return sent{}, err
	}
	idem := s.idem(who, op, o.idemKey)
	if delayed {
		ctxJSON, err := json.Marshal(o.opCtx)
		if err != nil {
			return sent{}, fmt.Errorf("encode %s context: %w", op, err)
		}
		due, id, err := s.schedule(ctx, c, op, ctxJSON, o.sender, due, now, idem)
		return sent{scheduled: true, due: due, id: id}, err
	}
	p, answer, err := plan(now)
	if err != nil {
		return sent{}, err
	}
	if idem != nil {
		if idem.Answer, err = json.Marshal(answer); err != nil {
			return sent{}, fmt.Errorf("encode the answer of %s: %w", op, err)
		}
	}
	p.Idem = idem
	err = s.apply(ctx, p)
	if ks, ok := errors.AsType[*store.KeyScheduled](err); ok {
		return sent{scheduled: true, due: ks.DueAtMS, id: ks.ID}, nil
	}
	if kr, ok := errors.AsType[*store.KeyRepeated](err); ok {
		if bytes.Equal(kr.Answer, aggregatedAnswer) {
			return sent{}, model.Conflict("idempotency_key", fmt.Sprintf(
				"idempotency key %q was used for an aggregated dispatch of this message (a part of a Mail): repeat it with its aggregate", idem.Key))
		}
		return sent{repeat: true, answer: kr.Answer}, nil
	}
	return sent{}, err
}

// canSpeakFor: a message whose source differs from its from speaks in the
// name of from, which only a member may do in a group.
func (s *Service) canSpeakFor(ctx context.Context, who model.Identity, c *checked) error {
	m := c.msg
	if isAdmin(who) || m.Source == "" || m.Source == m.From {
		return nil
	}
	if !c.isGroup {
		return model.Forbidden(fmt.Sprintf("msg.source may differ from msg.from only when msg.from is a group; %s is not", m.From))
	}
	ok, err := s.st.IsSubscriber(ctx, m.From, who.DID)
	if err != nil {
		return err
	}
	if !ok {
		return model.Forbidden(fmt.Sprintf("%s is not a member of %s", who.DID, m.From))
	}
	return nil
}

// checkRecipients bounds the recipients a message names when an agent or a
// tunnel sends it (message.MaxRecipients); an admin, and a message stored
// before and read again when due, are not bounded.
func checkRecipients(who model.Identity, c *checked) error {
	if n := len(c.msg.To); n > message.MaxRecipients && !isAdmin(who) {
		return model.Invalid("msg.to", fmt.Sprintf("has %d recipients, at most %d: send to more through a group", n, message.MaxRecipients))
	}
	return nil
}

// tunnelSpeaksFor refuses a tunnel's dispatch whose author is a local
// identity, one that holds a token: msg.from (unless it is a group, which
// a tunnel may bridge) and msg.source (the logical sender wherever it is
// set: threads, blocks, Mails and readers all take it for the author). A
// tunnel brings in the people of its platform, and a message it wrote in
// an agent's name would land in that agent's conversations as the agent's
// own. (The tunnel itself may be the author.) The same rule keeps a tunnel
// from routing a local identity (checkTunnelRoutes).
func (s *Service) tunnelSpeaksFor(ctx context.Context, who model.Identity, c *checked) error {
	if who.Role != model.RoleTunnel {
		return nil
	}
	for _, a := range []struct{ did, field string }{{c.msg.From, "msg.from"}, {c.msg.Source, "msg.source"}} {
		if a.did == "" || a.did == who.DID || (a.field == "msg.from" && c.isGroup) {
			continue
		}
		has, err := s.st.HoldsToken(ctx, a.did)
		if err != nil {
			return err
		}
		if has {
			return &model.Error{Kind: model.ErrForbidden, Field: a.field, Message: fmt.Sprintf(
				"%s is a local identity (it has a token): a tunnel dispatches for the people of its platform, not as local agents", a.did)}
		}
	}
	return nil
}

func (s *Service) idem(who model.Identity, op, key string) *store.Idempotency {
	if key == "" {
		return nil
	}
	return &store.Idempotency{Scope: who.DID + "|" + op, Key: key}
}

// schedule stores a delayed message and returns its due time: the one
// asked for, or, when the same message is already scheduled, the one that
// holds (sending it again schedules nothing new).
func (s *Service) schedule(ctx context.Context, c *checked, op string, ctxJSON []byte, sender string, due, now int64, idem *store.Idempotency) (int64, int64, error) {
	e := &store.ScheduleEntry{Op: op, MsgID: c.id, MsgBody: c.body, Ctx: ctxJSON,
		Recipients: recipientsOf(c), DueAtMS: due, CreatedAtMS: now, Sender: sender}
	id, created, err := s.st.Schedule(ctx, e, idem)
	if err != nil {
		return 0, 0, err
	}
	if created {
		s.cfg.Metrics.Scheduled()
		kick(s.schedKick)
	}
	return e.DueAtMS, id, nil
}

// apply writes a plan and wakes whoever waits on the boxes it touched.
func (s *Service) apply(ctx context.Context, p *store.Plan) error {
	if len(p.Records) == 0 && p.ConsumeSchedule == 0 && p.ConsumeMail == nil {
		if p.Idem == nil {
			return nil
		}
		// Every recipient blocked the sender: nothing to store but the
		// key, which must still be checked (a repeat of a delayed send is
		// answered with its entry, store.KeyScheduled) and bound.
		p.MsgBody = nil
	}
	res, err := s.st.Apply(ctx, p)
	if err != nil {
		return err
	}
	for _, r := range res.Created {
		s.cfg.Metrics.Created(r.BoxKind, 1)
	}
	s.changedRecords(res.Created)
	s.pump.sourceChanged(res.Created)
	return nil
}

func uniq(in []string) []string {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
