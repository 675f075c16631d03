package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// convBoxes lists the box kinds whose records feed conversations, passed to
// SQL as an array so the rule stays model.BoxKind.HasConversations.
var convBoxes = func() []string {
	var out []string
	for _, b := range model.BoxKinds {
		if b.HasConversations() {
			out = append(out, string(b))
		}
	}
	return out
}()

const (
	sqlInsertIdem = `INSERT INTO idempotency (scope, key, msg_id, created_at_ms, answer) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (scope, key) DO NOTHING`
	sqlGetIdem = `SELECT msg_id, sched_id, due_at_ms, answer FROM idempotency WHERE scope = $1 AND key = $2`
	// Ids are content hashes, so an existing body is the same body: only
	// its ref_at_ms is refreshed. DO UPDATE rather than DO NOTHING because
	// it locks the row until commit even when its WHERE skips the write, and
	// a refreshed time fails the purge's age check: together they keep a
	// concurrent orphan purge off a body this transaction is about to refer
	// to (see 0002_consumers.sql and deleteOrphanBodies). The WHERE spares
	// a write when the body was already refreshed as late.
	sqlInsertMsg = `INSERT INTO messages (msg_id, body, created_at_ms, ref_at_ms) VALUES ($1, $2, $3, $3)
		ON CONFLICT (msg_id) DO UPDATE SET ref_at_ms = excluded.ref_at_ms
		WHERE messages.ref_at_ms < excluded.ref_at_ms`
	sqlConsumeSched = `WITH d AS (DELETE FROM scheduled WHERE sched_id = $1 RETURNING sched_id),
			r AS (DELETE FROM scheduled_recipients WHERE sched_id IN (SELECT sched_id FROM d))
		SELECT count(*) FROM d`

	// sqlLockBox takes the box's counter row lock (creating the row on the
	// box's first record) without changing it. See lockBoxes.
	sqlLockBox = `INSERT INTO box_seqs (owner, box, last_seq) VALUES ($1, $2, 0)
		ON CONFLICT (owner, box) DO UPDATE SET last_seq = box_seqs.last_seq`
)

// Apply writes one delivery plan in one transaction, sent as one batch:
// idempotency key, body, schedule consumption, box locks and one statement
// for all the records (bulk.go) travel in a single round trip (plus BEGIN and COMMIT). Plans
// that arrive while another is being written share its successor's
// transaction (group.go).
func (s *Store) Apply(ctx context.Context, p *store.Plan) (*store.ApplyResult, error) {
	var res *store.ApplyResult
	var err error
	if s.group != nil {
		res, err = s.group.apply(ctx, p)
	} else {
		res, err = s.applyAlone(ctx, p)
	}
	if err == nil && len(p.MsgBody) > 0 && len(res.Created) > 0 {
		// Its readers (claims, streams, syncs) usually come right after.
		s.bodies.Put(p.MsgID, p.MsgBody)
	}
	return res, err
}

