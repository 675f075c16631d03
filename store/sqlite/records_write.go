package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Apply writes one delivery plan. It is answered once the plan is in the
// apply log, or committed when the log cannot carry it (commit.go).
func (s *Store) Apply(ctx context.Context, p *store.Plan) (*store.ApplyResult, error) {
	var res *store.ApplyResult
	req := &writeReq{ctx: ctx, done: make(chan error, 1), defers: true, fn: func(ctx context.Context, tx *sql.Tx) error {
		res = &store.ApplyResult{}
		return s.applyTx(ctx, tx, p, res)
	}}
	if s.applyLog != nil {
		req.logged = applyEntry(p, func() []model.Record { return res.Created })
	}
	if err := s.submit(ctx, req); err != nil {
		return nil, err
	}
	if len(p.MsgBody) > 0 && len(res.Created) > 0 {
		// Its readers (claims, streams, syncs) usually come right after.
		s.bodies.Put(p.MsgID, p.MsgBody)
	}
	return res, nil
}

// applyTx is Apply's part of a write transaction: what can fail on its own
// (the idempotency key, a scheduled entry already consumed) and the body.
// The records are left in s.deferred for the group's one insert.
func (s *Store) applyTx(ctx context.Context, tx *sql.Tx, p *store.Plan, res *store.ApplyResult) error {
	if p.Idem != nil {
		k, err := s.bindIdem(ctx, tx, p.Idem, p.MsgID, p.NowMS)
		if err != nil {
			return err
		}
		if !k.fresh {
			if err := store.BoundKey(p, k.sched, k.due, k.answer); err != nil {
				return err
			}
		}
	}
	var ref int64
	var fresh bool
	// Without a body or records there is nothing to store or refer to.
	if len(p.MsgBody) > 0 || len(p.Records) > 0 {
		var err error
		if ref, fresh, err = s.putMessage(ctx, tx, p.MsgID, p.MsgBody, p.NowMS); err != nil {
			return err
		}
	}
	if p.ConsumeSchedule != 0 {
		n, err := execN(ctx, tx.StmtContext(ctx, s.st.consumeSched), p.ConsumeSchedule)
		if err != nil {
			return fmt.Errorf("sqlite: consume schedule: %w", err)
		}
		if n == 0 {
			return model.Conflict("schedule", fmt.Sprintf("scheduled entry %d was already materialized or cancelled", p.ConsumeSchedule))
		}
		if _, err := tx.StmtContext(ctx, s.st.consumeSchedTo).ExecContext(ctx, p.ConsumeSchedule); err != nil {
			return fmt.Errorf("sqlite: consume schedule: %w", err)
		}
	}
	if p.ConsumeMail != nil {
		if err := s.consumeMail(ctx, tx, p); err != nil {
			return err
		}
	}
	if len(p.Records) > 0 {
		s.deferred = append(s.deferred, recordSet{recs: p.Records, nowMS: p.NowMS, res: res, msgID: p.MsgID, msgRef: ref, fresh: fresh})
	}
	return nil
}

// boundKey is what bindIdem found: a key it bound now (fresh), or the
// entry a delayed send made under it (sched, due: zeros for a send made
// now) and the answer a send made now kept with it.
type boundKey struct {
	fresh      bool
	sched, due int64
	answer     []byte
}

// bindIdem records that (scope, key) carries msgID (fresh), with
// idem.Answer, or fails with a conflict if the key is already bound to
// another message.
func (s *Store) bindIdem(ctx context.Context, tx *sql.Tx, idem *store.Idempotency, msgID string, nowMS int64) (boundKey, error) {
	n, err := execN(ctx, tx.StmtContext(ctx, s.st.insertIdem), idem.Scope, idem.Key, msgID, nowMS, idem.Answer)
	if err != nil {
		return boundKey{}, fmt.Errorf("sqlite: idempotency key: %w", err)
	}
	if n == 1 {
		return boundKey{fresh: true}, nil
	}
	var k boundKey
	var bound string
	if err := tx.StmtContext(ctx, s.st.getIdem).QueryRowContext(ctx, idem.Scope, idem.Key).Scan(&bound, &k.sched, &k.due, &k.answer); err != nil {
		return boundKey{}, fmt.Errorf("sqlite: idempotency key: %w", err)
	}
	if bound != msgID {
		return boundKey{}, model.Conflict("idempotency_key", fmt.Sprintf("idempotency key %q was already used for message %s", idem.Key, bound))
	}
	return k, nil
}

