package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// recordCols is the column list scanRecord expects, in order.
const recordCols = `record_id, owner, box, msg_id, state, seq, created_at_ms, updated_at_ms,
	sort_key, thread_key, tags, route, attempts, next_retry_at_ms, external_msg_id,
	delivered_at_ms, error_code, error_message, retry_after_ms, last_error,
	lease_id, lease_holder, lease_until_ms`

// scanRecord reads one row of recordCols. It returns pgx.ErrNoRows as is;
// callers turn it into model.NotFound.
func scanRecord(row pgx.Row) (model.Record, error) {
	var (
		r                    model.Record
		box, state           string
		tags, route          *string
		leaseID, leaseHolder *string
		leaseUntil           *int64
		d                    = &r.Delivery
	)
	err := row.Scan(&r.RecordID, &r.Owner, &box, &r.MsgID, &state, &r.Seq, &r.CreatedAtMS,
		&r.UpdatedAtMS, &r.SortKey, &r.ThreadKey, &tags, &route, &d.Attempts, &d.NextRetryAtMS,
		&d.ExternalMsgID, &d.DeliveredAtMS, &d.ErrorCode, &d.ErrorMessage, &d.RetryAfterMS,
		&d.LastError, &leaseID, &leaseHolder, &leaseUntil)
	if err != nil {
		return model.Record{}, err
	}
	r.BoxKind, r.State = model.BoxKind(box), model.State(state)
	if tags != nil && *tags != "" {
		if err := json.Unmarshal([]byte(*tags), &r.Tags); err != nil {
			return r, fmt.Errorf("postgres: record %s: bad tags: %w", r.RecordID, err)
		}
	}
	if route != nil && *route != "" {
		r.Route = new(model.Route)
		if err := json.Unmarshal([]byte(*route), r.Route); err != nil {
			return r, fmt.Errorf("postgres: record %s: bad route: %w", r.RecordID, err)
		}
	}
	if leaseUntil != nil {
		r.Lease = &model.Lease{ExpiresAtMS: *leaseUntil}
		if leaseID != nil {
			r.Lease.ID = *leaseID
		}
		if leaseHolder != nil {
			r.Lease.Holder = *leaseHolder
		}
	} else if leaseID != nil {
		r.Ended = &model.EndedLease{ID: *leaseID}
		if leaseHolder != nil {
			r.Ended.By = model.EndedBy(*leaseHolder)
		}
	}
	return r, nil
}

// queryRecords runs a query of recordCols and scans every row.
func (s *Store) queryRecords(ctx context.Context, what, query string, args ...any) ([]model.Record, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fail(what, err)
	}
	defer rows.Close()
	out := []model.Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fail(what, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(what, err)
	}
	return out, nil
}

// sqlGetRecord reads a record by its id ($1) or the id it had before ids
// carried their message's locator ($2; bulk.go, legacyID).
const sqlGetRecord = "SELECT " + recordCols + " FROM records WHERE record_id IN ($1, $2)"

// GetRecord returns one record or model.ErrNotFound.
func (s *Store) GetRecord(ctx context.Context, recordID string) (model.Record, error) {
	r, err := scanRecord(s.pool.QueryRow(ctx, sqlGetRecord, recordID, legacyID(recordID)))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, model.NotFound("record")
	}
	if err != nil {
		return r, fail("get record "+recordID, err)
	}
	return r, nil
}

// query builds a statement with numbered placeholders.
type query struct {
	b    strings.Builder
	args []any
}

// arg adds a parameter and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// states appends "AND state = ANY(...)" for a non-empty list: one
// parameter whatever the list's length, so the statement text (and pgx's
// prepared statement cache entry) does not vary with it.
func (q *query) states(states []model.State) {
	if len(states) == 0 {
		return
	}
	ss := make([]string, len(states))
	for i, st := range states {
		ss[i] = string(st)
	}
	q.b.WriteString(" AND state = ANY(" + q.arg(ss) + "::text[])")
}

// ListRecords pages a box by (sort_key, record_id), the index order, so a
// page costs its size whatever the cursor's depth.
func (s *Store) ListRecords(ctx context.Context, p store.ListParams) ([]model.Record, error) {
	var q query
	q.b.WriteString("SELECT " + recordCols + " FROM records WHERE owner = " + q.arg(p.Owner) +
		" AND box = " + q.arg(string(p.Box)))
	q.states(p.States)
	if p.Tag != "" {
		// Containment of a one-element array: exact string match of an
		// element, as SQLite's json_each filter does.
		q.b.WriteString(" AND tags IS NOT NULL AND tags::jsonb @> jsonb_build_array(" + q.arg(p.Tag) + "::text)")
	}
	dir, cmp := "ASC", ">"
	if p.Desc {
		dir, cmp = "DESC", "<"
	}
	if p.CursorRecordID != "" {
		// A row comparison, which PostgreSQL matches to the index directly.
		q.b.WriteString(" AND (sort_key, record_id) " + cmp + " (" + q.arg(p.CursorSortKey) + "::bigint, " +
			q.arg(p.CursorRecordID) + "::text)")
	}
	q.b.WriteString(" ORDER BY sort_key " + dir + ", record_id " + dir + " LIMIT " + q.arg(limitOr(p.Limit, defaultLimit)))
	return s.queryRecords(ctx, "list records", q.b.String(), q.args...)
}

