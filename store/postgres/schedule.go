package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// sqlSchedule creates the entry, its recipients (in the sender's order) and
// the message.scheduled event in one statement, all only if the entry is
// new.
var sqlSchedule = `WITH s AS (
		INSERT INTO scheduled (op, msg_id, ctx, due_at_ms, created_at_ms, sender)
		VALUES ($1, $2, $3, $4, $5, $7)
		ON CONFLICT (op, msg_id) DO NOTHING
		RETURNING sched_id
	), r AS (
		INSERT INTO scheduled_recipients (sched_id, pos, did)
		SELECT s.sched_id, u.ord - 1, u.did
		FROM s, unnest($6::text[]) WITH ORDINALITY AS u(did, ord)
	), e AS (
		INSERT INTO events (type, owner, msg_id, at_ms, detail)
		SELECT '` + model.EventMsgScheduled + `', $7, $2, $5, 'id=' || s.sched_id || ' due_at_ms=' || $4::bigint FROM s
	)
	SELECT sched_id FROM s`

// Schedule stores a delayed message and its entry, once per (op, msg_id).
func (s *Store) Schedule(ctx context.Context, e *store.ScheduleEntry, idem *store.Idempotency) (int64, bool, error) {
	var (
		id, due int64
		created bool
	)
	recipients := e.Recipients
	if recipients == nil {
		recipients = []string{} // an empty array, not NULL
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		created, due = false, e.DueAtMS
		if idem != nil {
			repeat, err := repeatedSchedule(ctx, tx, idem, e, &id, &due)
			if err != nil || repeat {
				return err
			}
		}
		b := &pgx.Batch{}
		if len(e.MsgBody) > 0 {
			b.Queue(sqlInsertMsg, e.MsgID, e.MsgBody, e.CreatedAtMS)
		}
		b.Queue(sqlSchedule, e.Op, e.MsgID, e.Ctx, e.DueAtMS, e.CreatedAtMS, recipients, e.Sender)
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if len(e.MsgBody) > 0 {
			if _, err := br.Exec(); err != nil {
				return fail("store message", err)
			}
		}
		err := br.QueryRow().Scan(&id)
		switch {
		case err == nil:
			created = true
		case !errors.Is(err, pgx.ErrNoRows):
			return fail("schedule", err)
		}
		if err := br.Close(); err != nil {
			return fail("schedule", err)
		}
		if !created {
			// A separate statement, so it sees an entry that a concurrent
			// transaction committed while our insert waited for it.
			err = tx.QueryRow(ctx, "SELECT sched_id, due_at_ms FROM scheduled WHERE op = $1 AND msg_id = $2",
				e.Op, e.MsgID).Scan(&id, &due)
			if err != nil {
				return fail("schedule", err)
			}
		}
		if idem != nil {
			_, err := tx.Exec(ctx, "UPDATE idempotency SET sched_id = $3, due_at_ms = $4 WHERE scope = $1 AND key = $2",
				idem.Scope, idem.Key, id, due)
			if err != nil {
				return fail("idempotency key", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	e.ID, e.DueAtMS = id, due
	if created {
		s.notify(ctx, []string{scheduledPayload}) // another node may be due to run it sooner
	}
	return id, created, nil
}

// repeatedSchedule binds idem to e's message, or, when it is bound to it
// already, answers the repeat with the entry the key made (id and due),
// which is gone once it came due or was cancelled: nothing is scheduled
// again. A key with no entry of its own (bound by an immediate send,
// before migration 0011, or deleted by retention since the insert met
// it) answers the message's pending entry, if any, and zeros when there
// is none.
func repeatedSchedule(ctx context.Context, tx pgx.Tx, idem *store.Idempotency, e *store.ScheduleEntry, id, due *int64) (bool, error) {
	tag, err := tx.Exec(ctx, sqlInsertIdem, idem.Scope, idem.Key, e.MsgID, e.CreatedAtMS, nil)
	if err != nil {
		return false, fail("idempotency key", err)
	}
	if tag.RowsAffected() == 1 {
		return false, nil
	}
	k, err := boundIdem(ctx, tx, idem, e.MsgID)
	if err != nil || k.sched != 0 {
		*id, *due = k.sched, k.due
		return err == nil, err
	}
	err = tx.QueryRow(ctx, "SELECT sched_id, due_at_ms FROM scheduled WHERE op = $1 AND msg_id = $2",
		e.Op, e.MsgID).Scan(id, due)
	if errors.Is(err, pgx.ErrNoRows) {
		*id, *due = 0, 0
		return true, nil
	}
	if err != nil {
		return false, fail("schedule", err)
	}
	return true, nil
}

// schedPage wraps a query of one page of scheduled rows (aliased sc inside)
// with each entry's body and its recipients, in order: one round trip and
// one snapshot per page, and the joins run only for the page's rows.
func schedPage(inner string, withTotal bool) string {
	total := ""
	if withTotal {
		total = ", s.total"
	}
	return `SELECT s.sched_id, s.op, s.msg_id, s.ctx, s.due_at_ms, s.created_at_ms, s.sender, m.body,
			ARRAY(SELECT did FROM scheduled_recipients sr WHERE sr.sched_id = s.sched_id ORDER BY pos)` + total + `
		FROM (` + inner + `) s LEFT JOIN messages m ON m.msg_id = s.msg_id
		ORDER BY s.due_at_ms, s.sched_id`
}

// recipientFilter restricts an entry query to one recipient.
const recipientFilter = ` sc.sched_id IN (SELECT sched_id FROM scheduled_recipients WHERE did = `

// DueScheduled lists entries due by BeforeMS in send order: (due_at_ms, id).
func (s *Store) DueScheduled(ctx context.Context, p store.DueParams) ([]store.ScheduleEntry, error) {
	var q query
	q.b.WriteString("SELECT sc.* FROM scheduled sc WHERE sc.due_at_ms <= " + q.arg(p.BeforeMS))
	if p.Recipient != "" {
		q.b.WriteString(" AND" + recipientFilter + q.arg(p.Recipient) + ")")
	}
	q.b.WriteString(" ORDER BY sc.due_at_ms, sc.sched_id LIMIT " + q.arg(limitOr(p.Limit, defaultLimit)))
	out, _, err := querySchedule(ctx, s.pool, schedPage(q.b.String(), false), false, q.args...)
	if err != nil {
		return nil, fail("due scheduled", err)
	}
	return out, nil
}

// ListScheduled lists pending entries in due order, with their total. The
// total is a window count in the same query (computed before the LIMIT), so
// it and the page come from one snapshot.
func (s *Store) ListScheduled(ctx context.Context, sq store.ScheduleQuery) ([]store.ScheduleEntry, int64, error) {
	var q query
	q.b.WriteString("SELECT sc.*, count(*) OVER () AS total FROM scheduled sc WHERE true")
	if sq.Sender != "" {
		q.b.WriteString(" AND sc.sender = " + q.arg(sq.Sender))
	}
	if sq.Recipient != "" {
		q.b.WriteString(" AND" + recipientFilter + q.arg(sq.Recipient) + ")")
	}
	if sq.Op != "" {
		q.b.WriteString(" AND sc.op = " + q.arg(sq.Op))
	}
	q.b.WriteString(" ORDER BY sc.due_at_ms, sc.sched_id LIMIT " + q.arg(limitOr(sq.Limit, defaultLimit)))
	var out []store.ScheduleEntry
	var total int64
	// Unfiltered, the total counts every entry: a whole-table read.
	err := s.reading(ctx, sq.Sender == "" && sq.Recipient == "" && sq.Op == "", func(db querier) (err error) {
		out, total, err = querySchedule(ctx, db, schedPage(q.b.String(), true), true, q.args...)
		return err
	})
	if err != nil {
		return nil, 0, fail("list scheduled", err)
	}
	return out, total, nil
}

// querySchedule runs a schedPage query; withTotal says it also returns the
// window count as its last column.
func querySchedule(ctx context.Context, db querier, q string, withTotal bool, args ...any) ([]store.ScheduleEntry, int64, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []store.ScheduleEntry{}
	var total int64
	for rows.Next() {
		var e store.ScheduleEntry
		dest := []any{&e.ID, &e.Op, &e.MsgID, &e.Ctx, &e.DueAtMS, &e.CreatedAtMS, &e.Sender, &e.MsgBody, &e.Recipients}
		if withTotal {
			dest = append(dest, &total)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, err
		}
		if e.Recipients == nil {
			e.Recipients = []string{}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read entries: %w", err)
	}
	return out, total, nil
}

// NextDue returns the earliest due time of any pending entry.
func (s *Store) NextDue(ctx context.Context) (int64, bool, error) {
	return s.minValue(ctx, "next due", "SELECT MIN(due_at_ms) FROM scheduled")
}

// GetScheduled returns one pending entry.
func (s *Store) GetScheduled(ctx context.Context, id int64) (store.ScheduleEntry, error) {
	out, _, err := querySchedule(ctx, s.pool, schedPage("SELECT sc.* FROM scheduled sc WHERE sc.sched_id = $1", false), false, id)
	if err != nil {
		return store.ScheduleEntry{}, fail("get scheduled", err)
	}
	if len(out) == 0 {
		return store.ScheduleEntry{}, model.NotFound("scheduled entry")
	}
	return out[0], nil
}

// sqlCancelSched removes an entry and its recipients and appends the event,
// all only if the entry is still there, and returns its message's id.
var sqlCancelSched = `WITH d AS (DELETE FROM scheduled WHERE sched_id = $1 RETURNING sched_id, msg_id, sender),
		r AS (DELETE FROM scheduled_recipients WHERE sched_id IN (SELECT sched_id FROM d)),
		e AS (INSERT INTO events (type, owner, msg_id, at_ms, detail)
			SELECT $3::text, d.sender, d.msg_id, $2, $4::text FROM d)
	SELECT msg_id FROM d`

// CancelScheduled removes a pending entry, its recipients and its body
// when nothing else refers to it, and appends the event, in one
// transaction.
func (s *Store) CancelScheduled(ctx context.Context, id, nowMS int64, dropped string) error {
	typ, detail := model.EventMsgCancelled, fmt.Sprintf("id=%d", id)
	if dropped != "" {
		typ, detail = model.EventMsgDropped, fmt.Sprintf("id=%d: %s", id, dropped)
	}
	forgot := false
	defer func() {
		if forgot {
			s.bodies.ForgetAll() // and inside the transaction (package bodies)
		}
	}()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var msgID string
		err := tx.QueryRow(ctx, sqlCancelSched, id, nowMS, typ, detail).Scan(&msgID)
		if errors.Is(err, pgx.ErrNoRows) {
			return model.NotFound("scheduled entry")
		}
		if err != nil {
			return fail("cancel scheduled", err)
		}
		// Retention removes only the bodies of the records it deletes, and
		// a cancelled message never had one.
		n, err := deleteOrphanBodies(ctx, tx, []string{msgID}, math.MaxInt64)
		if err != nil {
			return err
		}
		if n > 0 {
			forgot = true
			s.bodies.ForgetAll()
		}
		return nil
	})
}
