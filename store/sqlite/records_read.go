package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

type scanner interface{ Scan(dest ...any) error }

// scanRecord reads one row of recordCols.
func scanRecord(sc scanner) (model.Record, error) {
	var (
		r                    model.Record
		box, state           string
		tags, route          []byte
		leaseID, leaseHolder sql.NullString
		leaseUntil           sql.NullInt64
		d                    = &r.Delivery
	)
	err := sc.Scan(&r.RecordID, &r.Owner, &box, &r.MsgID, &state, &r.Seq, &r.CreatedAtMS,
		&r.UpdatedAtMS, &r.SortKey, &r.ThreadKey, &tags, &route, &d.Attempts, &d.NextRetryAtMS,
		&d.ExternalMsgID, &d.DeliveredAtMS, &d.ErrorCode, &d.ErrorMessage, &d.RetryAfterMS,
		&d.LastError, &leaseID, &leaseHolder, &leaseUntil)
	if err != nil {
		return r, err
	}
	r.BoxKind, r.State = model.BoxKind(box), model.State(state)
	if len(tags) > 0 {
		if err := json.Unmarshal(tags, &r.Tags); err != nil {
			return r, fmt.Errorf("sqlite: record %s: bad tags: %w", r.RecordID, err)
		}
	}
	if len(route) > 0 {
		r.Route = new(model.Route)
		if err := json.Unmarshal(route, r.Route); err != nil {
			return r, fmt.Errorf("sqlite: record %s: bad route: %w", r.RecordID, err)
		}
	}
	if leaseUntil.Valid {
		r.Lease = &model.Lease{ID: leaseID.String, Holder: leaseHolder.String, ExpiresAtMS: leaseUntil.Int64}
	} else if leaseID.Valid {
		r.Ended = &model.EndedLease{ID: leaseID.String, By: model.EndedBy(leaseHolder.String)}
	}
	return r, nil
}

