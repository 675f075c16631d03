package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Schedule stores a delayed message and its entry, once per (op, msg_id).
func (s *Store) Schedule(ctx context.Context, e *store.ScheduleEntry, idem *store.Idempotency) (int64, bool, error) {
	var (
		id, due int64
		created bool
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		created, due = false, e.DueAtMS
		if idem != nil {
			repeat, err := s.repeatedSchedule(ctx, tx, idem, e, &id, &due)
			if err != nil || repeat {
				return err
			}
		}
		if len(e.MsgBody) > 0 {
			if _, _, err := s.putMessage(ctx, tx, e.MsgID, e.MsgBody, e.CreatedAtMS); err != nil {
				return err
			}
		}
		err := tx.QueryRowContext(ctx, `INSERT INTO scheduled (op, msg_id, ctx, due_at_ms, created_at_ms, sender)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (op, msg_id) DO NOTHING RETURNING sched_id`,
			e.Op, e.MsgID, e.Ctx, e.DueAtMS, e.CreatedAtMS, e.Sender).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			err = tx.QueryRowContext(ctx, "SELECT sched_id, due_at_ms FROM scheduled WHERE op = ? AND msg_id = ?",
				e.Op, e.MsgID).Scan(&id, &due)
			if err != nil {
				return fmt.Errorf("sqlite: schedule: %w", err)
			}
			return keepSchedule(ctx, tx, idem, id, due)
		}
		if err != nil {
			return fmt.Errorf("sqlite: schedule: %w", err)
		}
		created = true
		if err := keepSchedule(ctx, tx, idem, id, due); err != nil {
			return err
		}
		if err := insertRecipients(ctx, tx, id, e.Recipients); err != nil {
			return err
		}
		// The sender's event: it may list and cancel the entry (its events
		// are its own log).
		_, err = tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, model.EventMsgScheduled,
			e.Sender, "", "", e.MsgID, "", "", e.CreatedAtMS, fmt.Sprintf("id=%d due_at_ms=%d", id, e.DueAtMS))
		if err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	e.ID, e.DueAtMS = id, due
	return id, created, nil
}

// repeatedSchedule binds idem to e's message, or, when it is bound to it
// already, answers the repeat with the entry the key made (id and due),
// which is gone once it came due or was cancelled: nothing is scheduled
// again. A key with no entry of its own (bound by an immediate send, or
// before migration 0012) answers the message's pending entry, if any, and
// zeros when there is none.
func (s *Store) repeatedSchedule(ctx context.Context, tx *sql.Tx, idem *store.Idempotency, e *store.ScheduleEntry, id, due *int64) (bool, error) {
	k, err := s.bindIdem(ctx, tx, idem, e.MsgID, e.CreatedAtMS)
	if err != nil || k.fresh {
		return false, err
	}
	if k.sched != 0 {
		*id, *due = k.sched, k.due
		return true, nil
	}
	err = tx.QueryRowContext(ctx, "SELECT sched_id, due_at_ms FROM scheduled WHERE op = ? AND msg_id = ?",
		e.Op, e.MsgID).Scan(id, due)
	if errors.Is(err, sql.ErrNoRows) {
		*id, *due = 0, 0
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: schedule: %w", err)
	}
	return true, nil
}

// keepSchedule records on idem the entry a keyed send made or met, for
// its repeats (repeatedSchedule).
func keepSchedule(ctx context.Context, tx *sql.Tx, idem *store.Idempotency, id, due int64) error {
	if idem == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, "UPDATE idempotency SET sched_id = ?, due_at_ms = ? WHERE scope = ? AND key = ?",
		id, due, idem.Scope, idem.Key)
	if err != nil {
		return fmt.Errorf("sqlite: idempotency key: %w", err)
	}
	return nil
}

// insertRecipients writes an entry's recipients in order, several rows per
// statement to keep a large fan-out from costing one round trip each.
func insertRecipients(ctx context.Context, tx *sql.Tx, id int64, dids []string) error {
	const rowsPerStmt = 300 // 900 parameters, well under SQLite's limit
	for start := 0; start < len(dids); start += rowsPerStmt {
		chunk := dids[start:min(start+rowsPerStmt, len(dids))]
		var b strings.Builder
		b.WriteString("INSERT INTO scheduled_recipients (sched_id, pos, did) VALUES ")
		args := make([]any, 0, 3*len(chunk))
		for i, did := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?)")
			args = append(args, id, start+i, did)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("sqlite: schedule recipients: %w", err)
		}
	}
	return nil
}

const schedSelect = `SELECT s.sched_id, s.op, s.msg_id, s.ctx, s.due_at_ms, s.created_at_ms, s.sender, m.body
	FROM scheduled s LEFT JOIN messages m ON m.msg_id = s.msg_id`

// recipientFilter restricts an entry query to one recipient.
const recipientFilter = ` s.sched_id IN (SELECT sched_id FROM scheduled_recipients WHERE did = ?)`

