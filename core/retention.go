package core

import (
	"context"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// DefaultRetention is how long finished records are kept (seed 002's
// ARCHIVE_RETENTION) and events too, unless configured otherwise.
const DefaultRetention = 30 * 24 * time.Hour

// purgeBatch bounds one purge transaction, so retention never holds the
// writer (or row locks) long enough to be felt by senders.
const purgeBatch = 1000

// messageGrace is how long an unreferenced body is kept after it was last
// stored: a body reused by a plan being applied right now is never taken
// from under it.
const messageGrace = time.Hour

// RetentionConfig is the retention policy.
type RetentionConfig struct {
	// Terminal is how long records in a terminal state (READED, SENT, DEAD,
	// ARCHIVED, DELETED) are kept after their last change, per box family
	// (model.ConsumerFamily for every consumer's box). A family not listed
	// keeps them DefaultRetention; a negative duration keeps them forever.
	// GROUP_INBOX's period applies to all of a group's log, read or not
	// (none of it is ever finished), as far as its consumers have examined.
	Terminal map[model.BoxKind]time.Duration
	// Events is how long the event log is kept (default DefaultRetention;
	// negative: forever).
	Events time.Duration
	// Interval is the pause between passes (default 1 minute).
	Interval time.Duration
	// Disabled turns the background passes off (an admin can still run one).
	Disabled bool
}

// Families lists the box families a retention policy speaks of.
func Families() []model.BoxKind {
	return append(append([]model.BoxKind(nil), model.BoxKinds...), model.ConsumerFamily)
}

func (r *RetentionConfig) setDefaults() {
	t := make(map[model.BoxKind]time.Duration, len(model.BoxKinds)+1)
	for _, f := range Families() {
		d, ok := r.Terminal[f]
		if !ok || d == 0 {
			d = DefaultRetention
		}
		t[f] = d
	}
	r.Terminal = t
	if r.Events == 0 {
		r.Events = DefaultRetention
	}
	if r.Interval <= 0 {
		r.Interval = time.Minute
	}
}

// RetentionPolicy reports the policy in force.
func (s *Service) RetentionPolicy(who model.Identity) (*wire.RetentionPolicy, error) {
	if err := requireAdmin(who, "reading the retention policy"); err != nil {
		return nil, err
	}
	r := s.cfg.Retention
	p := &wire.RetentionPolicy{TerminalMS: make(map[model.BoxKind]int64, len(r.Terminal)),
		EventsMS: keepMS(r.Events), IntervalMS: r.Interval.Milliseconds(), Enabled: !r.Disabled}
	for f, d := range r.Terminal {
		p.TerminalMS[f] = keepMS(d)
	}
	p.IdempotencyKeysMS = keepMS(r.keysKeep())
	return p, nil
}

// keysKeep is how long idempotency keys are kept after they were bound:
// as long as the longest record period (a client's retry of a send comes
// long before its records go), and forever if some family keeps its
// records forever. Without a limit the table grew by a row per keyed send
// for good.
func (r *RetentionConfig) keysKeep() time.Duration {
	var longest time.Duration
	for _, d := range r.Terminal {
		if d < 0 {
			return -1
		}
		longest = max(longest, d)
	}
	return longest
}

// keepMS is a duration for the wire: 0 means forever.
func keepMS(d time.Duration) int64 {
	if d < 0 {
		return 0
	}
	return d.Milliseconds()
}

// RunRetention runs one full retention pass now (admin only).
func (s *Service) RunRetention(ctx context.Context, who model.Identity) (*wire.RetentionResult, error) {
	if err := requireAdmin(who, "running retention"); err != nil {
		return nil, err
	}
	return s.purge(ctx)
}

// purge runs Purge in batches until nothing eligible is left.
func (s *Service) purge(ctx context.Context) (*wire.RetentionResult, error) {
	now := s.nowMS()
	r := s.cfg.Retention
	p := store.PurgeParams{NowMS: now, TerminalBeforeMS: make(map[model.BoxKind]int64, len(r.Terminal)),
		Acked: true, MessagesBeforeMS: now - messageGrace.Milliseconds(), Limit: purgeBatch}
	for f, d := range r.Terminal {
		if d > 0 {
			p.TerminalBeforeMS[f] = now - d.Milliseconds()
		}
	}
	// A group's log is read, never finished: its family's period applies
	// to every record of it.
	p.GroupLogBeforeMS = p.TerminalBeforeMS[model.GroupInbox]
	if r.Events > 0 {
		p.EventsBeforeMS = now - r.Events.Milliseconds()
	}
	if d := r.keysKeep(); d > 0 {
		p.KeysBeforeMS = now - d.Milliseconds()
	}
	total := &wire.RetentionResult{Records: map[model.BoxKind]int64{}}
	for {
		res, err := s.st.Purge(ctx, p)
		if err != nil {
			return total, err
		}
		for f, n := range res.Records {
			total.Records[f] += n
			s.cfg.Metrics.Purged(f, int(n))
		}
		total.Messages += res.Messages
		total.Events += res.Events
		total.IdempotencyKeys += res.Keys
		s.cfg.Metrics.PurgedMessages(int(res.Messages))
		if !res.Empty() {
			s.notify.ChangedAny()
		}
		if !res.More || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// runRetention runs a pass every Interval.
func (s *Service) runRetention(ctx context.Context) {
	if s.cfg.Retention.Disabled {
		return
	}
	t := time.NewTicker(s.cfg.Retention.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := s.purge(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("retention pass", "err", err)
			continue
		}
		if len(res.Records) > 0 || res.Messages > 0 || res.Events > 0 || res.IdempotencyKeys > 0 {
			s.log.Info("retention purged", "records", res.Records, "messages", res.Messages, "events", res.Events,
				"idempotency_keys", res.IdempotencyKeys)
		}
	}
}