// Sync reads a box as a log, in seq order after AfterSeq.
func (s *Store) Sync(ctx context.Context, p store.SyncParams) ([]model.Record, error) {
	var q query
	q.b.WriteString("SELECT " + recordCols + " FROM records WHERE owner = " + q.arg(p.Owner) +
		" AND box = " + q.arg(string(p.Box)) + " AND seq > " + q.arg(p.AfterSeq))
	if p.ThreadKey != "" {
		q.b.WriteString(" AND thread_key = " + q.arg(p.ThreadKey))
	}
	q.states(p.States)
	q.b.WriteString(" ORDER BY seq LIMIT " + q.arg(limitOr(p.Limit, defaultLimit)))
	return s.queryRecords(ctx, "sync", q.b.String(), q.args...)
}

// ExpiredLeases lists held records whose lease ran out at or before nowMS,
// oldest expiry first.
func (s *Store) ExpiredLeases(ctx context.Context, nowMS int64, limit int) ([]model.Record, error) {
	return s.queryRecords(ctx, "expired leases", "SELECT "+recordCols+` FROM records
		WHERE lease_until_ms IS NOT NULL AND lease_until_ms <= $1
		ORDER BY lease_until_ms LIMIT $2`, nowMS, limitOr(limit, defaultLimit))
}

// minValue runs a SELECT MIN(...) query; ok is false when it is NULL.
func (s *Store) minValue(ctx context.Context, what, q string, args ...any) (int64, bool, error) {
	var v *int64
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&v); err != nil {
		return 0, false, fail(what, err)
	}
	if v == nil {
		return 0, false, nil
	}
	return *v, true, nil
}

// NextLeaseExpiry returns the earliest lease expiry of any held record.
func (s *Store) NextLeaseExpiry(ctx context.Context) (int64, bool, error) {
	return s.minValue(ctx, "next lease expiry",
		"SELECT MIN(lease_until_ms) FROM records WHERE lease_until_ms IS NOT NULL")
}

// NextVisible returns the earliest visible_at_ms > afterMS in one state of
// one box.
func (s *Store) NextVisible(ctx context.Context, owner string, box model.BoxKind, state model.State, afterMS int64) (int64, bool, error) {
	return s.minValue(ctx, "next visible", `SELECT MIN(visible_at_ms) FROM records
		WHERE owner = $1 AND box = $2 AND state = $3 AND visible_at_ms > $4`,
		owner, string(box), string(state), afterMS)
}

// Claimable reports whether a claim would find a record; the same index
// walk as the claim's own subquery, without its row lock.
func (s *Store) Claimable(ctx context.Context, owner string, box model.BoxKind, state model.State, nowMS int64) (bool, error) {
	return s.exists(ctx, "claimable", `SELECT EXISTS (SELECT 1 FROM records
		WHERE owner = $1 AND box = $2 AND state = $3 AND visible_at_ms <= $4)`, owner, string(box), string(state), nowMS)
}

// CountRecords counts records by box kind and state.
// It reads the whole table, so it may scan it (reading).
func (s *Store) CountRecords(ctx context.Context) ([]store.BoxStateCount, error) {
	out := []store.BoxStateCount{}
	err := s.reading(ctx, true, func(db querier) error {
		rows, err := db.Query(ctx, "SELECT box, state, COUNT(*) FROM records GROUP BY box, state ORDER BY box, state")
		if err != nil {
			return err
		}
		var c store.BoxStateCount
		var box, state string
		_, err = pgx.ForEachRow(rows, []any{&box, &state, &c.Count}, func() error {
			c.Box, c.State = model.BoxKind(box), model.State(state)
			out = append(out, c)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fail("count records", err)
	}
	return out, nil
}

// GetMessage returns a message's canonical JSON body, byte for byte.
func (s *Store) GetMessage(ctx context.Context, msgID string) ([]byte, error) {
	body, gen, ok := s.bodies.Get(msgID)
	if ok {
		return body, nil
	}
	err := s.pool.QueryRow(ctx, "SELECT body FROM messages WHERE msg_id = $1", msgID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.NotFound("message")
	}
	if err != nil {
		return nil, fail("get message "+msgID, err)
	}
	s.bodies.PutIfCurrent(gen, msgID, body)
	return body, nil
}

// GetMessages returns the bodies of the messages among ids that exist, in
// one query whatever the number of ids (they travel as one array).
func (s *Store) GetMessages(ctx context.Context, ids []string) (map[string][]byte, error) {
	out, missed, gen := s.bodies.GetMany(ids)
	if len(missed) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT msg_id, body FROM messages WHERE msg_id = ANY($1::text[])", missed)
	if err != nil {
		return nil, fail("get messages", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, fail("get messages", err)
		}
		out[id] = body
		s.bodies.PutIfCurrent(gen, id, body)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("get messages", err)
	}
	return out, nil
}

// CanReadMessage reports whether did owns a record of the message, or
// subscribes to a group whose GROUP_INBOX holds it.
func (s *Store) CanReadMessage(ctx context.Context, did, msgID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM records WHERE msg_id = $1 AND owner = $2)
			OR EXISTS (SELECT 1 FROM records r JOIN group_subscribers g
				ON g.group_did = r.owner AND g.subscriber = $2
				WHERE r.msg_id = $1 AND r.box = 'GROUP_INBOX')
`, msgID, did).Scan(&ok)
	if err != nil {
		return false, fail("can read message", err)
	}
	return ok, nil
}

// CameThrough reports whether the message came in through tunnel: an INBOX
// record of it has the tunnel in its route (the dispatch's ingress).
func (s *Store) CameThrough(ctx context.Context, tunnel, msgID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM records r WHERE r.msg_id = $1 AND r.box = 'INBOX'
		AND r.route IS NOT NULL AND r.route::jsonb ->> 'tunnel_did' = $2)`, msgID, tunnel).Scan(&ok)
	if err != nil {
		return false, fail("came through", err)
	}
	return ok, nil
}