// putMessage stores a message unless it is stored already (ids are content
// hashes, so a stored body is the same body) and returns its number
// (msg_ref, which its records are indexed by) and whether this call stored
// it. Storing it again refreshes its time, which retention reads as "last
// stored" (see store.Purge). A message given without its body is stored
// with an empty one, so its records have a number to refer to; GetMessage
// does not find it until a body comes.
func (s *Store) putMessage(ctx context.Context, tx *sql.Tx, msgID string, body []byte, nowMS int64) (ref int64, fresh bool, err error) {
	if body == nil {
		body = []byte{}
	}
	err = tx.StmtContext(ctx, s.st.insertMsg).QueryRowContext(ctx, msgID, body, nowMS).Scan(&ref)
	if err == nil {
		return ref, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("sqlite: store message: %w", err)
	}
	if err := tx.StmtContext(ctx, s.st.refreshMsg).QueryRowContext(ctx, msgID, body, nowMS).Scan(&ref); err != nil {
		return 0, false, fmt.Errorf("sqlite: store message: %w", err)
	}
	return ref, false, nil
}

// Claim takes the first visible record in From of one box.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	var rec model.Record
	err := s.submit(ctx, s.claimReq(ctx, &p, &rec))
	return rec, err
}

// claimReq is the write of a Claim of p, which leaves the record in rec.
func (s *Store) claimReq(ctx context.Context, p *store.ClaimParams, rec *model.Record) *writeReq {
	req := &writeReq{ctx: ctx, done: make(chan error, 1), fn: func(ctx context.Context, tx *sql.Tx) error {
		var err error
		*rec, err = s.claimTx(ctx, tx, p)
		return err
	}}
	if s.applyLog != nil {
		req.logged = claimEntry(p, func() []model.Record { return []model.Record{*rec} })
	}
	return req
}

// claimTx is Claim's part of a write transaction.
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, p *store.ClaimParams) (model.Record, error) {
	w := s.txStmts(ctx, tx)
	rec, err := scanRecord(w.bind(&w.claim, w.st.claim).QueryRowContext(ctx, string(p.To), p.LeaseID, p.Holder,
		p.LeaseUntilMS, p.NowMS, p.Owner, string(p.Box), string(p.From)))
	if errors.Is(err, sql.ErrNoRows) {
		return rec, model.NotFound("claimable record")
	}
	if err != nil {
		return rec, fmt.Errorf("sqlite: claim: %w", err)
	}
	if err := w.event(ctx, model.EventRecordClaimed, &rec, p.From, p.To, p.NowMS, "holder="+p.Holder); err != nil {
		return rec, err
	}
	return rec, w.unreadDelta(ctx, &rec, p.From, p.To)
}

// Update is a compare-and-set on one record's state (and lease).
func (s *Store) Update(ctx context.Context, u *store.Update) (model.Record, error) {
	var rec model.Record
	err := s.submit(ctx, s.updateReq(ctx, u, &rec))
	return rec, err
}

// updateReq is the write of an Update, which leaves the record in rec.
func (s *Store) updateReq(ctx context.Context, u *store.Update, rec *model.Record) *writeReq {
	req := &writeReq{ctx: ctx, done: make(chan error, 1), fn: func(ctx context.Context, tx *sql.Tx) error {
		var err error
		*rec, err = s.updateTx(ctx, tx, u)
		return err
	}}
	if s.applyLog != nil {
		req.logged = updateEntry(u, func() []model.Record { return []model.Record{*rec} })
	}
	return req
}

// UpdateThenClaim runs the claim right after the update in the same group
// of writes (commit.go: then), so that an ack asking for the next record
// waits for the writer once, and both are logged as the two writes they
// are.
func (s *Store) UpdateThenClaim(ctx context.Context, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed, error) {
	var rec model.Record
	var c store.Claimed
	req, then := s.updateReq(ctx, u, &rec), s.claimReq(ctx, &p, &c.Record)
	req.then, then.follows = then, true
	if err := s.submit(ctx, req); err != nil {
		// Not what fn left: a run of the pair that a lost group undid.
		return model.Record{}, store.Claimed{}, err
	}
	c.Err = <-then.done
	return rec, c, nil
}

// updateTx is Update's part of a write transaction.
func (s *Store) updateTx(ctx context.Context, tx *sql.Tx, u *store.Update) (model.Record, error) {
	w := s.txStmts(ctx, tx)
	d := &u.Delivery
	var leaseID, holder, until any
	if u.Lease != nil {
		leaseID, holder, until = u.Lease.ID, u.Lease.Holder, u.Lease.ExpiresAtMS
	} else if e := u.EndsLease; e != nil {
		leaseID, holder = e.ID, string(e.By)
	}
	lo, hi, legacy := idArgs(u.RecordID)
	rec, err := scanRecord(w.bind(&w.update, w.st.update).QueryRowContext(ctx, string(u.To), d.Attempts, d.NextRetryAtMS,
		d.ExternalMsgID, d.DeliveredAtMS, d.ErrorCode, d.ErrorMessage, d.RetryAfterMS, d.LastError,
		u.VisibleAtMS, leaseID, holder, until, u.NowMS, u.RecordID, string(u.From), u.ExpectLeaseID, lo, hi, legacy))
	if errors.Is(err, sql.ErrNoRows) {
		return rec, s.updateMiss(ctx, tx, u)
	}
	if err != nil {
		return rec, fmt.Errorf("sqlite: update record: %w", err)
	}
	typ := u.EventType
	if typ == "" {
		typ = model.EventRecordState
	}
	if err := w.event(ctx, typ, &rec, u.From, u.To, u.NowMS, u.EventDetail); err != nil {
		return rec, err
	}
	if n := u.Notice; n != nil {
		told := rec
		told.Owner = n.Owner
		if err := w.event(ctx, n.Type, &told, u.From, u.To, u.NowMS, n.Detail); err != nil {
			return rec, err
		}
	}
	if r := u.Receipt; r != nil {
		if err := w.changeReceipt(ctx, r, u.NowMS); err != nil {
			return rec, err
		}
	}
	return rec, w.unreadDelta(ctx, &rec, u.From, u.To)
}

