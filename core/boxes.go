package core

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// Next is get_next: it claims (or, with lock_on_take false, peeks at) the
// oldest visible record of owner's box. With wait_ms it long-polls: it is
// woken by the write that makes a record claimable, not by a sleep loop.
// It returns nil, nil when there is nothing by the deadline.
func (s *Service) Next(ctx context.Context, who model.Identity, owner string, box model.BoxKind, req *wire.NextRequest) (*wire.RecordWithMsg, error) {
	p, err := s.checkNext(ctx, who, owner, box, req)
	if err != nil {
		return nil, err
	}
	return s.next(ctx, p)
}

// checkBoxStates refuses a filter on a state no record of box can be in:
// it would match nothing, for ever, where the caller surely meant another
// box or another state (WAIT is a tunnel outbox's, UNREAD an inbox's).
func checkBoxStates(field string, box model.BoxKind, states []model.State) error {
	for _, st := range states {
		if !slices.Contains(model.StatesOf(box), st) {
			return model.Invalid(field, fmt.Sprintf("no %s record is ever %s (its states: %s)", box, st, joinStates(model.StatesOf(box))))
		}
	}
	return nil
}

func joinStates(states []model.State) string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return strings.Join(out, ", ")
}

// nextCall is a checked get_next.
type nextCall struct {
	who     model.Identity
	owner   string
	box     model.BoxKind
	req     *wire.NextRequest
	lock    bool
	withObj bool
	states  []model.State
	lease   time.Duration
	// first, when set, is the first attempt's claim, made already with the
	// change before it (Service.update, Store.UpdateThenClaim).
	first *firstClaim
}

// firstClaim is a claim made in the same write as the change that asked
// for it, with what next needs of its first attempt: the watch taken
// before it and the time it was tried at.
type firstClaim struct {
	changed <-chan struct{}
	tried   int64
	rec     model.Record
	err     error
}

// checkNext checks a get_next for who, before it changes anything.
func (s *Service) checkNext(ctx context.Context, who model.Identity, owner string, box model.BoxKind, req *wire.NextRequest) (*nextCall, error) {
	lock := orTrue(req.LockOnTake)
	if lock {
		if err := canAct(who, owner); err != nil {
			return nil, err
		}
	} else if err := s.canRead(ctx, who, owner, box); err != nil {
		return nil, err
	}
	claimable := model.ClaimableState(box)
	states := req.StateFilter
	if len(states) == 0 {
		states = []model.State{claimable}
	}
	for _, st := range states {
		if _, err := model.ParseState(string(st)); err != nil {
			return nil, model.Invalid("state_filter", err.(*model.Error).Message)
		}
		if lock && st != claimable {
			return nil, model.Invalid("state_filter", fmt.Sprintf("a claim takes %s records from %s; to look at %s records set lock_on_take to false", claimable, box, st))
		}
	}
	if err := checkBoxStates("state_filter", box, states); err != nil {
		return nil, err
	}
	lease, err := s.leaseDuration(req.LeaseMS)
	if err != nil {
		return nil, err
	}
	// A label for the worker (a host, a pid, a DID), stored on the record
	// and on every lease event: bounded like a route's text.
	if err := checkRouteText("holder", req.Holder); err != nil {
		return nil, err
	}
	if req.WaitMS < 0 || req.WaitMS > s.cfg.MaxWait.Milliseconds() {
		return nil, model.Invalid("wait_ms", fmt.Sprintf("must be between 0 and %d", s.cfg.MaxWait.Milliseconds()))
	}
	return &nextCall{who: who, owner: owner, box: box, req: req, lock: lock, withObj: orTrue(req.WithObject),
		states: states, lease: lease}, nil
}