// DueScheduled lists entries due by BeforeMS in send order.
func (s *Store) DueScheduled(ctx context.Context, p store.DueParams) ([]store.ScheduleEntry, error) {
	q := schedSelect + " WHERE s.due_at_ms <= ?"
	args := []any{p.BeforeMS}
	if p.Recipient != "" {
		q += " AND" + recipientFilter
		args = append(args, p.Recipient)
	}
	q += " ORDER BY s.due_at_ms, s.sched_id LIMIT ?"
	args = append(args, limitOr(p.Limit, defaultLimit))
	var out []store.ScheduleEntry
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = querySchedule(ctx, tx, q, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: due scheduled: %w", err)
	}
	return out, nil
}

// ListScheduled lists pending entries in due order, with their total.
func (s *Store) ListScheduled(ctx context.Context, q store.ScheduleQuery) ([]store.ScheduleEntry, int64, error) {
	var conds []string
	var args []any
	if q.Sender != "" {
		conds, args = append(conds, " s.sender = ?"), append(args, q.Sender)
	}
	if q.Recipient != "" {
		conds, args = append(conds, recipientFilter), append(args, q.Recipient)
	}
	if q.Op != "" {
		conds, args = append(conds, " s.op = ?"), append(args, q.Op)
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE" + strings.Join(conds, " AND")
	}
	limit := q.Limit
	var (
		out   []store.ScheduleEntry
		total int64
	)
	// One snapshot, so the total and the page agree.
	err := s.read(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM scheduled s"+where, args...).Scan(&total); err != nil {
			return err
		}
		var err error
		out, err = querySchedule(ctx, tx, schedSelect+where+" ORDER BY s.due_at_ms, s.sched_id LIMIT ?",
			append(args, limitOr(limit, defaultLimit))...)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list scheduled: %w", err)
	}
	return out, total, nil
}

// querySchedule runs a schedSelect query and attaches each entry's
// recipients with one more query for the whole page.
func querySchedule(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]store.ScheduleEntry, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := []store.ScheduleEntry{}
	byID := map[int64]int{}
	ids := []int64{}
	for rows.Next() {
		var e store.ScheduleEntry
		if err := rows.Scan(&e.ID, &e.Op, &e.MsgID, &e.Ctx, &e.DueAtMS, &e.CreatedAtMS, &e.Sender, &e.MsgBody); err != nil {
			rows.Close()
			return nil, err
		}
		e.Recipients = []string{}
		byID[e.ID] = len(out)
		ids = append(ids, e.ID)
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return out, nil
	}
	idJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rrows, err := tx.QueryContext(ctx, `SELECT sched_id, did FROM scheduled_recipients
		WHERE sched_id IN (SELECT value FROM json_each(?)) ORDER BY sched_id, pos`, string(idJSON))
	if err != nil {
		return nil, err
	}
	defer rrows.Close()
	for rrows.Next() {
		var id int64
		var did string
		if err := rrows.Scan(&id, &did); err != nil {
			return nil, err
		}
		if i, ok := byID[id]; ok {
			out[i].Recipients = append(out[i].Recipients, did)
		}
	}
	return out, rrows.Err()
}

// NextDue returns the earliest due time of any pending entry.
func (s *Store) NextDue(ctx context.Context) (int64, bool, error) {
	return s.minValue(ctx, "next due", "SELECT MIN(due_at_ms) FROM scheduled")
}

// GetScheduled returns one pending entry.
func (s *Store) GetScheduled(ctx context.Context, id int64) (store.ScheduleEntry, error) {
	var out []store.ScheduleEntry
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = querySchedule(ctx, tx, schedSelect+" WHERE s.sched_id = ?", id)
		return err
	})
	if err != nil {
		return store.ScheduleEntry{}, fmt.Errorf("sqlite: get scheduled: %w", err)
	}
	if len(out) == 0 {
		return store.ScheduleEntry{}, model.NotFound("scheduled entry")
	}
	return out[0], nil
}

// CancelScheduled removes a pending entry, its recipients and its body
// when nothing else refers to it, and appends the event, in one
// transaction.
func (s *Store) CancelScheduled(ctx context.Context, id, nowMS int64, dropped string) error {
	typ, detail := cancelEvent(id, dropped)
	forgot := false
	defer func() {
		if forgot {
			s.bodies.ForgetAll() // and again after the commit (package bodies)
		}
	}()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var msgID, sender string
		err := tx.QueryRowContext(ctx, "DELETE FROM scheduled WHERE sched_id = ? RETURNING msg_id, sender", id).Scan(&msgID, &sender)
		if errors.Is(err, sql.ErrNoRows) {
			return model.NotFound("scheduled entry")
		}
		if err != nil {
			return fmt.Errorf("sqlite: cancel scheduled: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM scheduled_recipients WHERE sched_id = ?", id); err != nil {
			return fmt.Errorf("sqlite: cancel scheduled: %w", err)
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
		_, err = tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, typ,
			sender, "", "", msgID, "", "", nowMS, detail)
		if err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		return nil
	})
}

// cancelEvent is the event of a cancelled entry, or of a dropped one.
func cancelEvent(id int64, dropped string) (typ, detail string) {
	if dropped != "" {
		return model.EventMsgDropped, fmt.Sprintf("id=%d: %s", id, dropped)
	}
	return model.EventMsgCancelled, fmt.Sprintf("id=%d", id)
}
