package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

const receiptCols = "msg_id, iss, reader, group_id, at_ms, status, reason"

func scanReceipt(row pgx.Row) (model.Receipt, error) {
	var r model.Receipt
	var status string
	err := row.Scan(&r.MsgID, &r.Iss, &r.Reader, &r.GroupID, &r.AtMS, &status, &r.Reason)
	r.Status = model.ReceiptStatus(status)
	return r, err
}

// PutReceipt stores r unless a later receipt for (msg, reader) exists, and
// returns whichever is stored. Ties go to the newcomer, so re-sending the
// same receipt is harmless and a correction at the same millisecond lands.
func (s *Store) PutReceipt(ctx context.Context, r model.Receipt, nowMS int64) (model.Receipt, error) {
	var out model.Receipt
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The row lock orders concurrent receipts of one reader, so each
		// sees the one before it and the change, if any, is its own.
		old, err := scanReceipt(tx.QueryRow(ctx,
			"SELECT "+receiptCols+" FROM receipts WHERE msg_id = $1 AND reader = $2 FOR UPDATE", r.MsgID, r.Reader))
		had := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out, err = scanReceipt(tx.QueryRow(ctx, `INSERT INTO receipts (`+receiptCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (msg_id, reader) DO UPDATE SET
				iss = excluded.iss, group_id = excluded.group_id, at_ms = excluded.at_ms,
				status = excluded.status, reason = excluded.reason
			WHERE excluded.at_ms >= receipts.at_ms
				AND (receipts.iss, receipts.group_id, receipts.at_ms, receipts.status, receipts.reason)
					IS DISTINCT FROM (excluded.iss, excluded.group_id, excluded.at_ms, excluded.status, excluded.reason)
			RETURNING `+receiptCols,
			r.MsgID, r.Iss, r.Reader, r.GroupID, r.AtMS, string(r.Status), r.Reason))
		if errors.Is(err, pgx.ErrNoRows) {
			// An older receipt, or the same one again: the stored one
			// stands, and no event says it changed. When there was none
			// before, another writer stored it meanwhile (two identical
			// first receipts race here); this statement's snapshot
			// predates it, a new one sees it.
			if had {
				out = old
				return nil
			}
			out, err = scanReceipt(tx.QueryRow(ctx,
				"SELECT "+receiptCols+" FROM receipts WHERE msg_id = $1 AND reader = $2", r.MsgID, r.Reader))
			return err
		}
		if err != nil {
			return err
		}
		e := store.ReceiptEvent(out, nowMS)
		_, err = tx.Exec(ctx, "INSERT INTO events (type, owner, msg_id, at_ms, detail) VALUES ($1, $2, $3, $4, $5)",
			e.Type, e.Owner, e.MsgID, e.AtMS, e.Detail)
		return err
	})
	if err != nil {
		return model.Receipt{}, fail("put receipt", err)
	}
	return out, nil
}

// ListReceipts lists receipts matching every set field of f.
func (s *Store) ListReceipts(ctx context.Context, f store.ReceiptFilter) ([]model.Receipt, error) {
	var q query
	var conds []string
	for _, c := range []struct{ col, v string }{{"msg_id", f.MsgID}, {"group_id", f.GroupID}, {"reader", f.Reader}} {
		if c.v != "" {
			conds = append(conds, c.col+" = "+q.arg(c.v))
		}
	}
	filtered := len(conds) > 0
	if f.CursorMsgID != "" {
		at, msg := q.arg(f.CursorAtMS), q.arg(f.CursorMsgID)
		conds = append(conds, "(at_ms > "+at+" OR at_ms = "+at+" AND (msg_id > "+msg+" OR msg_id = "+msg+" AND reader > "+q.arg(f.CursorReader)+"))")
	}
	q.b.WriteString("SELECT " + receiptCols + " FROM receipts")
	if len(conds) > 0 {
		q.b.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	q.b.WriteString(" ORDER BY at_ms, msg_id, reader LIMIT " + q.arg(limitOr(f.Limit, defaultLimit)))
	out := []model.Receipt{}
	// Unfiltered, sorted by time, which no index is: a whole-table read.
	err := s.reading(ctx, !filtered, func(db querier) error {
		rows, err := db.Query(ctx, q.b.String(), q.args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanReceipt(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fail("list receipts", err)
	}
	return out, nil
}

// ListConversations lists an owner's conversations, most recent first.
func (s *Store) ListConversations(ctx context.Context, q store.ConversationQuery) ([]model.Conversation, error) {
	rows, err := s.pool.Query(ctx, `SELECT owner, thread_key, last_msg_id, last_record_id, last_box,
			last_seq, `+sqlUnreadCount+`, updated_at_ms
		FROM conversations v WHERE owner = $1
			AND ($3 = '' OR updated_at_ms < $2 OR updated_at_ms = $2 AND thread_key > $3)
		ORDER BY updated_at_ms DESC, thread_key LIMIT $4`, q.Owner, q.CursorUpdatedAtMS, q.CursorThreadKey, limitOr(q.Limit, defaultLimit))
	if err != nil {
		return nil, fail("list conversations", err)
	}
	defer rows.Close()
	out := []model.Conversation{}
	for rows.Next() {
		var c model.Conversation
		var box string
		if err := rows.Scan(&c.Owner, &c.ThreadKey, &c.LastMsgID, &c.LastRecordID, &box,
			&c.LastSeq, &c.UnreadCount, &c.UpdatedAtMS); err != nil {
			return nil, fail("list conversations", err)
		}
		c.LastBox = model.BoxKind(box)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list conversations", err)
	}
	return out, nil
}

// PutToken binds a token hash to an identity, replacing any earlier binding.
func (s *Store) PutToken(ctx context.Context, hash string, id model.Identity, nowMS int64) error {
	defer s.tokens.Forget(hash)
	defer s.holders.Forget(id.DID)
	// The admin token file's token is registered again at every start:
	// an event only for a token new to the store (xmax is 0 for a row
	// the statement inserted, not updated).
	e := store.TokenEvent(model.EventTokenCreated, hash, id, nowMS)
	_, err := s.pool.Exec(ctx, `WITH up AS (INSERT INTO tokens (hash, did, role, created_at_ms) VALUES ($1, $2, $3, $4)
			ON CONFLICT (hash) DO UPDATE SET did = excluded.did, role = excluded.role,
				created_at_ms = excluded.created_at_ms
			RETURNING (xmax = 0) AS inserted)
		INSERT INTO events (type, owner, at_ms, detail) SELECT $5, $2, $4, $6 FROM up WHERE inserted`,
		hash, id.DID, string(id.Role), nowMS, e.Type, e.Detail)
	if err != nil {
		return fail("put token", err)
	}
	return nil
}

// Token returns the identity a token hash is bound to, remembered for
// tokenTTL (see Store.tokens).
func (s *Store) Token(ctx context.Context, hash string) (model.Identity, error) {
	return lookup.Remember(&s.tokens, hash, func() (model.Identity, error) { return s.token(ctx, hash) })
}

func (s *Store) token(ctx context.Context, hash string) (model.Identity, error) {
	var id model.Identity
	var role string
	err := s.pool.QueryRow(ctx, "SELECT did, role FROM tokens WHERE hash = $1", hash).Scan(&id.DID, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return id, model.NotFound("token")
	}
	if err != nil {
		return id, fail("token", err)
	}
	id.Role = model.Role(role)
	return id, nil
}

// HoldsToken reports whether a token is bound to did, remembered for
// tokenTTL (see Store.tokens).
func (s *Store) HoldsToken(ctx context.Context, did string) (bool, error) {
	return lookup.Remember(&s.holders, did, func() (bool, error) {
		var has bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tokens WHERE did = $1)", did).Scan(&has); err != nil {
			return false, fail("holds token", err)
		}
		return has, nil
	})
}

// ListTokens lists stored tokens, oldest first.
func (s *Store) ListTokens(ctx context.Context, did string, limit int) ([]model.TokenInfo, error) {
	// Two statements, not one with "$1 = '' OR did = $1": a generic plan
	// made for that reads the whole table even when a DID is given.
	q, args := `SELECT `+tokenCols+` FROM tokens ORDER BY created_at_ms, hash LIMIT $1`, []any{limitOr(limit, defaultLimit)}
	if did != "" {
		q, args = `SELECT `+tokenCols+` FROM tokens WHERE did = $1 ORDER BY created_at_ms, hash LIMIT $2`, []any{did, limitOr(limit, defaultLimit)}
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fail("list tokens", err)
	}
	out, err := scanTokens(rows)
	if err != nil {
		return nil, fail("list tokens", err)
	}
	return out, nil
}

const tokenCols = "hash, did, role, created_at_ms"

// scanTokens reads rows of tokenCols, and closes them.
func scanTokens(rows pgx.Rows) ([]model.TokenInfo, error) {
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

// DeleteToken deletes the one token whose hash starts with prefix. Other
// nodes may accept it for up to tokenTTL more.
func (s *Store) DeleteToken(ctx context.Context, did, prefix string, nowMS int64) (model.TokenInfo, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return model.TokenInfo{}, fail("delete token", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT `+tokenCols+` FROM tokens
		WHERE left(hash, length($1)) = $1 AND ($2 = '' OR did = $2) LIMIT 2 FOR UPDATE`, prefix, did)
	if err != nil {
		return model.TokenInfo{}, fail("delete token", err)
	}
	found, err := scanTokens(rows)
	if err != nil {
		return model.TokenInfo{}, fail("delete token", err)
	}
	switch len(found) {
	case 0:
		return model.TokenInfo{}, model.NotFound("token")
	case 2:
		return model.TokenInfo{}, &model.Error{Kind: model.ErrConflict, Message: fmt.Sprintf("more than one token's id starts with %q; give more of it", prefix)}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE hash = $1`, found[0].Hash); err != nil {
		return model.TokenInfo{}, fail("delete token", err)
	}
	e := store.TokenEvent(model.EventTokenRevoked, found[0].Hash, found[0].Identity, nowMS)
	if _, err := tx.Exec(ctx, `INSERT INTO events (type, owner, at_ms, detail) VALUES ($1, $2, $3, $4)`, e.Type, e.Owner, e.AtMS, e.Detail); err != nil {
		return model.TokenInfo{}, fail("delete token", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return model.TokenInfo{}, fail("delete token", err)
	}
	s.tokens.Forget(found[0].Hash)
	s.holders.Forget(found[0].DID)
	return found[0], nil
}
