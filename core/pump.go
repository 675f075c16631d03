package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// pumpBatch is how many source records one fan-out step examines: one
// transaction per step, so a backfill of a large box never holds the
// writer for long.
const pumpBatch = 256

type consumerKey struct{ owner, name string }

// pump fans source records out to durable consumers. Each consumer has a
// position in its source box (SourceSeq); a step reads the source after it,
// keeps what the filter matches, and writes the consumer's records and the
// new position in one transaction, compare-and-set on the old position, so
// steps are exactly-once even when several nodes pump the same consumer.
//
// Fan-out runs after the write that fed the source, not inside it: a send
// never waits for consumers' filters, and creating a consumer (with a
// backfill) is the same code path as keeping it fed. The node that wrote
// pumps at once; every node also sweeps every consumer each IdleRecheck, so
// a write whose node died before pumping is still fanned out.
type pump struct {
	mu       sync.Mutex
	bySource map[boxKey][]consumerKey
	dirty    map[consumerKey]bool
	reload   bool
	kick     chan struct{}
}

func newPump() *pump {
	return &pump{bySource: make(map[boxKey][]consumerKey), dirty: make(map[consumerKey]bool),
		reload: true, kick: make(chan struct{}, 1)}
}

// added registers a consumer created on this node and asks for its backfill.
func (p *pump) added(c *model.Consumer) {
	p.mu.Lock()
	k := boxKey{c.SourceOwner, c.SourceBox}
	ck := consumerKey{c.Owner, c.Name}
	if !containsKey(p.bySource[k], ck) {
		p.bySource[k] = append(p.bySource[k], ck)
	}
	p.dirty[ck] = true
	p.mu.Unlock()
	kick(p.kick)
}

func (p *pump) removed(owner, name string) {
	p.mu.Lock()
	ck := consumerKey{owner, name}
	for k, cks := range p.bySource {
		for i, x := range cks {
			if x == ck {
				p.bySource[k] = append(cks[:i:i], cks[i+1:]...)
			}
		}
	}
	delete(p.dirty, ck)
	p.mu.Unlock()
}

// sourceChanged marks the consumers of the boxes of recs for a step. It is
// cheap when a box has no consumer: one map lookup.
func (p *pump) sourceChanged(recs []model.Record) {
	marked := false
	p.mu.Lock()
	for _, r := range recs {
		for _, ck := range p.bySource[boxKey{r.Owner, r.BoxKind}] {
			p.dirty[ck] = true
			marked = true
		}
	}
	p.mu.Unlock()
	if marked {
		kick(p.kick)
	}
}

// unknownConsumer asks for a reload when another node's change names a
// consumer box this node has not heard of: a consumer created there.
func (p *pump) unknownConsumer(owner string, box model.BoxKind) {
	name, ok := box.ConsumerName()
	if !ok {
		return
	}
	ck := consumerKey{owner, name}
	p.mu.Lock()
	known := false
	for _, cks := range p.bySource {
		if containsKey(cks, ck) {
			known = true
			break
		}
	}
	if !known {
		p.reload = true
	}
	p.mu.Unlock()
	if !known {
		kick(p.kick)
	}
}

func containsKey(cks []consumerKey, ck consumerKey) bool {
	for _, x := range cks {
		if x == ck {
			return true
		}
	}
	return false
}

// runPump is the fan-out loop.
func (s *Service) runPump(ctx context.Context) {
	p := s.pump
	lastSweep := time.Time{}
	for ctx.Err() == nil {
		p.mu.Lock()
		sweep := p.reload || time.Since(lastSweep) >= s.cfg.IdleRecheck
		p.reload = false
		p.mu.Unlock()
		if sweep {
			if err := s.loadConsumers(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("load consumers", "err", err)
			}
			lastSweep = time.Now()
		}
		p.mu.Lock()
		work := p.dirty
		p.dirty = make(map[consumerKey]bool)
		p.mu.Unlock()
		for ck := range work {
			if err := s.pumpConsumer(ctx, ck); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("fan out to consumer", "owner", ck.owner, "consumer", ck.name, "err", err)
			}
		}
		t := time.NewTimer(s.cfg.IdleRecheck - time.Since(lastSweep))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// loadConsumers rebuilds the source index from the store and marks every
// consumer for a step (a caught-up consumer costs one empty read).
func (s *Service) loadConsumers(ctx context.Context) error {
	cs, err := s.st.ListConsumers(ctx, store.ConsumerQuery{})
	if err != nil {
		return err
	}
	by := make(map[boxKey][]consumerKey, len(cs))
	p := s.pump
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		ck := consumerKey{c.Owner, c.Name}
		k := boxKey{c.SourceOwner, c.SourceBox}
		by[k] = append(by[k], ck)
		p.dirty[ck] = true
	}
	p.bySource = by
	return nil
}

// PumpConsumers runs fan-out steps for every consumer until each has
// examined its whole source. Tests and the admin API use it; the service
// does the same in the background.
func (s *Service) PumpConsumers(ctx context.Context) error {
	cs, err := s.st.ListConsumers(ctx, store.ConsumerQuery{})
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := s.pumpConsumer(ctx, consumerKey{c.Owner, c.Name}); err != nil {
			return err
		}
	}
	return nil
}

