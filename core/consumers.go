package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// Bounds on a consumer filter, so one filter cannot make every fan-out
// step expensive.
const (
	maxFilterValues = 100
	maxFilterText   = 1024
)

// MaxAgentConsumers bounds the consumers an agent may create for itself;
// those an admin made for it count too, but an admin may go past it.
const MaxAgentConsumers = 100

// CreateConsumer creates a durable consumer of a source box. The caller
// must be able to read the source box; the consumer is the caller's unless
// an admin names another owner. Records the source already holds are
// taken from the start position by the fan-out, in batches.
func (s *Service) CreateConsumer(ctx context.Context, who model.Identity, req *wire.ConsumerRequest) (*wire.ConsumerInfo, error) {
	owner := req.Owner
	if owner == "" {
		owner = who.DID
	}
	// Checked as the paths that name a consumer later check it, or it
	// could be made and never read nor deleted.
	if err := message.CheckDID("owner", owner, true); err != nil {
		return nil, err
	}
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	if err := model.ValidConsumerName(req.Name); err != nil {
		return nil, err
	}
	if req.SourceOwner == "" {
		return nil, model.Invalid("source_owner", "the DID whose box the consumer reads is required")
	}
	if err := message.CheckDID("source_owner", req.SourceOwner, true); err != nil {
		return nil, err
	}
	src, err := model.ParseBoxKind(req.SourceBox)
	if err != nil {
		return nil, model.Invalid("source_box", err.(*model.Error).Message)
	}
	if _, ok := src.ConsumerName(); ok {
		return nil, model.Invalid("source_box", "a consumer reads a box of messages, not another consumer's box")
	}
	if err := checkFilter(&req.Filter); err != nil {
		return nil, err
	}
	fromEnd := false
	var after int64
	switch {
	case req.AfterSeq != nil && req.Start != "":
		return nil, model.Invalid("after_seq", "give either start or after_seq, not both")
	case req.AfterSeq != nil:
		if *req.AfterSeq < 0 {
			return nil, model.Invalid("after_seq", "must not be negative")
		}
		after = *req.AfterSeq
	case req.Start == "" || req.Start == wire.StartBeginning:
	case req.Start == wire.StartNow:
		fromEnd = true
	default:
		return nil, model.Invalid("start", fmt.Sprintf("unknown start %q (want %q or %q, or after_seq)", req.Start, wire.StartBeginning, wire.StartNow))
	}
	if err := s.canRead(ctx, who, req.SourceOwner, src); err != nil {
		return nil, err
	}
	if after > 0 {
		// A cursor past the end would skip, unseen, whatever arrives until
		// the box catches up with it.
		last, err := s.st.BoxLastSeq(ctx, req.SourceOwner, src)
		if err != nil {
			return nil, err
		}
		if after > last {
			return nil, model.Invalid("after_seq", fmt.Sprintf("%d is beyond the end of %s's %s, which is at seq %d", after, req.SourceOwner, src, last))
		}
	}
	if !isAdmin(who) {
		// Each consumer is a copy of every matching message: bounded, or
		// one token could multiply every write to its box without end.
		// Counted and created under one lock, or concurrent requests would
		// all see room. (The lock is a node's: creations racing through
		// different PostgreSQL nodes may pass the bound by a few.)
		s.consumerMu.Lock()
		defer s.consumerMu.Unlock()
		have, err := s.st.ListConsumers(ctx, store.ConsumerQuery{Owner: owner})
		if err != nil {
			return nil, err
		}
		if len(have) >= MaxAgentConsumers {
			return nil, model.Conflict("name", fmt.Sprintf("%s has %d consumers, the most an agent may have; delete one first", owner, len(have)))
		}
	}
	c := &model.Consumer{Owner: owner, Name: req.Name, SourceOwner: req.SourceOwner, SourceBox: src, Filter: req.Filter}
	if ok, err := s.feeds(ctx, c); err != nil {
		return nil, err
	} else if !ok {
		return nil, model.Forbidden(fmt.Sprintf("%s is not a subscriber of %s: a group's box feeds only its subscribers' consumers", owner, req.SourceOwner))
	}
	now := s.nowMS()
	c.SourceSeq, c.CreatedAtMS, c.UpdatedAtMS = after, now, now
	if err := s.st.CreateConsumer(ctx, c, fromEnd); err != nil {
		return nil, err
	}
	s.pump.added(c)
	return s.consumerInfo(ctx, *c)
}

