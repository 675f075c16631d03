package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// Aggregation (seed 002): a tunnel that dispatches a burst of messages
// from one chat (someone typing five lines in a row) marks them with an
// aggregation key; the server keeps them as parts of a pending Mail and
// delivers the Mail, one message holding them all, once the burst pauses.
// The parts are stored before the dispatch is answered, so a crash loses
// none; the Mail is written together with the deletion of its parts, and
// its id is a function of them, so it is written once.

// mailMaxKey bounds an aggregation key.
const mailMaxKey = 256

// mailPartOverhead is what a part costs a Mail besides its body and its
// text: its id and the keys around it.
const mailPartOverhead = 256

// maxMailDuration bounds a requested window or max wait.
const maxMailDuration = 24 * time.Hour

// MailFormat is the content format of a Mail: its content is the parts'
// text, one line (or more) per part, and its machine part holds the parts
// themselves (MailMachine).
const MailFormat = "text/plain"

// MailMachine is the machine content of a Mail.
type MailMachine struct {
	Mail MailInfo `json:"mail"`
}

// MailInfo describes a Mail and holds its parts, in the order they came.
type MailInfo struct {
	Key       string     `json:"key"`
	Sender    string     `json:"sender"`
	FirstAtMS int64      `json:"first_at_ms"`
	LastAtMS  int64      `json:"last_at_ms"`
	Parts     []MailPart `json:"parts"`
}

// MailPart is one message of a Mail.
type MailPart struct {
	MsgID string          `json:"msg_id"`
	Msg   json.RawMessage `json:"msg"`
}

// aggregate stores a dispatched message as a part of its burst's pending
// Mail.
func (s *Service) aggregate(ctx context.Context, who model.Identity, req *wire.DispatchRequest, c *checked) (*wire.DispatchResult, error) {
	a := req.Aggregate
	if req.DelayMS != nil || req.DeliverAtMS != nil {
		return nil, model.Invalid("aggregate", "cannot be combined with delay_ms or deliver_at_ms: a Mail is delivered when its burst ends")
	}
	if a.Key == "" {
		return nil, model.Invalid("aggregate.key", "is required: it names the burst (a chat, a thread) the message belongs to")
	}
	if len(a.Key) > mailMaxKey {
		return nil, model.Invalid("aggregate.key", fmt.Sprintf("is %d bytes, at most %d allowed", len(a.Key), mailMaxKey))
	}
	if err := checkRouteText("aggregate.key", a.Key); err != nil {
		return nil, err
	}
	window, err := mailDuration("aggregate.window_ms", a.WindowMS, s.cfg.MailWindow)
	if err != nil {
		return nil, err
	}
	maxWait, err := mailDuration("aggregate.max_wait_ms", a.MaxWaitMS, s.cfg.MailMaxWait)
	if err != nil {
		return nil, err
	}
	switch {
	case a.MaxWaitMS == nil:
		maxWait = max(maxWait, window) // a long window asked for stretches the default
	case maxWait < window:
		return nil, model.Invalid("aggregate.max_wait_ms", fmt.Sprintf("must be at least the window (%d ms)", window))
	}
	cost := int64(2*len(c.body) + mailPartOverhead)
	maxCost := int64(s.cfg.MaxMessageBytes - 4096)
	if cost > maxCost {
		return nil, &model.Error{Kind: model.ErrTooLarge, Field: "msg", Message: fmt.Sprintf(
			"is %d bytes: a part of a Mail may be at most %d bytes; dispatch it without aggregate", len(c.body), (maxCost-mailPartOverhead)/2)}
	}
	res := &wire.DispatchResult{OK: true, MsgID: c.id, DeliveredRecipients: []string{}, DroppedRecipients: []string{},
		DeliveredAgents: []string{}}
	sender := who.DID
	if who.Role != model.RoleTunnel && req.IngressCtx != nil && req.IngressCtx.TunnelDID != "" {
		sender = req.IngressCtx.TunnelDID
	}
	// The recipients as a dispatch made now would have them: those who
	// block its author are dropped now, and the rest make the burst.
	recipients, err := s.mailRecipients(ctx, c, res)
	if err != nil || len(recipients) == 0 {
		return res, err
	}
	ctxJSON, err := json.Marshal(req.IngressCtx)
	if err != nil {
		return nil, fmt.Errorf("encode ingress_ctx: %w", err)
	}
	if req.IngressCtx == nil {
		ctxJSON = nil
	}
	burst := recipients
	if c.isGroup {
		// A group's burst is one author's: the Mail speaks for the group
		// in that author's name, as each part did.
		burst = []string{c.msg.From, "source=" + c.msg.Source}
	}
	part := &store.MailPart{MailKey: mailKey(sender, a.Key, burst), MsgID: c.id, Body: c.body, Ctx: ctxJSON,
		Sender: sender, Key: a.Key, Recipients: recipients, WindowMS: window, MaxWaitMS: maxWait,
		MaxParts: s.cfg.MailMaxParts, Cost: cost, MaxCost: maxCost, NowMS: s.nowMS()}
	pr, err := s.st.AddMailPart(ctx, part, s.idem(who, opDispatch, req.IdempotencyKey))
	if err != nil {
		return nil, err
	}
	res.Aggregate = &wire.AggregateStatus{BucketID: pr.Bucket.ID, Parts: pr.Bucket.PartCount, DueAtMS: pr.Bucket.DueAtMS,
		Duplicate: pr.Duplicate, MailID: pr.MailID}
	if !pr.Duplicate {
		s.cfg.Metrics.MailPartAdded()
		kick(s.mailKick)
	}
	return res, nil
}