// pumpConsumer steps one consumer until it has examined its whole source.
func (s *Service) pumpConsumer(ctx context.Context, ck consumerKey) error {
	c, err := s.st.GetConsumer(ctx, ck.owner, ck.name)
	if errors.Is(err, model.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		src, err := s.st.Sync(ctx, store.SyncParams{Owner: c.SourceOwner, Box: c.SourceBox, AfterSeq: c.SourceSeq, Limit: pumpBatch})
		if err != nil || len(src) == 0 {
			return err
		}
		// A consumer that may not read its source now passes over what
		// the source got meanwhile, so that it does not get it later
		// either (should its owner join the group again).
		var recs []model.Record
		ok, err := s.feeds(ctx, &c)
		if err == nil && ok {
			recs, err = s.consumerRecords(ctx, &c, src)
		}
		if err != nil {
			return err
		}
		to := src[len(src)-1].Seq
		res, err := s.st.AdvanceConsumer(ctx, &store.ConsumerAdvance{Owner: c.Owner, Name: c.Name, CreatedAtMS: c.CreatedAtMS,
			FromSourceSeq: c.SourceSeq, ToSourceSeq: to, Records: recs, NowMS: s.nowMS()})
		switch {
		case errors.Is(err, model.ErrNotFound):
			return nil
		case errors.Is(err, model.ErrConflict):
			// Another node stepped first; continue from where it got.
			if c, err = s.st.GetConsumer(ctx, ck.owner, ck.name); err != nil {
				if errors.Is(err, model.ErrNotFound) {
					return nil
				}
				return err
			}
			continue
		case err != nil:
			return err
		}
		c.SourceSeq = to
		if len(res.Created) > 0 {
			s.cfg.Metrics.Created(model.ConsumerFamily, len(res.Created))
			s.changedRecords(res.Created)
		}
		if len(src) < pumpBatch {
			return nil
		}
	}
	return ctx.Err()
}

// feedGroupConsumers brings up to date, under the membership as it stands,
// the consumers of group's box whose owners' membership changes when the
// subscribers become next. feeds asks about membership when the pump runs,
// not when a message came, so SetSubscribers calls this before it changes
// the membership: a member who leaves gets what came while it was one, and
// one who joins passes over what came while it was not. The consumers of
// members who stay are left to the pump. (A message that comes while the
// list is being replaced may fall on either side of the change.)
func (s *Service) feedGroupConsumers(ctx context.Context, group string, next []string) error {
	cs, err := s.st.ListConsumers(ctx, store.ConsumerQuery{SourceOwner: group, SourceBox: model.GroupInbox})
	if err != nil || len(cs) == 0 {
		return err
	}
	was, err := s.st.GroupSubscribers(ctx, group)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return err
	}
	for _, c := range cs {
		if slices.Contains(was, c.Owner) == slices.Contains(next, c.Owner) {
			continue
		}
		if err := s.pumpConsumer(ctx, consumerKey{c.Owner, c.Name}); err != nil {
			return fmt.Errorf("feed %s's consumer %s before the group's membership changes: %w", c.Owner, c.Name, err)
		}
	}
	return nil
}

// feeds reports whether c's source may feed it now. A group's box feeds
// the consumers of its subscribers (and the group's own) only: a member
// who leaves, or is removed, stops getting the group's messages through a
// consumer as through a read of the box, whoever created the consumer.
// Any other box feeds its consumers as long as they exist: its owner, or
// an admin, made them.
func (s *Service) feeds(ctx context.Context, c *model.Consumer) (bool, error) {
	if c.SourceBox != model.GroupInbox || c.Owner == c.SourceOwner {
		return true, nil
	}
	return s.st.IsSubscriber(ctx, c.SourceOwner, c.Owner)
}

// consumerRecords builds the consumer's records for the source records that match.
func (s *Service) consumerRecords(ctx context.Context, c *model.Consumer, src []model.Record) ([]model.Record, error) {
	ids := make([]string, 0, len(src))
	for _, r := range src {
		ids = append(ids, r.MsgID)
	}
	bodies, err := s.st.GetMessages(ctx, uniq(ids))
	if err != nil {
		return nil, err
	}
	parsed := make(map[string]*message.Message, len(bodies))
	now := s.nowMS()
	box := c.Box()
	var out []model.Record
	for i := range src {
		r := &src[i]
		m, ok := parsed[r.MsgID]
		if !ok {
			body, found := bodies[r.MsgID]
			if !found {
				return nil, fmt.Errorf("source record %s refers to missing message %s", r.RecordID, r.MsgID)
			}
			m = new(message.Message)
			if err := json.Unmarshal(body, m); err != nil {
				return nil, fmt.Errorf("message %s: %w", r.MsgID, err)
			}
			parsed[r.MsgID] = m
		}
		if !matchFilter(&c.Filter, r, m) {
			continue
		}
		out = append(out, model.Record{
			// One consumer record per source record: the variant is the
			// source record's id, so a redone step writes the same ids.
			RecordID:    model.RecordID(c.Owner, box, r.MsgID, r.RecordID),
			Owner:       c.Owner,
			BoxKind:     box,
			MsgID:       r.MsgID,
			State:       model.InitialState(box),
			CreatedAtMS: now,
			UpdatedAtMS: now,
			ThreadKey:   r.ThreadKey,
			SortKey:     r.SortKey,
			Tags:        r.Tags,
		})
	}
	return out, nil
}