// readRecords runs a records query on the read pool, through the statement
// cache: parsing a Sync afresh for each call was more than half the CPU of a
// stream's push (every stream on a box reads it after each change).
func (s *Store) readRecords(ctx context.Context, query string, args ...any) ([]model.Record, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// scanRecords scans every row of rows and closes it.
func scanRecords(rows *sql.Rows) ([]model.Record, error) {
	defer rows.Close()
	out := []model.Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// GetRecord returns one record or model.ErrNotFound.
// A record that logged writes changed since the last commit is answered
// from the overlay; any other is as that commit left it, so the read does
// not wait for one (overlay.go).
func (s *Store) GetRecord(ctx context.Context, recordID string) (model.Record, error) {
	if err := s.failure(); err != nil {
		return model.Record{}, err
	}
	lo, hi, legacy := idArgs(recordID)
	if r, ok := s.overlay.get(recordID); ok {
		return r, nil
	}
	// A record stored before ids carried their locator is kept under its
	// old id, which is what the overlay knows it by.
	if r, ok := s.overlay.get(legacy); ok && legacy != "" {
		return r, nil
	}
	r, err := scanRecord(s.st.getRecord.QueryRowContext(ctx, recordID, lo, hi, legacy))
	if errors.Is(err, sql.ErrNoRows) {
		return r, model.NotFound("record")
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: get record %s: %w", recordID, err)
	}
	return r, nil
}

// stateFilter appends "AND state IN (...)" for a non-empty list. Repeated
// states are bound once, so the number of query texts (each kept prepared,
// readStmt) stays bounded by the number of states whatever a caller lists.
func stateFilter(b *strings.Builder, args []any, states []model.State) []any {
	if len(states) == 0 {
		return args
	}
	// Checked against the distinct states so far (a handful), not the
	// whole list: a caller may list thousands.
	var distinct []model.State
	for _, st := range states {
		if !slices.Contains(distinct, st) {
			distinct = append(distinct, st)
			args = append(args, string(st))
		}
	}
	b.WriteString(" AND state IN (" + placeholders(len(distinct)) + ")")
	return args
}

// ListRecords pages a box by (sort_key, record_id), the index order, so a
// page costs its size whatever the cursor's depth.
func (s *Store) ListRecords(ctx context.Context, p store.ListParams) ([]model.Record, error) {
	var b strings.Builder
	b.WriteString("SELECT " + recordCols + " FROM records WHERE owner = ? AND box = ?")
	args := []any{p.Owner, string(p.Box)}
	args = stateFilter(&b, args, p.States)
	if p.Tag != "" {
		b.WriteString(" AND EXISTS (SELECT 1 FROM json_each(records.tags) WHERE json_each.value = ?)")
		args = append(args, p.Tag)
	}
	dir, cmp := "ASC", ">"
	if p.Desc {
		dir, cmp = "DESC", "<"
	}
	if p.CursorRecordID != "" {
		b.WriteString(" AND (sort_key, record_id) " + cmp + " (?, ?)")
		args = append(args, p.CursorSortKey, p.CursorRecordID)
	}
	b.WriteString(" ORDER BY sort_key " + dir + ", record_id " + dir + " LIMIT ?")
	args = append(args, limitOr(p.Limit, defaultLimit))
	out, err := s.readRecords(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list records: %w", err)
	}
	return out, nil
}

// Sync reads a box as a log, in seq order after AfterSeq.
func (s *Store) Sync(ctx context.Context, p store.SyncParams) ([]model.Record, error) {
	var b strings.Builder
	b.WriteString("SELECT " + recordCols + " FROM records WHERE owner = ? AND box = ? AND seq > ?")
	args := []any{p.Owner, string(p.Box), p.AfterSeq}
	if p.ThreadKey != "" {
		b.WriteString(" AND thread_key = ?")
		args = append(args, p.ThreadKey)
	}
	args = stateFilter(&b, args, p.States)
	b.WriteString(" ORDER BY seq LIMIT ?")
	args = append(args, limitOr(p.Limit, defaultLimit))
	out, err := s.readRecords(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: sync: %w", err)
	}
	return out, nil
}

// ExpiredLeases lists held records whose lease ran out at or before nowMS,
// oldest expiry first.
func (s *Store) ExpiredLeases(ctx context.Context, nowMS int64, limit int) ([]model.Record, error) {
	out, err := s.readRecords(ctx, "SELECT "+recordCols+` FROM records
		WHERE lease_until_ms IS NOT NULL AND lease_until_ms <= ?
		ORDER BY lease_until_ms LIMIT ?`, nowMS, limitOr(limit, defaultLimit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: expired leases: %w", err)
	}
	return out, nil
}

// minValue runs a SELECT MIN(...) query; ok is false when it is NULL.
func (s *Store) minValue(ctx context.Context, what, q string, args ...any) (int64, bool, error) {
	var v sql.NullInt64
	if err := s.queryRow(ctx, q, args...).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return v.Int64, v.Valid, nil
}

// NextLeaseExpiry returns the earliest lease expiry of any held record.
func (s *Store) NextLeaseExpiry(ctx context.Context) (int64, bool, error) {
	return s.minValue(ctx, "next lease expiry",
		"SELECT MIN(lease_until_ms) FROM records WHERE lease_until_ms IS NOT NULL")
}

// NextVisible returns the earliest visible_at_ms > afterMS in one state of
// one box. Like Claimable it does not settle: the overlay has what logged
// writes changed, the pool the rest. A record the pool still shows in
// backoff that a logged write has since moved on can only make the answer
// early, which costs the waiting claimer one more look.
func (s *Store) NextVisible(ctx context.Context, owner string, box model.BoxKind, state model.State, afterMS int64) (int64, bool, error) {
	if err := s.failure(); err != nil {
		return 0, false, err
	}
	at, ok := s.overlay.nextVisible(stateKey{owner, box, state}, afterMS)
	var v sql.NullInt64
	err := s.st.nextVisible.QueryRowContext(ctx, owner, string(box), string(state), afterMS).Scan(&v)
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: next visible: %w", err)
	}
	if v.Valid && (!ok || v.Int64 < at) {
		at, ok = v.Int64, true
	}
	return at, ok, nil
}

// Claimable reports whether a claim would find a record; the same index
// walk as the claim's own subquery. It does not settle: every waiting
// claimer asks it on every change to its box, and a commit each time is
// what group commit is there to avoid. A record is claimable if logged
// writes left it so (overlay), or if the last commit did and they have
// not changed it since. So it reads the committed candidates in claim
// order, one more than the records of the box the overlay holds: if they
// are all changed since, there were no more. A "no" may miss only a
// record logged during the call, whose send wakes the claimer again.
func (s *Store) Claimable(ctx context.Context, owner string, box model.BoxKind, state model.State, nowMS int64) (bool, error) {
	if err := s.failure(); err != nil {
		return false, err
	}
	k := stateKey{owner, box, state}
	if s.overlay.claimable(k, nowMS) {
		return true, nil
	}
	for range 3 {
		limit := s.overlay.count(owner, box) + 1
		resets := s.overlay.resets.Load()
		found, n, err := s.committedClaimable(ctx, k, nowMS, limit)
		if found && s.overlay.resets.Load() != resets {
			// A commit came between the read and the overlay's answer:
			// the record may be one a logged claim took since (the read
			// saw it before the commit, the overlay no longer has it).
			continue
		}
		if found || err != nil || n < limit {
			return found, err
		}
		// Logged claims took them as fast as they were read.
	}
	if err := s.settle(ctx); err != nil {
		return false, err
	}
	found, _, err := s.committedClaimable(ctx, k, nowMS, -1)
	return found, err
}

// committedClaimable reads up to limit (< 0: all) committed candidates of
// k visible at nowMS, in claim order, and reports whether one of them is
// unchanged since the commit or still claimable in the overlay, and how
// many it read.
func (s *Store) committedClaimable(ctx context.Context, k stateKey, nowMS int64, limit int) (bool, int, error) {
	rows, err := s.st.claimable.QueryContext(ctx, k.owner, string(k.box), string(k.state), nowMS, limit)
	if err != nil {
		return false, 0, fmt.Errorf("sqlite: claimable: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return false, n, fmt.Errorf("sqlite: claimable: %w", err)
		}
		n++
		// The overlay is read after the query: a commit in between empties
		// it, which would make a yes of a record just taken; Claimable
		// asks again then.
		if changed, still := s.overlay.holds(id, k, nowMS); !changed || still {
			return true, n, nil
		}
	}
	if err := rows.Err(); err != nil {
		return false, n, fmt.Errorf("sqlite: claimable: %w", err)
	}
	return false, n, nil
}

// CountRecords counts records by box kind and state.
func (s *Store) CountRecords(ctx context.Context) ([]store.BoxStateCount, error) {
	rows, err := s.query(ctx,
		"SELECT box, state, COUNT(*) FROM records GROUP BY box, state ORDER BY box, state")
	if err != nil {
		return nil, fmt.Errorf("sqlite: count records: %w", err)
	}
	defer rows.Close()
	out := []store.BoxStateCount{}
	for rows.Next() {
		var c store.BoxStateCount
		var box, state string
		if err := rows.Scan(&box, &state, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlite: count records: %w", err)
		}
		c.Box, c.State = model.BoxKind(box), model.State(state)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count records: %w", err)
	}
	return out, nil
}

// GetMessage returns a message's canonical JSON body. The caller must not
// modify it: it may be shared with the body cache.
func (s *Store) GetMessage(ctx context.Context, msgID string) ([]byte, error) {
	body, gen, ok := s.bodies.Get(msgID)
	if ok {
		return body, nil
	}
	// Not settle: a body a logged write stored is in the overlay until
	// its commit, so the pool has every other acknowledged one.
	if err := s.failure(); err != nil {
		return nil, err
	}
	if body, ok := s.overlay.body(msgID); ok {
		return body, nil
	}
	err := s.st.getMessage.QueryRowContext(ctx, msgID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.NotFound("message")
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get message %s: %w", msgID, err)
	}
	s.bodies.PutIfCurrent(gen, msgID, body)
	return body, nil
}

// GetMessages returns the bodies of the messages among ids that exist,
// reading from the database only those the body cache does not hold. The
// caller must not modify them.
func (s *Store) GetMessages(ctx context.Context, ids []string) (map[string][]byte, error) {
	out, missing, gen := s.bodies.GetMany(ids)
	if len(missing) == 0 {
		return out, nil
	}
	// Not settle, as GetMessage.
	if err := s.failure(); err != nil {
		return nil, err
	}
	stored := missing[:0]
	for _, id := range missing {
		if b, ok := s.overlay.body(id); ok {
			out[id] = b
		} else {
			stored = append(stored, id)
		}
	}
	missing = stored
	if len(missing) == 0 {
		return out, nil
	}
	list, err := json.Marshal(missing)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get messages: %w", err)
	}
	rows, err := s.queryCommitted(ctx,
		"SELECT msg_id, body FROM messages WHERE msg_id IN (SELECT value FROM json_each(?)) AND length(body) > 0", string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, fmt.Errorf("sqlite: get messages: %w", err)
		}
		out[id] = body
		s.bodies.PutIfCurrent(gen, id, body)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get messages: %w", err)
	}
	return out, nil
}