// applyAlone writes one plan in a transaction of its own: its box locks
// and its statements in one round trip, between BEGIN and COMMIT.
//
// Box locks come before the body's row lock (sqlInsertMsg) because a group
// holds all of its boxes before its first plan runs: a lone plan that took
// a body first could wait for a box the group holds while the group waits
// for that body. (AdvanceConsumer locks bodies before boxes, but its boxes
// are consumer boxes, which plans never write.)
func (s *Store) applyAlone(ctx context.Context, p *store.Plan) (*store.ApplyResult, error) {
	var res *store.ApplyResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		q, err := s.queuePlan(p)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		locks := lockBoxes(b, q.recs)
		q.queueInto(b)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if err := readLocks(br, locks); err != nil {
			return err
		}
		r, idemNew, err := q.read(br)
		if err != nil {
			return err
		}
		if err := br.Close(); err != nil {
			return fail("apply", err)
		}
		if !idemNew {
			// Checked last, after the batch: the rollback undoes everything
			// the batch wrote, so "nothing written" holds all the same.
			if err := checkPlanIdem(ctx, tx, p); err != nil {
				return err
			}
		}
		res = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// queuedPlan is one plan's statements, queued in a batch of their own so
// that a group can put several plans in one round trip (group.go); read
// takes their results back in the same order.
type queuedPlan struct {
	p     *store.Plan
	recs  []model.Record
	batch pgx.Batch
}

// queuePlan queues p's statements (without its box locks): idempotency
// key, body, schedule consumption and the records (bulk.go).
func (s *Store) queuePlan(p *store.Plan) (*queuedPlan, error) {
	q := &queuedPlan{p: p, recs: slices.Clone(p.Records)}
	b := &q.batch
	if p.Idem != nil {
		b.Queue(sqlInsertIdem, p.Idem.Scope, p.Idem.Key, p.MsgID, p.NowMS, p.Idem.Answer)
	}
	if len(p.MsgBody) > 0 {
		b.Queue(sqlInsertMsg, p.MsgID, p.MsgBody, p.NowMS)
	}
	if p.ConsumeSchedule != 0 {
		b.Queue(sqlConsumeSched, p.ConsumeSchedule)
	}
	if c := p.ConsumeMail; c != nil {
		b.Queue(sqlConsumeMail, c.BucketID, c.Parts, p.MsgID, p.NowMS)
	}
	if err := s.queueRecords(b, q.recs, p.NowMS); err != nil {
		return nil, err
	}
	return q, nil
}

// queueInto queues q's statements in b. Each time anew: pgx remembers in
// a queued query the prepared statement it was sent with, and a failed
// batch deallocates those, so a plan sent again after one (group.go) must
// not reuse them.
func (q *queuedPlan) queueInto(b *pgx.Batch) {
	for _, qq := range q.batch.QueuedQueries {
		b.Queue(qq.SQL, qq.Arguments...)
	}
}

// read reads the results of q's statements from br. idemNew is false when
// the plan's idempotency key existed already: the caller then checks, with
// checkIdem, that it is bound to this message.
func (q *queuedPlan) read(br pgx.BatchResults) (res *store.ApplyResult, idemNew bool, err error) {
	p := q.p
	res, idemNew = &store.ApplyResult{}, true
	if p.Idem != nil {
		tag, err := br.Exec()
		if err != nil {
			return nil, false, fail("idempotency key", err)
		}
		idemNew = tag.RowsAffected() == 1
	}
	if len(p.MsgBody) > 0 {
		if _, err := br.Exec(); err != nil {
			return nil, false, fail("store message", err)
		}
	}
	if p.ConsumeSchedule != 0 {
		var n int64
		if err := br.QueryRow().Scan(&n); err != nil {
			return nil, false, fail("consume schedule", err)
		}
		if n == 0 {
			return nil, false, model.Conflict("schedule", fmt.Sprintf("scheduled entry %d was already materialized or cancelled", p.ConsumeSchedule))
		}
	}
	if c := p.ConsumeMail; c != nil {
		var n int64
		if err := br.QueryRow().Scan(&n); err != nil {
			return nil, false, fail("consume mail", err)
		}
		if n == 0 {
			return nil, false, model.Conflict("mail", fmt.Sprintf("mail bucket %d was already flushed or changed", c.BucketID))
		}
	}
	if err := readRecords(br, q.recs, res); err != nil {
		return nil, false, err
	}
	return res, idemNew, nil
}

// checkIdem fails with a conflict if the key, which already existed, is
// bound to another message. A separate statement so that it sees a key a
// concurrent transaction committed while ours waited for it.
//
// A key retention deleted since our insert met it is no longer bound to
// anything: the plan goes ahead without binding it again (inserting it now
// could be rolled back with a later plan of a group commit), and a repeat
// of the same message still makes nothing new, its records being there.
func checkIdem(ctx context.Context, tx pgx.Tx, idem *store.Idempotency, msgID string) error {
	_, err := boundIdem(ctx, tx, idem, msgID)
	return err
}

// checkPlanIdem is checkIdem for a plan: a key a delayed send bound is
// that send's, and a plan that does not consume its entry is a repeat of
// it (store.KeyScheduled); a key a send made now bound makes the plan a
// repeat of that send (store.KeyRepeated). Either way the caller undoes
// what the plan's statements wrote.
func checkPlanIdem(ctx context.Context, tx pgx.Tx, p *store.Plan) error {
	k, err := boundIdem(ctx, tx, p.Idem, p.MsgID)
	if err != nil || !k.found {
		return err
	}
	return store.BoundKey(p, k.sched, k.due, k.answer)
}

// boundKey is what boundIdem found under a key: nothing (retention took
// it), or the entry a delayed send made under it (zeros for a send made
// now) and the answer a send made now kept with it.
type boundKey struct {
	found      bool
	sched, due int64
	answer     []byte
}

// boundIdem is checkIdem, returning what the key holds.
func boundIdem(ctx context.Context, tx pgx.Tx, idem *store.Idempotency, msgID string) (boundKey, error) {
	var bound string
	k := boundKey{found: true}
	err := tx.QueryRow(ctx, sqlGetIdem, idem.Scope, idem.Key).Scan(&bound, &k.sched, &k.due, &k.answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return boundKey{}, nil
	}
	if err != nil {
		return boundKey{}, fail("idempotency key", err)
	}
	if bound != msgID {
		return boundKey{}, model.Conflict("idempotency_key", fmt.Sprintf("idempotency key %q was already used for message %s", idem.Key, bound))
	}
	return k, nil
}

type boxKey struct{ owner, box string }

// distinctBoxes returns the boxes recs go to, sorted.
func distinctBoxes(recs []model.Record) []boxKey {
	out := make([]boxKey, 0, len(recs))
	for _, r := range recs {
		out = append(out, boxKey{r.Owner, string(r.BoxKind)})
	}
	slices.SortFunc(out, func(a, b boxKey) int {
		return cmp.Or(cmp.Compare(a.owner, b.owner), cmp.Compare(a.box, b.box))
	})
	return slices.Compact(out)
}

// lockBoxes queues the lock of every box the plan writes to, before any
// record is inserted.
//
// Why: a seq must never become visible below one a reader has already
// passed. If transaction A took seq 5 and B took seq 6, B must not commit
// first, or a reader syncing after B's commit moves its cursor to 6 and
// never sees 5. Taking the seq from a counter row whose lock is held until
// commit makes B wait for A: per box, seq order is commit order.
//
// The locks are taken in sorted (owner, box) order, whatever the plan's
// record order, so two plans writing to the same boxes cannot deadlock on
// them. Holding the box lock also means no other transaction can be halfway
// through inserting one of our records, so the insert that follows sees
// every existing record and never consumes a seq for one.
//
// It returns how many locks it queued, for readLocks.
func lockBoxes(b *pgx.Batch, recs []model.Record) int {
	boxes := distinctBoxes(recs)
	for _, k := range boxes {
		b.Queue(sqlLockBox, k.owner, k.box)
	}
	return len(boxes)
}

// readLocks reads the results of n queued box locks.
func readLocks(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return fail("lock box", err)
		}
	}
	return nil
}

