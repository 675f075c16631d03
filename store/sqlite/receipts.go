package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

const receiptCols = "msg_id, iss, reader, group_id, at_ms, status, reason"

func scanReceipt(sc scanner) (model.Receipt, error) {
	var r model.Receipt
	var status string
	err := sc.Scan(&r.MsgID, &r.Iss, &r.Reader, &r.GroupID, &r.AtMS, &status, &r.Reason)
	r.Status = model.ReceiptStatus(status)
	return r, err
}

// PutReceipt stores r unless a later receipt for (msg, reader) exists, and
// returns whichever is stored. Ties go to the newcomer, so re-sending the
// same receipt is harmless and a correction at the same millisecond lands.
func (s *Store) PutReceipt(ctx context.Context, r model.Receipt, nowMS int64) (model.Receipt, error) {
	var out model.Receipt
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		get := tx.StmtContext(ctx, s.st.getReceiptW)
		old, err := scanReceipt(get.QueryRowContext(ctx, r.MsgID, r.Reader))
		had := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: put receipt: %w", err)
		}
		if _, err := tx.StmtContext(ctx, s.st.putReceipt).ExecContext(ctx,
			r.MsgID, r.Iss, r.Reader, r.GroupID, r.AtMS, string(r.Status), r.Reason); err != nil {
			return fmt.Errorf("sqlite: put receipt: %w", err)
		}
		if out, err = scanReceipt(get.QueryRowContext(ctx, r.MsgID, r.Reader)); err != nil {
			return fmt.Errorf("sqlite: put receipt: %w", err)
		}
		if had && old == out {
			return nil // the same receipt again, or an older one: no change, no event
		}
		return insertEvent(ctx, tx, store.ReceiptEvent(out, nowMS))
	})
	return out, err
}

// ListReceipts lists receipts matching every set field of f.
func (s *Store) ListReceipts(ctx context.Context, f store.ReceiptFilter) ([]model.Receipt, error) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, v string }{{"msg_id", f.MsgID}, {"group_id", f.GroupID}, {"reader", f.Reader}} {
		if c.v != "" {
			conds = append(conds, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if f.CursorMsgID != "" {
		conds = append(conds, "(at_ms > ? OR at_ms = ? AND (msg_id > ? OR msg_id = ? AND reader > ?))")
		args = append(args, f.CursorAtMS, f.CursorAtMS, f.CursorMsgID, f.CursorMsgID, f.CursorReader)
	}
	q := "SELECT " + receiptCols + " FROM receipts"
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY at_ms, msg_id, reader LIMIT ?"
	args = append(args, limitOr(f.Limit, defaultLimit))
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list receipts: %w", err)
	}
	defer rows.Close()
	out := []model.Receipt{}
	for rows.Next() {
		r, err := scanReceipt(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list receipts: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list receipts: %w", err)
	}
	return out, nil
}

// ListConversations lists an owner's conversations, most recent first.
func (s *Store) ListConversations(ctx context.Context, q store.ConversationQuery) ([]model.Conversation, error) {
	rows, err := s.query(ctx, `SELECT owner, thread_key, last_msg_id, last_record_id, last_box,
			last_seq, unread_count, updated_at_ms
		FROM conversations WHERE owner = ?1
			AND (?3 = '' OR updated_at_ms < ?2 OR updated_at_ms = ?2 AND thread_key > ?3)
		ORDER BY updated_at_ms DESC, thread_key LIMIT ?4`, q.Owner, q.CursorUpdatedAtMS, q.CursorThreadKey, limitOr(q.Limit, defaultLimit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list conversations: %w", err)
	}
	defer rows.Close()
	out := []model.Conversation{}
	for rows.Next() {
		var c model.Conversation
		var box string
		if err := rows.Scan(&c.Owner, &c.ThreadKey, &c.LastMsgID, &c.LastRecordID, &box,
			&c.LastSeq, &c.UnreadCount, &c.UpdatedAtMS); err != nil {
			return nil, fmt.Errorf("sqlite: list conversations: %w", err)
		}
		c.LastBox = model.BoxKind(box)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list conversations: %w", err)
	}
	return out, nil
}

// ListEvents pages the event log after f.After, optionally for one owner.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]model.Event, error) {
	q := `SELECT event_id, type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail
		FROM events WHERE event_id > ?`
	args := []any{f.After}
	if f.Owner != "" {
		q += " AND owner = ?"
		args = append(args, f.Owner)
	}
	q += " ORDER BY event_id LIMIT ?"
	args = append(args, limitOr(f.Limit, defaultLimit))
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	defer rows.Close()
	out := []model.Event{}
	for rows.Next() {
		var e model.Event
		var box, from, to string
		if err := rows.Scan(&e.EventID, &e.Type, &e.Owner, &box, &e.RecordID, &e.MsgID,
			&from, &to, &e.AtMS, &e.Detail); err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		e.BoxKind, e.FromState, e.ToState = model.BoxKind(box), model.State(from), model.State(to)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", err)
	}
	return out, nil
}

// LastEventID reads the AUTOINCREMENT counter of events, which deleting
// rows does not lower.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	err := s.queryRow(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("sqlite: last event id: %w", err)
	}
	return id, nil
}