// CanReadMessage reports whether did owns a record of the message, or
// belongs to a group whose GROUP_INBOX holds it. A recipient's INBOX
// record and an author's OUTBOX record, the usual answers, are looked up
// by the ids the core gives them; only otherwise are the message's records
// walked (records_msg), which for a message delivered to each member of a
// large group is a row per member.
func (s *Store) CanReadMessage(ctx context.Context, did, msgID string) (bool, error) {
	in, out := model.RecordID(did, model.Inbox, msgID, ""), model.RecordID(did, model.Outbox, msgID, "")
	inLo, inHi, inOld := idArgs(in)
	outLo, outHi, outOld := idArgs(out)
	var ok bool
	err := s.queryRow(ctx,
		// CASE, not OR: it stops at the first answer that is yes.
		`SELECT CASE
			WHEN EXISTS (SELECT 1 FROM records WHERE rid = `+ridParams(3, 4)+` AND owner = ?2) THEN 1
			WHEN EXISTS (SELECT 1 FROM records WHERE rid = `+ridParams(7, 8)+` AND owner = ?2) THEN 1
			WHEN EXISTS (SELECT 1 FROM messages m JOIN records r ON r.msg_ref = m.msg_ref
				JOIN group_subscribers g ON g.group_did = r.owner AND g.subscriber = ?2
				WHERE m.msg_id = ?1 AND r.box = 'GROUP_INBOX') THEN 1
			ELSE EXISTS (SELECT 1 FROM messages m JOIN records r ON r.msg_ref = m.msg_ref
				WHERE m.msg_id = ?1 AND r.owner = ?2) END`,
		msgID, did, in, inLo, inHi, inOld, out, outLo, outHi, outOld).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("sqlite: can read message: %w", err)
	}
	return ok, nil
}

// CameThrough reports whether the message came in through tunnel: an INBOX
// record of it has the tunnel in its route (the dispatch's ingress). It
// stops at the first such record; the records of a dispatched message
// share its ingress, so that is the first INBOX record it reads.
func (s *Store) CameThrough(ctx context.Context, tunnel, msgID string) (bool, error) {
	var ok bool
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages m JOIN records r ON r.msg_ref = m.msg_ref
		WHERE m.msg_id = ? AND r.box = 'INBOX' AND r.route IS NOT NULL
			AND json_extract(r.route, '$.tunnel_did') = ?)`, msgID, tunnel).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("sqlite: came through: %w", err)
	}
	return ok, nil
}