// changeReceipt stores an Update's receipt unless the reader's stored one
// holds a decision or is newer (store.Update.Receipt), with its event.
func (w *txWriter) changeReceipt(ctx context.Context, r *model.Receipt, nowMS int64) error {
	var stored int
	err := w.tx.StmtContext(ctx, w.st.changeReceipt).QueryRowContext(ctx,
		r.MsgID, r.Iss, r.Reader, r.GroupID, r.AtMS, string(r.Status), r.Reason).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: store receipt: %w", err)
	}
	return insertEvent(ctx, w.tx, store.ReceiptEvent(*r, nowMS))
}

// updateMiss explains why an Update's compare-and-set matched nothing.
func (s *Store) updateMiss(ctx context.Context, tx *sql.Tx, u *store.Update) error {
	var state, lease string
	lo, hi, legacy := idArgs(u.RecordID)
	err := tx.StmtContext(ctx, s.st.recordState).QueryRowContext(ctx, u.RecordID, lo, hi, legacy).Scan(&state, &lease)
	if errors.Is(err, sql.ErrNoRows) {
		return model.NotFound("record")
	}
	if err != nil {
		return fmt.Errorf("sqlite: update record: %w", err)
	}
	if model.State(state) != u.From {
		return model.Conflict("state", fmt.Sprintf("record %s is %s, not %s", u.RecordID, state, u.From))
	}
	return model.Conflict("lease_id", fmt.Sprintf("record %s is no longer held under lease %q", u.RecordID, u.ExpectLeaseID))
}

// txWriter binds the hot statements to one write transaction, each on
// first use: Tx.StmtContext is cheap but not free, and most transactions
// need only a few of them.
type txWriter struct {
	ctx context.Context
	tx  *sql.Tx
	st  *stmts
	// seqs is the writer's memory of boxes' last seqs (seqcache.go)
	seqs *seqCache
	// bound copies, by parent statement
	insertEvent, convUnread, claim, update *sql.Stmt
}

func (s *Store) txStmts(ctx context.Context, tx *sql.Tx) *txWriter {
	return &txWriter{ctx: ctx, tx: tx, st: &s.st, seqs: &s.seqs}
}

func (w *txWriter) bind(slot **sql.Stmt, parent *sql.Stmt) *sql.Stmt {
	if *slot == nil {
		*slot = w.tx.StmtContext(w.ctx, parent)
	}
	return *slot
}

// event appends one record event.
func (w *txWriter) event(ctx context.Context, typ string, r *model.Record, from, to model.State, atMS int64, detail string) error {
	_, err := w.bind(&w.insertEvent, w.st.insertEvent).ExecContext(ctx, typ, r.Owner, string(r.BoxKind), r.RecordID, r.MsgID,
		string(from), string(to), atMS, detail)
	if err != nil {
		return fmt.Errorf("sqlite: append event: %w", err)
	}
	return nil
}

// unreadDelta keeps the conversation's unread count in step with a state
// change of one of its records.
func (w *txWriter) unreadDelta(ctx context.Context, r *model.Record, from, to model.State) error {
	delta := model.UnreadDelta(from, to)
	if delta == 0 || r.ThreadKey == "" || !r.BoxKind.HasConversations() {
		return nil
	}
	if _, err := w.bind(&w.convUnread, w.st.convUnread).ExecContext(ctx, delta, r.Owner, r.ThreadKey); err != nil {
		return fmt.Errorf("sqlite: update conversation: %w", err)
	}
	return nil
}

// jsonText encodes v as a JSON text value, or SQL NULL when !present. It
// returns a string, not []byte: the driver binds []byte as a BLOB, which a
// STRICT TEXT column refuses.
func jsonText(present bool, v any) (any, error) {
	if !present {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sqlite: encode %T: %w", v, err)
	}
	return string(b), nil
}

// tagsAndRoute are r's tags and route as their columns hold them: JSON
// text, or NULL when r has none.
func tagsAndRoute(r *model.Record) (tags, route any, err error) {
	if tags, err = jsonText(len(r.Tags) > 0, r.Tags); err != nil {
		return nil, nil, err
	}
	route, err = jsonText(r.Route != nil, r.Route)
	return tags, route, err
}

// execN executes stmt and returns the number of rows it changed.
func execN(ctx context.Context, stmt *sql.Stmt, args ...any) (int64, error) {
	res, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