// sqlChangeTail follows a CTE c that changed one record (RETURNING *): the
// event and the conversation's unread delta ride in the same statement
// (data-modifying CTEs), so Claim and Update are one round trip each and
// atomic without an explicit transaction. The delta is appended, not added
// to the conversation's row, which a send may hold (migration 0005). Its fmt arguments are the SQL
// expressions (usually placeholders) for: 1 event type, 2 event detail,
// 3 event time, 4 unread delta, 5 conversation box kinds (text[]),
// 6 from state, 7 to state.
const sqlChangeTail = `, ev AS (
		INSERT INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail)
		SELECT %[1]s::text, owner, box, record_id, msg_id, %[6]s::text, %[7]s::text, %[3]s::bigint, %[2]s::text FROM c
	), cv AS (
		INSERT INTO conversation_unread (owner, thread_key, delta)
		SELECT owner, thread_key, %[4]s::bigint FROM c
		WHERE %[4]s::bigint <> 0 AND c.thread_key <> '' AND c.box = ANY(%[5]s::text[])
	)
	SELECT ` + recordCols + ` FROM c`

// sqlClaim picks and takes the record in one statement. SKIP LOCKED makes
// concurrent claimers pass over a row another claimer is taking instead of
// queueing behind it (and then finding it gone); the subquery re-checks its
// WHERE on the row it locks, so a record is never handed to two holders.
var sqlClaim = `WITH c AS (
		UPDATE records SET state = $1::text, lease_id = $2::text, lease_holder = $3::text,
			lease_until_ms = $4::bigint, updated_at_ms = $5::bigint
		WHERE record_id = (SELECT record_id FROM records
			WHERE owner = $6::text AND box = $7::text AND state = $8::text AND visible_at_ms <= $5::bigint
			ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING *
	)` + fmt.Sprintf(sqlChangeTail, "'"+model.EventRecordClaimed+"'", "'holder=' || $3::text", "$5", "$9", "$10", "$8", "$1")

