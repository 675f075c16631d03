package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// AddMailPart stores a part in its key's open bucket (store.Mail). The
// parts of one key take turns on an advisory lock, so that nodes adding
// to the same burst at once neither open two buckets nor count a part
// twice; a flush deletes the bucket row, which an add waits for on its row
// lock.
func (s *Store) AddMailPart(ctx context.Context, p *store.MailPart, idem *store.Idempotency) (store.MailPartResult, error) {
	var res store.MailPartResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = store.MailPartResult{}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 7420))", p.MailKey); err != nil {
			return fail("mail part lock", err)
		}
		if idem != nil {
			tag, err := tx.Exec(ctx, sqlInsertIdem, idem.Scope, idem.Key, p.MsgID, p.NowMS, idem.Answer)
			if err != nil {
				return fail("idempotency key", err)
			}
			if tag.RowsAffected() == 0 {
				if err := checkIdem(ctx, tx, idem, p.MsgID); err != nil {
					return err
				}
				res.Duplicate = true
			}
		}
		var bucket *int64
		var mailID *string
		err := tx.QueryRow(ctx, "SELECT bucket_id, mail_id FROM mail_parts WHERE mail_key = $1 AND msg_id = $2",
			p.MailKey, p.MsgID).Scan(&bucket, &mailID)
		switch {
		case err == nil:
			res.Duplicate = true
			if mailID != nil {
				res.MailID = *mailID
			}
			if bucket != nil {
				b, err := getBucket(ctx, tx, "bucket_id = $1", *bucket)
				res.Bucket = b
				return err
			}
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return fail("mail part", err)
		case res.Duplicate:
			return nil // its key says it was sent before, not as a part of this burst
		}
		b, err := openBucket(ctx, tx, p)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mail_parts (mail_key, msg_id, bucket_id, pos, body, ctx, created_at_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, p.MailKey, p.MsgID, b.ID, b.PartCount-1, p.Body, p.Ctx, p.NowMS); err != nil {
			return fail("mail part", err)
		}
		res.Bucket = b
		if _, err := tx.Exec(ctx, "INSERT INTO events (type, owner, msg_id, at_ms, detail) VALUES ($1, $2, $3, $4, $5)",
			model.EventMailPartAdded, p.Sender, p.MsgID, p.NowMS,
			fmt.Sprintf("bucket=%d parts=%d due_at_ms=%d", b.ID, b.PartCount, b.DueAtMS)); err != nil {
			return fail("append event", err)
		}
		return nil
	})
	return res, err
}