func checkFilter(f *model.ConsumerFilter) error {
	lists := []struct {
		field string
		vals  []string
		dids  bool // matched against a message's DIDs: a value no DID can be matches nothing, for ever
	}{{"filter.from", f.From, true}, {"filter.to", f.To, true}, {"filter.kind", f.Kind, false}, {"filter.topic", f.Topic, false},
		{"filter.tags", f.Tags, false}, {"filter.mentions", f.Mentions, true}, {"filter.workspace", f.Workspace, true}}
	for _, l := range lists {
		if len(l.vals) > maxFilterValues {
			return model.Invalid(l.field, fmt.Sprintf("at most %d values", maxFilterValues))
		}
		for i, v := range l.vals {
			field := fmt.Sprintf("%s[%d]", l.field, i)
			if l.dids {
				if err := message.CheckDID(field, v, true); err != nil {
					return err
				}
			} else if v == "" || len(v) > message.MaxDIDBytes {
				return model.Invalid(field, fmt.Sprintf("values must be 1 to %d bytes", message.MaxDIDBytes))
			}
		}
	}
	for _, k := range f.Kind {
		if !slices.Contains(message.Kinds, k) {
			return model.Invalid("filter.kind", fmt.Sprintf("unknown kind %q (want one of %s)", k, strings.Join(message.Kinds, ", ")))
		}
	}
	if len(f.Text) > maxFilterText {
		return model.Invalid("filter.text", fmt.Sprintf("at most %d bytes", maxFilterText))
	}
	if f.Text != "" && strings.TrimSpace(f.Text) == "" {
		return model.Invalid("filter.text", "must not be only spaces")
	}
	return nil
}

// GetConsumer returns one consumer with its progress.
func (s *Service) GetConsumer(ctx context.Context, who model.Identity, owner, name string) (*wire.ConsumerInfo, error) {
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	c, err := s.st.GetConsumer(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	return s.consumerInfo(ctx, c)
}

// ListConsumers lists owner's consumers; an admin may list everyone's by
// leaving owner empty.
func (s *Service) ListConsumers(ctx context.Context, who model.Identity, owner string) (*wire.ConsumersResult, error) {
	if owner == "" && !isAdmin(who) {
		owner = who.DID
	}
	if owner != "" {
		if err := canAct(who, owner); err != nil {
			return nil, err
		}
	}
	cs, err := s.st.ListConsumers(ctx, store.ConsumerQuery{Owner: owner})
	if err != nil {
		return nil, err
	}
	res := &wire.ConsumersResult{Consumers: make([]wire.ConsumerInfo, 0, len(cs))}
	for _, c := range cs {
		info, err := s.consumerInfo(ctx, c)
		if err != nil {
			return nil, err
		}
		res.Consumers = append(res.Consumers, *info)
	}
	return res, nil
}

// DeleteConsumer removes a consumer and every record of its box.
func (s *Service) DeleteConsumer(ctx context.Context, who model.Identity, owner, name string) error {
	if err := canAct(who, owner); err != nil {
		return err
	}
	if err := s.st.DeleteConsumer(ctx, owner, name, s.nowMS()); err != nil {
		return err
	}
	s.pump.removed(owner, name)
	s.notify.Changed(owner, model.ConsumerBox(name))
	return nil
}

// AckConsumer advances a consumer's cursor to seq (never back).
func (s *Service) AckConsumer(ctx context.Context, who model.Identity, owner, name string, seq int64) (*wire.ConsumerInfo, error) {
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	if seq < 0 {
		return nil, model.Invalid("seq", "must not be negative")
	}
	c, err := s.st.AckConsumer(ctx, owner, name, seq, s.nowMS())
	if err != nil {
		return nil, err
	}
	s.notify.ChangedAny()
	return s.consumerInfo(ctx, c)
}

// ConsumerCursor is where a stream of a consumer's box starts when the
// client names no position: after the consumer's acknowledged cursor. ok is
// false when box is not a consumer's box. A consumer that does not exist
// is not found: its box is empty and nothing will come to it, so a stream
// of it would wait for ever (say, for a name mistyped, or the consumer
// made under another owner).
func (s *Service) ConsumerCursor(ctx context.Context, who model.Identity, owner string, box model.BoxKind) (seq int64, ok bool, err error) {
	name, isConsumer := box.ConsumerName()
	if !isConsumer {
		return 0, false, nil
	}
	if err := canAct(who, owner); err != nil {
		return 0, false, err
	}
	c, err := s.st.GetConsumer(ctx, owner, name)
	if errors.Is(err, model.ErrNotFound) {
		return 0, false, model.NotFound(fmt.Sprintf("consumer %q of %s", name, owner))
	}
	if err != nil {
		return 0, false, err
	}
	return c.AckedSeq, true, nil
}

func (s *Service) consumerInfo(ctx context.Context, c model.Consumer) (*wire.ConsumerInfo, error) {
	srcLast, err := s.st.BoxLastSeq(ctx, c.SourceOwner, c.SourceBox)
	if err != nil {
		return nil, err
	}
	last, err := s.st.BoxLastSeq(ctx, c.Owner, c.Box())
	if err != nil {
		return nil, err
	}
	return &wire.ConsumerInfo{Consumer: c, Box: c.Box(), SourceLastSeq: srcLast, LastSeq: last}, nil
}