// PutToken binds a token hash to an identity, replacing any earlier binding.
func (s *Store) PutToken(ctx context.Context, hash string, id model.Identity, nowMS int64) error {
	defer s.lk.tokens.Forget(hash)
	defer s.lk.holders.Forget(id.DID)
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// The admin token file's token is registered again at every
		// start: an event only for a token new to the store.
		var known int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tokens WHERE hash = ?", hash).Scan(&known); err != nil {
			return fmt.Errorf("sqlite: put token: %w", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (hash, did, role, created_at_ms) VALUES (?, ?, ?, ?)
			ON CONFLICT (hash) DO UPDATE SET did = excluded.did, role = excluded.role,
				created_at_ms = excluded.created_at_ms`, hash, id.DID, string(id.Role), nowMS)
		if err != nil {
			return fmt.Errorf("sqlite: put token: %w", err)
		}
		if known > 0 {
			return nil
		}
		return insertEvent(ctx, tx, store.TokenEvent(model.EventTokenCreated, hash, id, nowMS))
	})
}

// Token returns the identity a token hash is bound to.
func (s *Store) Token(ctx context.Context, hash string) (model.Identity, error) {
	return lookup.Remember(&s.lk.tokens, hash, func() (model.Identity, error) { return s.token(ctx, hash) })
}

func (s *Store) token(ctx context.Context, hash string) (model.Identity, error) {
	var id model.Identity
	var role string
	err := s.queryRowContacts(ctx, "SELECT did, role FROM tokens WHERE hash = ?", hash).Scan(&id.DID, &role)
	if errors.Is(err, sql.ErrNoRows) {
		return id, model.NotFound("token")
	}
	if err != nil {
		return id, fmt.Errorf("sqlite: token: %w", err)
	}
	id.Role = model.Role(role)
	return id, nil
}

// HoldsToken reports whether a token is bound to did, remembered until a
// token of did is put or deleted.
func (s *Store) HoldsToken(ctx context.Context, did string) (bool, error) {
	return lookup.Remember(&s.lk.holders, did, func() (bool, error) {
		var has bool
		if err := s.queryRowContacts(ctx, "SELECT EXISTS (SELECT 1 FROM tokens WHERE did = ?)", did).Scan(&has); err != nil {
			return false, fmt.Errorf("sqlite: holds token: %w", err)
		}
		return has, nil
	})
}

// ListTokens lists stored tokens, oldest first.
func (s *Store) ListTokens(ctx context.Context, did string, limit int) ([]model.TokenInfo, error) {
	// Two statements, not one with "? = '' OR did = ?": a plan made for
	// that reads the whole table even when a DID is given.
	q, args := `SELECT `+tokenCols+` FROM tokens ORDER BY created_at_ms, hash LIMIT ?`, []any{limitOr(limit, defaultLimit)}
	if did != "" {
		q, args = `SELECT `+tokenCols+` FROM tokens WHERE did = ? ORDER BY created_at_ms, hash LIMIT ?`, []any{did, limitOr(limit, defaultLimit)}
	}
	rows, err := s.queryContacts(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tokens: %w", err)
	}
	out, err := scanTokens(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tokens: %w", err)
	}
	return out, nil
}

const tokenCols = "hash, did, role, created_at_ms"

// scanTokens reads rows of tokenCols, and closes them.
func scanTokens(rows *sql.Rows) ([]model.TokenInfo, error) {
	defer rows.Close()
	out := []model.TokenInfo{}
	for rows.Next() {
		var t model.TokenInfo
		var role string
		if err := rows.Scan(&t.Hash, &t.DID, &role, &t.CreatedAtMS); err != nil {
			return nil, err
		}
		t.Role = model.Role(role)
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteToken deletes the one token whose hash starts with prefix.
func (s *Store) DeleteToken(ctx context.Context, did, prefix string, nowMS int64) (model.TokenInfo, error) {
	var gone model.TokenInfo
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		gone = model.TokenInfo{}
		rows, err := tx.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens
			WHERE substr(hash, 1, length(?1)) = ?1 AND (?2 = '' OR did = ?2) LIMIT 2`, prefix, did)
		if err != nil {
			return fmt.Errorf("sqlite: delete token: %w", err)
		}
		found, err := scanTokens(rows)
		if err != nil {
			return fmt.Errorf("sqlite: delete token: %w", err)
		}
		switch len(found) {
		case 0:
			return model.NotFound("token")
		case 2:
			return &model.Error{Kind: model.ErrConflict, Message: fmt.Sprintf("more than one token's id starts with %q; give more of it", prefix)}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE hash = ?`, found[0].Hash); err != nil {
			return fmt.Errorf("sqlite: delete token: %w", err)
		}
		gone = found[0]
		return insertEvent(ctx, tx, store.TokenEvent(model.EventTokenRevoked, gone.Hash, gone.Identity, nowMS))
	})
	if gone.Hash != "" {
		s.lk.tokens.Forget(gone.Hash)
		s.lk.holders.Forget(gone.DID)
	}
	return gone, err
}
