package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	if (req.DelayMS != nil && *req.DelayMS > 0) || req.DeliverAtMS != nil {
		return nil, model.Invalid("aggregate", "cannot be combined with delay_ms or deliver_at_ms: a Mail is delivered when its burst ends")
	}
	if strings.TrimSpace(a.Key) == "" {
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
	case a.WindowMS == nil:
		window = min(window, maxWait) // and a short max wait shortens it
	case maxWait < window:
		return nil, model.Invalid("aggregate.max_wait_ms", fmt.Sprintf("must be at least the window (%d ms)", window))
	}
	cost := int64(2*len(c.body) + mailPartOverhead)
	// What a Mail's own fields take is kept free; on a server whose
	// messages are small, at least half of one.
	maxCost := int64(max(s.cfg.MaxMessageBytes-4096, s.cfg.MaxMessageBytes/2))
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
	// The burst is the recipients asked for: blocks are applied when the
	// Mail is written (mailAudiences), so a recipient who blocks one author
	// does not split the others' burst in two. The answer says who blocks
	// the author now, and a part everyone blocks is refused as a dispatch
	// would be.
	recipients, err := s.mailRecipients(ctx, c, res)
	if err != nil || !res.OK {
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
	idem := s.idem(who, opDispatch, req.IdempotencyKey)
	if idem != nil {
		idem.Answer = aggregatedAnswer // a part's answer is its bucket's, which a repeat reads anew
	}
	pr, err := s.st.AddMailPart(ctx, part, idem)
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

// mailRecipients is who c's burst is for: its group, or its recipients.
// Those who block its author now are listed in res as dropped, and res says
// "blocked" when that is all of them.
func (s *Service) mailRecipients(ctx context.Context, c *checked, res *wire.DispatchResult) ([]string, error) {
	to := []string{c.msg.From}
	if !c.isGroup {
		to = uniq(c.msg.To)
	}
	blocked, err := s.st.BlockedBy(ctx, c.msg.LogicalSender(), to)
	if err != nil {
		return nil, err
	}
	for _, d := range to {
		if blocked[d] {
			res.DroppedRecipients = append(res.DroppedRecipients, d)
		}
	}
	if len(res.DroppedRecipients) == len(to) {
		res.OK, res.Reason = false, "blocked"
	}
	return to, nil
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
	// The same people in another order are the same burst.
	recipients = slices.Sorted(slices.Values(recipients))
	b, _ := json.Marshal(append([]string{sender, key}, recipients...)) // strings always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
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