// next runs a checked get_next.
func (s *Service) next(ctx context.Context, p *nextCall) (*wire.RecordWithMsg, error) {
	who, owner, box, req, lock := p.who, p.owner, p.box, p.req, p.lock
	deadline := time.Now().Add(time.Duration(req.WaitMS) * time.Millisecond)
	for wake := wakeNone; ; {
		if wake != wakeNone {
			if err := s.stillMay(ctx, p); err != nil {
				return nil, err
			}
		}
		var changed <-chan struct{}
		var tried int64
		var rec model.Record
		var err error
		var nextAt int64
		known := false // whether nextAt answers NextVisible already
		made := p.first != nil
		if made {
			changed, tried, rec, err = p.first.changed, p.first.tried, p.first.rec, p.first.err
			p.first = nil
		} else {
			if lock {
				changed = s.notify.WatchClaims(owner, box)
			} else {
				changed = s.notify.Watch(owner, box)
			}
			tried = s.nowMS() // before the attempt: see NextVisible below
		}
		switch {
		case made:
			// the first attempt's claim came with the change (p.first)
		case lock && wake != wakeNone:
			rec, nextAt, known, err = s.claimWoken(ctx, who, owner, box, p.lease, req.Holder, tried, deadline, changed, wake)
		case lock:
			// A claimer back for more (after an ack) while the box is
			// known empty waits without a claim write that would find
			// nothing. Not without wait_ms: a poll answers from the store,
			// and a timer looks again, whatever the mark says.
			if req.WaitMS > 0 {
				if nextAt, known = s.notify.knownEmpty(owner, box, changed, tried); known {
					s.cfg.Metrics.ClaimWake(box, WakeSkipped)
					err = model.NotFound("claimable record")
					break
				}
			}
			rec, err = s.claim(ctx, who, owner, box, p.lease, req.Holder)
		default:
			rec, nextAt, err = s.peek(ctx, owner, box, p.states, tried)
		}
		if err == nil {
			return s.withMsg(ctx, rec, p.withObj)
		}
		if !errors.Is(err, model.ErrNotFound) {
			return nil, err
		}
		if wake == wakeNone {
			if err := s.noSuchConsumer(ctx, owner, box); err != nil {
				return nil, err
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		// A record retrying with backoff becomes claimable at a known time
		// without any write: wake then too. Asked from the time of the
		// attempt, not now: a backoff that ended in between would be in
		// neither answer, and the claimer would sleep next to it. A
		// claimer that found nothing says so, as claimWoken does, and takes
		// the word of another that said so for when to look again.
		if lock && !known {
			if nextAt, known = s.notify.knownEmpty(owner, box, changed, tried); !known {
				if nextAt, err = s.foundEmpty(ctx, owner, box, changed, tried); err != nil {
					return nil, err
				}
			}
		}
		if nextAt != 0 {
			left = min(left, time.Duration(nextAt-s.nowMS())*time.Millisecond)
		}
		// Look again now and then even without a wake-up: with several nodes
		// a notification can be lost with its connection, and this bounds
		// what that costs.
		t := time.NewTimer(min(left, s.cfg.IdleRecheck))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
			wake = wakeChange
		case <-t.C:
			wake = wakeTimer
		}
		t.Stop()
	}
}

// stillMay checks, before a waiting next looks again, that the caller may
// still do what it asked when it started: its token still holds
// (StillValid), and a peek's reader still reads the box (a member removed
// from a group meanwhile does not). A claim's right is its own DID's,
// which does not change.
func (s *Service) stillMay(ctx context.Context, p *nextCall) error {
	if err := s.StillValid(ctx); err != nil {
		return err
	}
	if !p.lock {
		return s.canRead(ctx, p.who, p.owner, p.box)
	}
	return nil
}

// How a waiting claimer came to look again.
type wakeReason int

const (
	wakeNone   wakeReason = iota // its first attempt
	wakeChange                   // a change that may have left something to claim
	wakeTimer                    // its timer: a delayed record's time, or the idle recheck
)

func (s *Service) leaseDuration(ms int64) (time.Duration, error) {
	if ms == 0 {
		return s.cfg.DefaultLease, nil
	}
	// Compared in milliseconds: a huge ms would overflow a Duration and
	// slip under the bound as a lease already expired.
	if ms < 0 || ms > s.cfg.MaxLease.Milliseconds() {
		return 0, model.Invalid("lease_ms", fmt.Sprintf("must be between 1 and %d (%s), or 0 for the default (%s)", s.cfg.MaxLease.Milliseconds(), s.cfg.MaxLease, s.cfg.DefaultLease))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func newLeaseID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "lease:" + hex.EncodeToString(b[:])
}

func (s *Service) claim(ctx context.Context, who model.Identity, owner string, box model.BoxKind, lease time.Duration, holder string) (model.Record, error) {
	now := s.nowMS()
	p := claimParams(who, owner, box, now, lease, holder)
	rec, err := s.st.Claim(ctx, p)
	if err != nil {
		return rec, err
	}
	s.claimed(owner, box, now, p.LeaseUntilMS)
	return rec, nil
}

// claimParams is who's claim of (owner, box) at nowMS; the holder is who
// unless named.
func claimParams(who model.Identity, owner string, box model.BoxKind, nowMS int64, lease time.Duration, holder string) store.ClaimParams {
	if holder == "" {
		holder = who.DID
	}
	return store.ClaimParams{Owner: owner, Box: box, From: model.ClaimableState(box), To: model.HeldState(box),
		NowMS: nowMS, LeaseID: newLeaseID(), Holder: holder, LeaseUntilMS: nowMS + lease.Milliseconds()}
}

// claimed is what follows a claim that took a record at now, held until.
func (s *Service) claimed(owner string, box model.BoxKind, now, until int64) {
	s.cfg.Metrics.Claimed(box)
	s.notify.ChangedAny() // the claim is an event; event streams should see it now
	// A record claimed from a box said to be empty came without a change
	// announcing it (another node's notification lost): the claimers
	// sleeping on that word look again, so a backlog is not worked at one
	// record per idle recheck.
	if s.notify.contradicted(owner, box, now) {
		s.notify.Changed(owner, box)
	}
	if at := s.reaperAt.get(); at == 0 || until < at {
		kick(s.reaperKick)
	}
}

// claimWoken is a claim by a claimer a change to the box woke. Every
// change that may leave something to claim wakes every waiting claimer,
// and one new record leaves something for one of them: it asks with a
// read before queueing a write for the store's writer (measured in
// msgload's mixed mode at 800 msgs/s: 58% of claim writes found nothing,
// and asking first took the p99 from send to claim from 287 ms to 44 ms),
// and it asks behind the box's wake gate, after the previous woken
// claimer's write. A claimer that finds nothing says so (foundEmpty), and
// the others the same change woke take its word instead of asking again;
// one woken by its timer asks anyway, since the timer stands for what no
// change announces (a delayed record's time, a lost notification from
// another node). Waiting for the gate ends at the caller's deadline like
// any other wait. It returns, with a record not found, when the next
// delayed record becomes claimable if it learned that (known).
func (s *Service) claimWoken(ctx context.Context, who model.Identity, owner string, box model.BoxKind, lease time.Duration, holder string,
	nowMS int64, deadline time.Time, changed <-chan struct{}, wake wakeReason) (rec model.Record, nextAt int64, known bool, err error) {
	leave, err := s.woken.enter(ctx, boxKey{owner, box}, deadline)
	if errors.Is(err, errGateTimeout) {
		return rec, 0, false, model.NotFound("claimable record") // out of time
	}
	if err != nil {
		return rec, 0, false, err
	}
	defer leave()
	if wake == wakeChange {
		if at, ok := s.notify.knownEmpty(owner, box, changed, nowMS); ok {
			s.cfg.Metrics.ClaimWake(box, WakeSkipped)
			return rec, at, true, model.NotFound("claimable record")
		}
	}
	ok, err := s.st.Claimable(ctx, owner, box, model.ClaimableState(box), nowMS)
	if err != nil {
		return rec, 0, false, err
	}
	if !ok {
		at, err := s.foundEmpty(ctx, owner, box, changed, nowMS)
		if err != nil {
			return rec, 0, false, err
		}
		s.cfg.Metrics.ClaimWake(box, WakeEmpty)
		return rec, at, true, model.NotFound("claimable record")
	}
	rec, err = s.claim(ctx, who, owner, box, lease, holder)
	if err == nil {
		s.cfg.Metrics.ClaimWake(box, WakeTaken)
	}
	return rec, 0, false, err
}

// foundEmpty is what a claimer holding changed that found nothing to
// claim at nowMS does: it asks when a delayed record becomes visible (0:
// none) and says so to the others (notifier.foundEmpty).
func (s *Service) foundEmpty(ctx context.Context, owner string, box model.BoxKind, changed <-chan struct{}, nowMS int64) (int64, error) {
	at, ok, err := s.st.NextVisible(ctx, owner, box, model.ClaimableState(box), nowMS)
	if err != nil {
		return 0, err
	}
	if !ok {
		at = 0
	}
	s.notify.foundEmpty(owner, box, changed, at)
	return at, nil
}

// peekPage is how many records a peek reads at a time while it passes
// over records still in their retry backoff.
const peekPage = 100

// peek returns the first record of the box in one of states that a claim
// could see at nowMS: a record in the claimable state waiting out its
// retry backoff is not there yet, for a peek as for a claim. When it
// finds none, nextAt is when the first it passed over becomes visible (0:
// none), for a waiting peek to look again then.
func (s *Service) peek(ctx context.Context, owner string, box model.BoxKind, states []model.State, nowMS int64) (rec model.Record, nextAt int64, err error) {
	claimable := model.ClaimableState(box)
	for after := int64(0); ; {
		recs, err := s.st.Sync(ctx, store.SyncParams{Owner: owner, Box: box, States: states, AfterSeq: after, Limit: peekPage})
		if err != nil {
			return model.Record{}, 0, err
		}
		for _, r := range recs {
			if at := r.Delivery.NextRetryAtMS; r.State == claimable && at > nowMS {
				if nextAt == 0 || at < nextAt {
					nextAt = at
				}
				continue
			}
			return r, 0, nil
		}
		if len(recs) < peekPage {
			return model.Record{}, nextAt, model.NotFound("record")
		}
		after = recs[len(recs)-1].Seq
	}
}

func (s *Service) withMsg(ctx context.Context, rec model.Record, withObj bool) (*wire.RecordWithMsg, error) {
	out := &wire.RecordWithMsg{Record: rec}
	if withObj {
		body, err := s.st.GetMessage(ctx, rec.MsgID)
		if err != nil {
			return nil, err
		}
		out.Msg = json.RawMessage(body)
	}
	return out, nil
}

func (s *Service) withMsgs(ctx context.Context, recs []model.Record, withObj bool) ([]wire.RecordWithMsg, error) {
	out := make([]wire.RecordWithMsg, 0, len(recs))
	var bodies map[string][]byte
	if withObj && len(recs) > 0 {
		ids := make([]string, 0, len(recs))
		for _, r := range recs {
			ids = append(ids, r.MsgID)
		}
		var err error
		if bodies, err = s.st.GetMessages(ctx, uniq(ids)); err != nil {
			return nil, err
		}
	}
	for _, r := range recs {
		item := wire.RecordWithMsg{Record: r}
		if withObj {
			b, ok := bodies[r.MsgID]
			if !ok {
				return nil, fmt.Errorf("record %s refers to missing message %s", r.RecordID, r.MsgID)
			}
			item.Msg = b
		}
		out = append(out, item)
	}
	return out, nil
}

// ListRecords is list_box_by_time: a page of a box by (sort_key, record_id).
func (s *Service) ListRecords(ctx context.Context, who model.Identity, q wire.ListQuery) (*wire.ListResult, error) {
	if err := s.canRead(ctx, who, q.Owner, q.Box); err != nil {
		return nil, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if err := checkBoxStates("state", q.Box, q.States); err != nil {
		return nil, err
	}
	recs, err := s.st.ListRecords(ctx, store.ListParams{Owner: q.Owner, Box: q.Box, States: q.States, Tag: q.Tag,
		Desc: q.Desc, CursorSortKey: q.CursorSortKey, CursorRecordID: q.CursorRecordID, Limit: limit})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		if err := s.noSuchConsumer(ctx, q.Owner, q.Box); err != nil {
			return nil, err
		}
	}
	items, err := s.withMsgs(ctx, recs, q.WithObject)
	if err != nil {
		return nil, err
	}
	res := &wire.ListResult{Items: items}
	if len(recs) == limit {
		last := recs[len(recs)-1]
		res.NextCursorSortKey, res.NextCursorRecordID = last.SortKey, last.RecordID
	}
	return res, nil
}

// Sync reads a box as a log: records with seq > after_seq, in seq order.
func (s *Service) Sync(ctx context.Context, who model.Identity, q wire.SyncQuery) (*wire.SyncResult, error) {
	if err := s.canRead(ctx, who, q.Owner, q.Box); err != nil {
		return nil, err
	}
	if q.AfterSeq < 0 {
		return nil, model.Invalid("after_seq", "must not be negative")
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	recs, err := s.st.Sync(ctx, store.SyncParams{Owner: q.Owner, Box: q.Box, AfterSeq: q.AfterSeq, Limit: limit, ThreadKey: q.ThreadKey})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		if err := s.emptySync(ctx, q.Owner, q.Box, q.AfterSeq); err != nil {
			return nil, err
		}
	}
	items, err := s.withMsgs(ctx, recs, q.WithObject)
	if err != nil {
		return nil, err
	}
	res := &wire.SyncResult{Items: items, LastSeq: q.AfterSeq}
	if n := len(recs); n > 0 {
		res.LastSeq = recs[n-1].Seq
	}
	return res, nil
}

// GetRecord returns one record (and its message).
func (s *Service) GetRecord(ctx context.Context, who model.Identity, recordID string, withObj bool) (*wire.RecordWithMsg, error) {
	rec, err := s.st.GetRecord(ctx, recordID)
	if err != nil {
		return nil, err
	}
	if err := s.canRead(ctx, who, rec.Owner, rec.BoxKind); err != nil {
		if !errors.Is(err, model.ErrForbidden) {
			return nil, err
		}
		if ok, aerr := s.authorOf(ctx, who, rec); aerr != nil || !ok {
			return nil, cmp.Or(aerr, notVisible())
		}
		// The author sees how the delivery went, not where it went: the
		// recipient's address and chat are the tunnel's and the admin's.
		if rec.Route != nil {
			rec.Route = &model.Route{TunnelDID: rec.Route.TunnelDID, Platform: rec.Route.Platform, TargetDID: rec.Route.TargetDID}
		}
		if rec.Lease != nil {
			l := *rec.Lease
			l.ID, l.Holder = "", ""
			rec.Lease = &l
		}
	}
	return s.withMsg(ctx, rec, withObj)
}

// authorOf: is who the author of a message rec delivers through a tunnel?
func (s *Service) authorOf(ctx context.Context, who model.Identity, rec model.Record) (bool, error) {
	if rec.BoxKind != model.TunnelOutbox {
		return false, nil
	}
	author, err := s.author(ctx, rec.MsgID)
	return author != "" && author == who.DID, err
}

// author is who wrote a message: its sender, or its source when a group
// speaks; "" when the message is gone or unreadable.
func (s *Service) author(ctx context.Context, msgID string) (string, error) {
	body, err := s.st.GetMessage(ctx, msgID)
	if errors.Is(err, model.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	m, err := message.Decode(body)
	if err != nil {
		return "", nil
	}
	return m.LogicalSender(), nil
}

// GetMessage returns a message's canonical JSON to anyone holding a record
// of it (and to admins).
func (s *Service) GetMessage(ctx context.Context, who model.Identity, msgID string) (json.RawMessage, error) {
	if !isAdmin(who) {
		ok, err := s.st.CanReadMessage(ctx, who.DID, msgID)
		if err == nil && !ok && who.Role == model.RoleTunnel {
			// A tunnel reads what came in through it, to answer it (a
			// mail's subject); its receipts and the rest stay closed.
			ok, err = s.st.CameThrough(ctx, who.DID, msgID)
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			// Same answer as a missing message: do not reveal what exists.
			return nil, model.NotFound("message")
		}
	}
	body, err := s.st.GetMessage(ctx, msgID)
	if err != nil {
		return nil, err
	}
	return body, nil
}

// orTrue reads a request's optional flag whose default is true
// (lock_on_take, with_object).
func orTrue(b *bool) bool { return b == nil || *b }