// mailRecipients is who c's Mail goes to: its group, or its recipients
// less those who block its author (listed in res as dropped; res says
// "blocked" when that is all of them).
func (s *Service) mailRecipients(ctx context.Context, c *checked, res *wire.DispatchResult) ([]string, error) {
	to := []string{c.msg.From}
	if !c.isGroup {
		to = uniq(c.msg.To)
	}
	blocked, err := s.st.BlockedBy(ctx, c.msg.LogicalSender(), to)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(to))
	for _, d := range to {
		if blocked[d] {
			res.DroppedRecipients = append(res.DroppedRecipients, d)
			continue
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		res.OK, res.Reason = false, "blocked"
	}
	return out, nil
}

// mailDuration reads a requested window or max wait in ms, or the default.
func mailDuration(field string, ms *int64, def time.Duration) (int64, error) {
	if ms == nil {
		return def.Milliseconds(), nil
	}
	if *ms <= 0 || *ms > maxMailDuration.Milliseconds() {
		return 0, model.Invalid(field, fmt.Sprintf("must be between 1 and %d (%s)", maxMailDuration.Milliseconds(), maxMailDuration))
	}
	return *ms, nil
}

// mailKey names a burst: one tunnel's key, to the same recipients (or, in
// a group, by the same author).
func mailKey(sender, key string, recipients []string) string {
	b, _ := json.Marshal(append([]string{sender, key}, recipients...)) // strings always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// runMailFlusher writes Mails as their bursts end. It sleeps until the
// earliest due time, and is kicked when a part arrives.
func (s *Service) runMailFlusher(ctx context.Context) {
	for {
		n, err := s.flushMail(ctx, s.nowMS())
		if err != nil && ctx.Err() == nil {
			s.log.Error("flush mail", "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		if n > 0 && err == nil {
			continue
		}
		wait := s.cfg.IdleRecheck
		if err == nil {
			if at, ok, err := s.st.NextMailDue(ctx); err == nil && ok {
				wait = min(wait, max(time.Duration(at-s.nowMS())*time.Millisecond, 0))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.mailKick:
		case <-t.C:
		}
		t.Stop()
	}
}

// flushMail writes the Mail of every bucket due by beforeMS and returns
// how many it wrote or dropped.
func (s *Service) flushMail(ctx context.Context, beforeMS int64) (int, error) {
	s.mailMu.Lock()
	defer s.mailMu.Unlock()
	total := 0
	for {
		due, err := s.st.DueMail(ctx, beforeMS, schedBatch)
		if err != nil {
			return total, err
		}
		for i := range due {
			err := s.flushBucket(ctx, &due[i])
			if errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrNotFound) {
				continue // another node flushed it, or a part joined it meanwhile
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

// FlushMail writes every pending Mail now, whether or not its burst has
// ended (an operator's flush, or a test's). Admins only.
func (s *Service) FlushMail(ctx context.Context, who model.Identity) (*wire.MailFlushResult, error) {
	if !isAdmin(who) {
		return nil, model.Forbidden("flushing pending Mails needs an admin token")
	}
	n, err := s.flushMail(ctx, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	return &wire.MailFlushResult{Flushed: n}, nil
}

// flushBucket writes b's Mail to its recipients and deletes b, in one
// write; a Mail that no longer validates (its group is gone, say) is
// dropped with a mail.dropped event rather than retried for ever.
func (s *Service) flushBucket(ctx context.Context, b *store.MailBucket) error {
	m, ingress, err := buildMail(b)
	if err != nil {
		return s.dropMail(ctx, b, err)
	}
	c, err := s.check(ctx, m)
	if errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrTooLarge) {
		return s.dropMail(ctx, b, err)
	}
	if err != nil {
		return err
	}
	p, _, err := s.planDispatch(ctx, c, ingress, s.nowMS())
	if err != nil {
		return err
	}
	if len(p.Records) == 0 {
		p.MsgBody = nil // nobody to hold it: store nothing but the parts' end
	}
	p.ConsumeMail = &store.MailConsume{BucketID: b.ID, Parts: b.PartCount}
	if err := s.apply(ctx, p); err != nil {
		return err
	}
	s.cfg.Metrics.MailFlushed(b.PartCount, "written")
	return nil
}

func (s *Service) dropMail(ctx context.Context, b *store.MailBucket, why error) error {
	s.log.Warn("dropping a Mail that no longer validates", "bucket", b.ID, "sender", b.Sender, "key", b.Key, "err", why)
	if err := s.st.DropMail(ctx, b.ID, b.PartCount, s.nowMS(), why.Error()); err != nil {
		return err
	}
	s.cfg.Metrics.MailFlushed(b.PartCount, "dropped")
	return nil
}

// PendingMail lists Mails waiting for their bursts to end, soonest due
// first: an admin's choice of them, or, for anyone else, those of the
// bursts it dispatched.
func (s *Service) PendingMail(ctx context.Context, who model.Identity, q wire.PendingMailQuery) (*wire.PendingMailResult, error) {
	if err := message.CheckDID("sender", q.Sender, false); err != nil {
		return nil, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if !isAdmin(who) {
		if q.Sender != "" && q.Sender != who.DID {
			return nil, model.Forbidden(fmt.Sprintf("%s may list only the pending Mails it dispatched, not those of %s", who.DID, q.Sender))
		}
		q.Sender = who.DID
	}
	bs, err := s.st.ListMail(ctx, store.MailQuery{Sender: q.Sender, Limit: limit})
	if err != nil {
		return nil, err
	}
	res := &wire.PendingMailResult{Mail: make([]wire.PendingMail, 0, len(bs))}
	for _, b := range bs {
		ids := make([]string, 0, len(b.Parts))
		for _, p := range b.Parts {
			ids = append(ids, p.MsgID)
		}
		res.Mail = append(res.Mail, wire.PendingMail{BucketID: b.ID, Sender: b.Sender, Key: b.Key, Recipients: b.Recipients,
			Open: b.Open, Parts: b.PartCount, PartMsgIDs: ids, WindowMS: b.WindowMS, MaxWaitMS: b.MaxWaitMS,
			FirstAtMS: b.FirstAtMS, LastAtMS: b.LastAtMS, DueAtMS: b.DueAtMS})
	}
	return res, nil
}

// buildMail makes b's Mail and the ingress context it is dispatched with
// (its first part's). Whatever all parts agree on (from, source, kind,
// thread, workspace, format, title) the Mail keeps; mentions are their
// union. A Mail whose parts come from several senders is from the tunnel,
// and its text names each part's sender.
func buildMail(b *store.MailBucket) (*message.Message, *model.Route, error) {
	if len(b.Parts) == 0 {
		return nil, nil, fmt.Errorf("bucket %d has no parts", b.ID)
	}
	parts := make([]*message.Message, len(b.Parts))
	for i, p := range b.Parts {
		m, err := message.Decode(p.Body)
		if err != nil {
			return nil, nil, fmt.Errorf("part %s: %w", p.MsgID, err)
		}
		parts[i] = m
	}
	first := parts[0]
	m := &message.Message{From: first.From, Source: first.Source, Kind: first.Kind, Workspace: first.Workspace,
		CreatedAtMS: b.LastAtMS, Nonce: fmt.Sprintf("mail:%d", b.ID)}
	if first.Thread != nil {
		t := *first.Thread
		m.Thread = &t
	}
	title, format := first.Content.Title, first.Content.Format
	senders := map[string]bool{}
	info := MailInfo{Key: b.Key, Sender: b.Sender, FirstAtMS: b.FirstAtMS, LastAtMS: b.LastAtMS}
	for i, pm := range parts {
		senders[pm.LogicalSender()] = true
		if pm.From != m.From {
			m.From, m.Source = b.Sender, ""
		}
		if pm.Source != m.Source {
			m.Source = ""
		}
		if pm.Kind != m.Kind {
			m.Kind = "chat"
		}
		if pm.Workspace != m.Workspace {
			m.Workspace = ""
		}
		m.Thread = commonThread(m.Thread, pm.Thread)
		if pm.Content.Title != title {
			title = ""
		}
		if pm.Content.Format != format {
			format = MailFormat
		}
		for _, d := range pm.Mentions {
			if !slices.Contains(m.Mentions, d) {
				m.Mentions = append(m.Mentions, d)
			}
		}
		info.Parts = append(info.Parts, MailPart{MsgID: b.Parts[i].MsgID, Msg: b.Parts[i].Body})
		ref, _ := json.Marshal(b.Parts[i].MsgID) // a string always encodes
		m.Content.Refs = append(m.Content.Refs, ref)
	}
	if !isGroupBurst(b, m) {
		m.To = b.Recipients
	}
	var text []byte
	for i, pm := range parts {
		if i > 0 {
			text = append(text, '\n')
		}
		if len(senders) > 1 {
			text = append(text, pm.LogicalSender()...)
			text = append(text, ": "...)
		}
		line := pm.Content.Content
		if line == "" {
			line = pm.Content.Title
		}
		text = append(text, line...)
	}
	machine, err := json.Marshal(MailMachine{Mail: info})
	if err != nil {
		return nil, nil, err
	}
	m.Content.Title, m.Content.Format, m.Content.Content, m.Content.Machine = title, format, string(text), machine
	var ingress *model.Route
	if c := b.Parts[0].Ctx; len(c) > 0 {
		if err := json.Unmarshal(c, &ingress); err != nil {
			return nil, nil, fmt.Errorf("part %s ingress_ctx: %w", b.Parts[0].MsgID, err)
		}
	}
	return m, ingress, nil
}

// isGroupBurst reports whether b's burst is one author's posts in a group
// (its one recipient is the group they are from, spoken for by another):
// the Mail then goes to the group's subscribers, as its parts would have.
func isGroupBurst(b *store.MailBucket, m *message.Message) bool {
	return len(b.Recipients) == 1 && b.Recipients[0] == m.From && m.Source != "" && m.Source != m.From
}

// commonThread keeps what two threads share.
func commonThread(a, b *message.Thread) *message.Thread {
	if a == nil || b == nil {
		return nil
	}
	t := message.Thread{}
	if a.Topic == b.Topic {
		t.Topic = a.Topic
	}
	if a.ReplyTo == b.ReplyTo {
		t.ReplyTo = a.ReplyTo
	}
	if a.CorrelationID == b.CorrelationID {
		t.CorrelationID = a.CorrelationID
	}
	if t == (message.Thread{}) {
		return nil
	}
	return &t
}
