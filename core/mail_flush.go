package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// Writing Mails. A due bucket becomes, as a rule, one Mail to its
// recipients, written with the bucket's removal. Two things make it more
// than one message, because no part acknowledged to a tunnel may be lost
// and none may reach someone who blocks its author:
//
//   - Blocks are those in force when the Mail is written. Where a
//     recipient blocks some of a Mail's authors, the recipients that
//     block the same authors get a Mail of the other authors' parts.
//   - A Mail that would not be a valid message (too large, nested too
//     deep once its parts sit inside it) is delivered as its parts, each
//     the message it was when dispatched.
//
// Each message is written by a plan of its own, the last with the
// bucket's removal. The bucket is closed before it is read, so its parts
// do not change; a crash between the plans writes the same messages again
// (their ids follow from the parts and the audiences) and makes no second
// record. What can still double a part is a crash between the plans
// followed by a change of blocks among the recipients before the retry:
// the audiences, and so the messages, are then others.

// runMailFlusher writes Mails as their bursts end. It sleeps until the
// earliest due time, and is kicked when a part arrives.
func (s *Service) runMailFlusher(ctx context.Context) {
	s.runDue(ctx, "flush mail", s.mailKick, s.st.NextMailDue, s.flushMail)
}

// flushMail writes the Mail of every bucket due by beforeMS and returns
// how many it wrote or dropped. A bucket that fails does not hold back the
// others; the first failure is returned once the batch is through.
func (s *Service) flushMail(ctx context.Context, beforeMS int64) (int, error) {
	s.mailMu.Lock()
	defer s.mailMu.Unlock()
	// No part may join a bucket while its Mail is built: a Mail written as
	// several messages (see the top of this file) would be written again,
	// with the new part, by the next pass.
	if _, err := s.st.CloseMail(ctx, beforeMS); err != nil {
		return 0, err
	}
	total := 0
	for {
		due, err := s.st.DueMail(ctx, beforeMS, schedBatch)
		if err != nil {
			return total, err
		}
		var first error
		for i := range due {
			err := s.flushBucket(ctx, &due[i])
			if errors.Is(err, model.ErrConflict) || errors.Is(err, model.ErrNotFound) {
				continue // another node flushed it, or a part joined it meanwhile
			}
			if err != nil {
				if first == nil {
					first = fmt.Errorf("bucket %d: %w", due[i].ID, err)
				}
				continue
			}
			total++
		}
		if first != nil || len(due) < schedBatch {
			return total, first
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

// flushBucket writes b's Mail (or Mails) to its recipients and deletes b.
// Parts that are no longer valid messages (their group is gone, say) are
// left out; a bucket none of whose parts is valid is dropped with a
// mail.dropped event rather than retried for ever.
func (s *Service) flushBucket(ctx context.Context, b *store.MailBucket) error {
	now := s.nowMS()
	parts, skipped, err := s.mailParts(ctx, b)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return s.dropMail(ctx, b, fmt.Errorf("no part is a valid message any more: %s", strings.Join(skipped, "; ")))
	}
	auds, err := s.mailAudiences(ctx, b, parts)
	if err != nil {
		return err
	}
	var plans []*store.Plan
	for _, a := range auds {
		ps, err := s.mailPlans(ctx, b, parts, a, now)
		if err != nil {
			return err
		}
		plans = append(plans, ps...)
	}
	if len(plans) == 0 {
		// Every recipient blocks every author: nothing to store but the
		// parts' end, under the id the Mail would have had.
		m, err := buildMail(b, parts, allParts(parts), b.Recipients, false)
		if err != nil {
			return err
		}
		id, err := m.ID()
		if err != nil {
			return err
		}
		plans = append(plans, &store.Plan{MsgID: id, NowMS: now})
	}
	for _, p := range plans[:len(plans)-1] {
		if err := s.apply(ctx, p); err != nil {
			return err
		}
	}
	last := plans[len(plans)-1]
	if len(last.Records) == 0 {
		last.MsgBody = nil // nobody to hold it: store nothing but the parts' end
	}
	last.ConsumeMail = &store.MailConsume{BucketID: b.ID, Parts: b.PartCount}
	if err := s.apply(ctx, last); err != nil {
		return err
	}
	if len(skipped) > 0 {
		s.log.Warn("a Mail was written without parts that are no longer valid", "bucket", b.ID, "skipped", skipped)
	}
	s.cfg.Metrics.MailFlushed(b.PartCount, "written")
	return nil
}

// mailPart is one part of a bucket, checked as it would be dispatched now.
type mailPart struct {
	c       *checked
	raw     *store.MailPart
	ingress *model.Route
	author  string
}

// mailParts checks b's parts; those that no longer pass are returned as
// reasons, not parts.
func (s *Service) mailParts(ctx context.Context, b *store.MailBucket) ([]*mailPart, []string, error) {
	var parts []*mailPart
	var skipped []string
	for i := range b.Parts {
		raw := &b.Parts[i]
		m, err := message.Decode(raw.Body)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", raw.MsgID, err))
			continue
		}
		c, err := s.check(ctx, m)
		if errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrTooLarge) {
			skipped = append(skipped, fmt.Sprintf("%s: %v", raw.MsgID, err))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		p := &mailPart{c: c, raw: raw, author: m.LogicalSender()}
		if len(raw.Ctx) > 0 {
			if err := json.Unmarshal(raw.Ctx, &p.ingress); err != nil {
				skipped = append(skipped, fmt.Sprintf("%s ingress_ctx: %v", raw.MsgID, err))
				continue
			}
		}
		parts = append(parts, p)
	}
	return parts, skipped, nil
}

// audience is the recipients that get the same Mail: the parts at idx.
// to is nil for a group's burst, which goes to the group as its parts
// would have (planDispatch applies the blocks of a group's members).
type audience struct {
	to  []string
	idx []int
}

// mailAudiences splits b's recipients by the authors they block now; the
// audience that gets every part (when any does) comes last, since the last
// plan carries the bucket's removal and its message becomes the parts'
// mail_id.
func (s *Service) mailAudiences(ctx context.Context, b *store.MailBucket, parts []*mailPart) ([]audience, error) {
	if parts[0].c.isGroup {
		return []audience{{idx: allParts(parts)}}, nil
	}
	var authors []string
	for _, p := range parts {
		if !slices.Contains(authors, p.author) {
			authors = append(authors, p.author)
		}
	}
	blocks := make(map[string][]string, len(b.Recipients)) // recipient → authors it blocks
	for _, a := range authors {
		blocked, err := s.st.BlockedBy(ctx, a, b.Recipients)
		if err != nil {
			return nil, err
		}
		for _, r := range b.Recipients {
			if blocked[r] {
				blocks[r] = append(blocks[r], a)
			}
		}
	}
	var auds []audience
	bySig := map[string]int{}
	for _, r := range b.Recipients {
		sig := strings.Join(blocks[r], "\x00")
		if i, ok := bySig[sig]; ok {
			auds[i].to = append(auds[i].to, r)
			continue
		}
		var idx []int
		for i, p := range parts {
			if !slices.Contains(blocks[r], p.author) {
				idx = append(idx, i)
			}
		}
		bySig[sig] = len(auds)
		auds = append(auds, audience{to: []string{r}, idx: idx})
	}
	auds = slices.DeleteFunc(auds, func(a audience) bool { return len(a.idx) == 0 })
	if i := slices.IndexFunc(auds, func(a audience) bool { return len(a.idx) == len(parts) }); i >= 0 {
		full := auds[i]
		auds = append(slices.Delete(auds, i, i+1), full)
	}
	return auds, nil
}

// mailPlans plans a's Mail, or, when it is not a valid message, a's parts
// one by one.
func (s *Service) mailPlans(ctx context.Context, b *store.MailBucket, parts []*mailPart, a audience, now int64) ([]*store.Plan, error) {
	group := a.to == nil
	m, err := buildMail(b, parts, a.idx, a.to, group)
	if err != nil {
		return nil, err
	}
	c, err := s.check(ctx, m)
	if err == nil {
		c.to = a.to
		p, _, err := s.planDispatch(ctx, c, parts[a.idx[0]].ingress, now)
		if err != nil {
			return nil, err
		}
		return []*store.Plan{p}, nil
	}
	if !errors.Is(err, model.ErrInvalid) && !errors.Is(err, model.ErrTooLarge) {
		return nil, err
	}
	s.log.Warn("a Mail is not a valid message; delivering its parts one by one", "bucket", b.ID, "parts", len(a.idx), "err", err)
	var plans []*store.Plan
	for _, i := range a.idx {
		c := *parts[i].c
		c.to = a.to
		p, _, err := s.planDispatch(ctx, &c, parts[i].ingress, now)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

func allParts(parts []*mailPart) []int {
	idx := make([]int, len(parts))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (s *Service) dropMail(ctx context.Context, b *store.MailBucket, why error) error {
	s.log.Warn("dropping a Mail that no longer validates", "bucket", b.ID, "sender", b.Sender, "key", b.Key, "err", why)
	if err := s.st.DropMail(ctx, b.ID, b.PartCount, s.nowMS(), why.Error()); err != nil {
		return err
	}
	s.cfg.Metrics.MailFlushed(b.PartCount, "dropped")
	return nil
}

// buildMail makes the Mail of b's parts at idx, to the recipients to (a
// group's burst goes to its group). Whatever those parts agree on (from,
// source, kind, thread, workspace, format, title) the Mail keeps;
// mentions are their union. A Mail whose parts come from several senders
// is from the tunnel, and its text names each part's sender.
func buildMail(b *store.MailBucket, all []*mailPart, idx []int, to []string, group bool) (*message.Message, error) {
	if len(idx) == 0 {
		return nil, fmt.Errorf("bucket %d: a Mail of no parts", b.ID)
	}
	parts := make([]*message.Message, len(idx))
	for n, i := range idx {
		parts[n] = all[i].c.msg
	}
	first := parts[0]
	m := &message.Message{From: first.From, Source: first.Source, Kind: first.Kind, Workspace: first.Workspace,
		CreatedAtMS: b.LastAtMS, Nonce: fmt.Sprintf("mail:%d", b.ID)}
	if len(idx) < len(all) {
		// Another audience's Mail of the same bucket: another message.
		m.Nonce += fmt.Sprintf(":%v", idx)
	}
	if first.Thread != nil {
		t := *first.Thread
		m.Thread = &t
	}
	title, format := first.Content.Title, first.Content.Format
	senders := map[string]bool{}
	info := MailInfo{Key: b.Key, Sender: b.Sender, FirstAtMS: b.FirstAtMS, LastAtMS: b.LastAtMS}
	for n, pm := range parts {
		raw := all[idx[n]].raw
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
		info.Parts = append(info.Parts, MailPart{MsgID: raw.MsgID, Msg: raw.Body})
		ref, _ := json.Marshal(raw.MsgID) // a string always encodes
		m.Content.Refs = append(m.Content.Refs, ref)
	}
	if !group {
		m.To = to
	}
	var text []byte
	for n, pm := range parts {
		if n > 0 {
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
		return nil, err
	}
	m.Content.Title, m.Content.Format, m.Content.Content, m.Content.Machine = title, format, string(text), machine
	return m, nil
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