// Claim takes the first visible record in From of one box.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (model.Record, error) {
	var rec model.Record
	err := retry(ctx, s.log, func() error {
		var err error
		rec, err = scanRecord(s.pool.QueryRow(ctx, sqlClaim, claimArgs(&p)...))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, model.NotFound("claimable record")
	}
	if err != nil {
		return rec, fail("claim", err)
	}
	return rec, nil
}

func claimArgs(p *store.ClaimParams) []any {
	delta := 0
	if p.Box.HasConversations() {
		delta = model.UnreadDelta(p.From, p.To)
	}
	return []any{string(p.To), p.LeaseID, p.Holder, p.LeaseUntilMS, p.NowMS, p.Owner, string(p.Box), string(p.From), delta, convBoxes}
}

// sqlUpdate is the compare-and-set: it matches nothing unless the record is
// still in From (and holds the expected lease, when one is given). The
// state is compared as an expression no index serves (the state joined to
// an empty string): a generic plan made while records held a few rows
// otherwise walked records_box_state on that column alone, reading every
// record in From of every box once the table had grown; now the record's
// id is the only way in (TestGenericPlansUseIndexes).
var sqlUpdate = `WITH c AS (
		UPDATE records SET state = $1::text, attempts = $2::int, next_retry_at_ms = $3::bigint,
			external_msg_id = $4::text, delivered_at_ms = $5::bigint, error_code = $6::text,
			error_message = $7::text, retry_after_ms = $8::bigint, last_error = $9::text,
			visible_at_ms = $10::bigint, lease_id = $11::text, lease_holder = $12::text,
			lease_until_ms = $13::bigint, updated_at_ms = $14::bigint
		WHERE record_id IN ($15::text, $22::text) AND state || '' = $16::text AND ($17::text = '' OR (lease_id = $17::text AND lease_until_ms IS NOT NULL))
		RETURNING *
	), notice AS (
		INSERT INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail)
		SELECT $24::text, $23::text, box, record_id, msg_id, $16::text, $1::text, $14::bigint, $25::text FROM c
		WHERE $23::text <> ''
	), rcpt AS (
		INSERT INTO receipts (msg_id, iss, reader, group_id, at_ms, status, reason)
		SELECT $26::text, $27::text, $28::text, $29::text, $30::bigint, $31::text, $32::text FROM c
		WHERE $26::text <> ''
		ON CONFLICT (msg_id, reader) DO UPDATE SET
			iss = excluded.iss, group_id = excluded.group_id, at_ms = excluded.at_ms,
			status = excluded.status, reason = excluded.reason
		WHERE excluded.at_ms >= receipts.at_ms
			AND receipts.status IN ('` + string(model.ReceiptUnread) + `', '` + string(model.ReceiptReading) + `')
			AND (receipts.status, receipts.reason) IS DISTINCT FROM (excluded.status, excluded.reason)
		RETURNING 1
	), rcpt_event AS (
		INSERT INTO events (type, owner, msg_id, at_ms, detail)
		SELECT '` + model.EventReceiptSet + `', $33::text, $26::text, $14::bigint, $34::text FROM rcpt
	)` + fmt.Sprintf(sqlChangeTail, "$18", "$19", "$14", "$20", "$21", "$16", "$1")