// openBucket counts p into its key's open bucket, closing a due or full one
// and opening a new one as needed, and returns the bucket as it now is.
func openBucket(ctx context.Context, tx pgx.Tx, p *store.MailPart) (store.MailBucket, error) {
	b, err := getBucket(ctx, tx, "open_key = $1 FOR UPDATE", p.MailKey)
	found := err == nil
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return b, err
	}
	if found && (b.DueAtMS <= p.NowMS || b.PartCount >= p.MaxParts || b.Cost+p.Cost > p.MaxCost) {
		// Closed; if only for being full, it need not wait any longer.
		if _, err := tx.Exec(ctx, "UPDATE mail_buckets SET open_key = NULL, due_at_ms = least(due_at_ms, $1) WHERE bucket_id = $2",
			p.NowMS, b.ID); err != nil {
			return b, fail("close mail bucket", err)
		}
		found = false
	}
	if !found {
		rcpt := p.Recipients
		if rcpt == nil {
			rcpt = []string{}
		}
		b = store.MailBucket{Sender: p.Sender, Key: p.Key, Recipients: rcpt, Open: true,
			WindowMS: p.WindowMS, MaxWaitMS: p.MaxWaitMS, FirstAtMS: p.NowMS}
		// The advisory lock makes this key's open bucket ours to open.
		err := tx.QueryRow(ctx, `INSERT INTO mail_buckets (open_key, sender, agg_key, recipients, parts, cost,
			window_ms, max_wait_ms, first_at_ms, last_at_ms, due_at_ms) VALUES ($1, $2, $3, $4, 0, 0, $5, $6, $7, $7, $7)
			RETURNING bucket_id`, p.MailKey, p.Sender, p.Key, rcpt, p.WindowMS, p.MaxWaitMS, p.NowMS).Scan(&b.ID)
		if err != nil {
			return b, fail("open mail bucket", err)
		}
	}
	b.PartCount++
	b.Cost += p.Cost
	b.LastAtMS = p.NowMS
	b.DueAtMS = min(p.NowMS+b.WindowMS, b.FirstAtMS+b.MaxWaitMS)
	openKey := &p.MailKey
	if b.PartCount >= p.MaxParts {
		b.DueAtMS, b.Open, openKey = p.NowMS, false, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE mail_buckets SET open_key = $1, parts = $2, cost = $3, last_at_ms = $4, due_at_ms = $5
		WHERE bucket_id = $6`, openKey, b.PartCount, b.Cost, b.LastAtMS, b.DueAtMS, b.ID); err != nil {
		return b, fail("mail bucket", err)
	}
	return b, nil
}

const bucketCols = `bucket_id, open_key IS NOT NULL, sender, agg_key, recipients, parts, cost, window_ms, max_wait_ms,
	first_at_ms, last_at_ms, due_at_ms`

// getBucket reads the one bucket where cond holds.
func getBucket(ctx context.Context, db querier, cond string, arg any) (store.MailBucket, error) {
	rows, err := db.Query(ctx, "SELECT "+bucketCols+" FROM mail_buckets WHERE "+cond, arg)
	if err != nil {
		return store.MailBucket{}, fail("mail bucket", err)
	}
	bs, err := scanBuckets(rows)
	if err != nil {
		return store.MailBucket{}, err
	}
	if len(bs) == 0 {
		return store.MailBucket{}, model.NotFound("mail bucket")
	}
	return bs[0], nil
}

func scanBuckets(rows pgx.Rows) ([]store.MailBucket, error) {
	defer rows.Close()
	var out []store.MailBucket
	for rows.Next() {
		var b store.MailBucket
		if err := rows.Scan(&b.ID, &b.Open, &b.Sender, &b.Key, &b.Recipients, &b.PartCount, &b.Cost, &b.WindowMS,
			&b.MaxWaitMS, &b.FirstAtMS, &b.LastAtMS, &b.DueAtMS); err != nil {
			return nil, fail("mail bucket", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("mail bucket", err)
	}
	return out, nil
}

// DueMail lists due buckets with their parts.
func (s *Store) DueMail(ctx context.Context, beforeMS int64, limit int) ([]store.MailBucket, error) {
	return s.listBuckets(ctx, "due_at_ms <= $1", beforeMS, limitOr(limit, defaultLimit), true)
}

// ListMail lists pending buckets with their parts' ids.
func (s *Store) ListMail(ctx context.Context, q store.MailQuery) ([]store.MailBucket, error) {
	cond := "$1::text = ''"
	if q.Sender != "" {
		cond = "sender = $1"
	}
	return s.listBuckets(ctx, cond, q.Sender, limitOr(q.Limit, defaultLimit), false)
}

func (s *Store) listBuckets(ctx context.Context, cond string, arg any, limit int, bodies bool) ([]store.MailBucket, error) {
	var out []store.MailBucket
	// One snapshot: a bucket and its parts as one flush left them.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+bucketCols+" FROM mail_buckets WHERE "+cond+
			" ORDER BY due_at_ms, bucket_id LIMIT $2", arg, limit)
		if err != nil {
			return fail("mail buckets", err)
		}
		if out, err = scanBuckets(rows); err != nil {
			return err
		}
		for i := range out {
			if out[i].Parts, err = bucketParts(ctx, tx, out[i].ID, bodies); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func bucketParts(ctx context.Context, tx pgx.Tx, id int64, bodies bool) ([]store.MailPart, error) {
	rows, err := tx.Query(ctx, `SELECT msg_id, created_at_ms, CASE WHEN $1 THEN body END, CASE WHEN $1 THEN ctx END
		FROM mail_parts WHERE bucket_id = $2 ORDER BY pos`, bodies, id)
	if err != nil {
		return nil, fail("mail parts", err)
	}
	defer rows.Close()
	var out []store.MailPart
	for rows.Next() {
		var p store.MailPart
		if err := rows.Scan(&p.MsgID, &p.NowMS, &p.Body, &p.Ctx); err != nil {
			return nil, fail("mail parts", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("mail parts", err)
	}
	return out, nil
}

// NextMailDue returns the earliest due time of any bucket.
func (s *Store) NextMailDue(ctx context.Context) (int64, bool, error) {
	var at *int64
	if err := s.pool.QueryRow(ctx, "SELECT min(due_at_ms) FROM mail_buckets").Scan(&at); err != nil {
		return 0, false, fail("next mail due", err)
	}
	if at == nil {
		return 0, false, nil
	}
	return *at, true, nil
}

// CloseMail closes the open buckets due by beforeMS. A part being added
// holds its bucket's row: the update waits for it, then sees the bucket's
// new due time.
func (s *Store) CloseMail(ctx context.Context, beforeMS int64) (int, error) {
	tag, err := s.pool.Exec(ctx, "UPDATE mail_buckets SET open_key = NULL WHERE open_key IS NOT NULL AND due_at_ms <= $1", beforeMS)
	if err != nil {
		return 0, fail("close mail", err)
	}
	return int(tag.RowsAffected()), nil
}

// sqlConsumeMail deletes a bucket that still holds $2 parts, marks its
// parts as gone into the Mail $3 and appends mail.flushed, in one
// statement; it returns how many buckets it deleted (0 or 1).
const sqlConsumeMail = `WITH b AS (
		DELETE FROM mail_buckets WHERE bucket_id = $1 AND parts = $2 RETURNING bucket_id, sender
	), u AS (
		UPDATE mail_parts SET bucket_id = NULL, body = NULL, ctx = NULL, mail_id = $3
		WHERE bucket_id IN (SELECT bucket_id FROM b)
	), e AS (
		INSERT INTO events (type, owner, msg_id, at_ms, detail)
		SELECT '` + model.EventMailFlushed + `', b.sender, $3, $4, 'bucket=' || $1::bigint || ' parts=' || $2::int FROM b
	)
	SELECT count(*) FROM b`

// DropMail deletes a bucket and its parts without a Mail.
func (s *Store) DropMail(ctx context.Context, bucketID int64, parts int, nowMS int64, why string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var sender string
		err := tx.QueryRow(ctx, "DELETE FROM mail_buckets WHERE bucket_id = $1 AND parts = $2 RETURNING sender",
			bucketID, parts).Scan(&sender)
		if errors.Is(err, pgx.ErrNoRows) {
			return model.NotFound("mail bucket")
		}
		if err != nil {
			return fail("drop mail", err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM mail_parts WHERE bucket_id = $1", bucketID); err != nil {
			return fail("drop mail", err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO events (type, owner, at_ms, detail) VALUES ($1, $2, $3, $4)",
			model.EventMailDropped, sender, nowMS, fmt.Sprintf("bucket=%d parts=%d: %s", bucketID, parts, why)); err != nil {
			return fail("append event", err)
		}
		return nil
	})
}