// Update is a compare-and-set on one record's state (and lease).
func (s *Store) Update(ctx context.Context, u *store.Update) (model.Record, error) {
	var rec model.Record
	err := retry(ctx, s.log, func() error {
		var err error
		rec, err = scanRecord(s.pool.QueryRow(ctx, sqlUpdate, updateArgs(u)...))
		return err
	})
	return s.updated(ctx, u, rec, err)
}

func updateArgs(u *store.Update) []any {
	d := &u.Delivery
	var leaseID, holder, until any
	if u.Lease != nil {
		leaseID, holder, until = u.Lease.ID, u.Lease.Holder, u.Lease.ExpiresAtMS
	} else if e := u.EndsLease; e != nil {
		leaseID, holder = e.ID, string(e.By)
	}
	typ := u.EventType
	if typ == "" {
		typ = model.EventRecordState
	}
	var n store.Notice
	if u.Notice != nil {
		n = *u.Notice
	}
	var r model.Receipt
	var re model.Event
	if u.Receipt != nil {
		r, re = *u.Receipt, store.ReceiptEvent(*u.Receipt, u.NowMS)
	}
	return []any{string(u.To), d.Attempts, d.NextRetryAtMS,
		d.ExternalMsgID, d.DeliveredAtMS, d.ErrorCode, d.ErrorMessage, d.RetryAfterMS, d.LastError,
		u.VisibleAtMS, leaseID, holder, until, u.NowMS, u.RecordID, string(u.From), u.ExpectLeaseID,
		typ, u.EventDetail, model.UnreadDelta(u.From, u.To), convBoxes, legacyID(u.RecordID),
		n.Owner, n.Type, n.Detail,
		r.MsgID, r.Iss, r.Reader, r.GroupID, r.AtMS, string(r.Status), r.Reason, re.Owner, re.Detail}
}

// updated is what follows an Update's statement, committed, that returned
// rec and err.
func (s *Store) updated(ctx context.Context, u *store.Update, rec model.Record, err error) (model.Record, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, s.updateMiss(ctx, u)
	}
	if err != nil {
		return rec, fail("update record", err)
	}
	if rec.State == model.ClaimableState(rec.BoxKind) {
		// Claimable again (a retry, a redrive, an expired lease): wake the
		// claimers waiting on other nodes. After the commit, so a woken
		// claimer finds it.
		s.notify(ctx, changedBoxes([]model.Record{rec}))
	}
	return rec, nil
}

// updateMiss explains why an Update's compare-and-set matched nothing.
func (s *Store) updateMiss(ctx context.Context, u *store.Update) error {
	var state, lease string
	err := s.pool.QueryRow(ctx, `SELECT state, COALESCE(lease_id, '') FROM records WHERE record_id IN ($1, $2)`,
		u.RecordID, legacyID(u.RecordID)).Scan(&state, &lease)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.NotFound("record")
	}
	if err != nil {
		return fail("update record", err)
	}
	if model.State(state) != u.From {
		return model.Conflict("state", fmt.Sprintf("record %s is %s, not %s", u.RecordID, state, u.From))
	}
	return model.Conflict("lease_id", fmt.Sprintf("record %s is no longer held under lease %q", u.RecordID, u.ExpectLeaseID))
}

// jsonText encodes v as JSON text, or SQL NULL when !present. Text, not
// []byte: pgx would send a []byte as bytea.
func jsonText(present bool, v any) (any, error) {
	if !present {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("postgres: encode %T: %w", v, err)
	}
	return string(b), nil
}
