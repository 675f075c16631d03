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

// AddMailPart stores a part in its key's open bucket (store.Mail).
func (s *Store) AddMailPart(ctx context.Context, p *store.MailPart, idem *store.Idempotency) (store.MailPartResult, error) {
	var res store.MailPartResult
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res = store.MailPartResult{}
		if idem != nil {
			n, err := execN(ctx, tx.StmtContext(ctx, s.st.insertIdem), idem.Scope, idem.Key, p.MsgID, p.NowMS, idem.Answer)
			if err != nil {
				return fmt.Errorf("sqlite: idempotency key: %w", err)
			}
			if n == 0 {
				if _, err := s.bindIdem(ctx, tx, idem, p.MsgID, p.NowMS); err != nil {
					return err // bound to another message
				}
				res.Duplicate = true
			}
		}
		var bucket sql.NullInt64
		var mailID sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT bucket_id, mail_id FROM mail_parts WHERE mail_key = ? AND msg_id = ?`,
			p.MailKey, p.MsgID).Scan(&bucket, &mailID)
		switch {
		case err == nil:
			res.Duplicate, res.MailID = true, mailID.String
			if bucket.Valid {
				b, err := getBucket(ctx, tx, "bucket_id = ?", bucket.Int64)
				res.Bucket = b
				return err
			}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("sqlite: mail part: %w", err)
		case res.Duplicate:
			return nil // its key says it was sent before, not as a part of this burst
		}
		b, err := openBucket(ctx, tx, p)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO mail_parts (mail_key, msg_id, bucket_id, pos, body, ctx, created_at_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, p.MailKey, p.MsgID, b.ID, b.PartCount-1, p.Body, p.Ctx, p.NowMS); err != nil {
			return fmt.Errorf("sqlite: mail part: %w", err)
		}
		res.Bucket = b
		_, err = tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, model.EventMailPartAdded, p.Sender, "", "",
			p.MsgID, "", "", p.NowMS, fmt.Sprintf("bucket=%d parts=%d due_at_ms=%d", b.ID, b.PartCount, b.DueAtMS))
		if err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		return nil
	})
	return res, err
}

// openBucket counts p into its key's open bucket, closing a due or full one
// and opening a new one as needed, and returns the bucket as it now is.
func openBucket(ctx context.Context, tx *sql.Tx, p *store.MailPart) (store.MailBucket, error) {
	b, err := getBucket(ctx, tx, "open_key = ?", p.MailKey)
	found := err == nil
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return b, err
	}
	if found && (b.DueAtMS <= p.NowMS || b.PartCount >= p.MaxParts || b.Cost+p.Cost > p.MaxCost) {
		// Closed; if only for being full, it need not wait any longer.
		if _, err := tx.ExecContext(ctx, `UPDATE mail_buckets SET open_key = NULL, due_at_ms = min(due_at_ms, ?)
			WHERE bucket_id = ?`, p.NowMS, b.ID); err != nil {
			return b, fmt.Errorf("sqlite: close mail bucket: %w", err)
		}
		found = false
	}
	if !found {
		rcpt, err := json.Marshal(p.Recipients)
		if err != nil {
			return b, fmt.Errorf("sqlite: mail bucket: %w", err)
		}
		b = store.MailBucket{Sender: p.Sender, Key: p.Key, Recipients: p.Recipients, Open: true,
			WindowMS: p.WindowMS, MaxWaitMS: p.MaxWaitMS, FirstAtMS: p.NowMS}
		err = tx.QueryRowContext(ctx, `INSERT INTO mail_buckets (open_key, sender, agg_key, recipients, parts, cost,
			window_ms, max_wait_ms, first_at_ms, last_at_ms, due_at_ms) VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?, ?, ?)
			RETURNING bucket_id`, p.MailKey, p.Sender, p.Key, string(rcpt), p.WindowMS, p.MaxWaitMS, p.NowMS, p.NowMS, p.NowMS).Scan(&b.ID)
		if err != nil {
			return b, fmt.Errorf("sqlite: open mail bucket: %w", err)
		}
	}
	b.PartCount++
	b.Cost += p.Cost
	b.LastAtMS = p.NowMS
	b.DueAtMS = min(p.NowMS+b.WindowMS, b.FirstAtMS+b.MaxWaitMS)
	openKey := sql.NullString{String: p.MailKey, Valid: true}
	if b.PartCount >= p.MaxParts {
		b.DueAtMS, b.Open, openKey = p.NowMS, false, sql.NullString{}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE mail_buckets SET open_key = ?, parts = ?, cost = ?, last_at_ms = ?, due_at_ms = ?
		WHERE bucket_id = ?`, openKey, b.PartCount, b.Cost, b.LastAtMS, b.DueAtMS, b.ID); err != nil {
		return b, fmt.Errorf("sqlite: mail bucket: %w", err)
	}
	return b, nil
}

const bucketCols = `bucket_id, open_key IS NOT NULL, sender, agg_key, recipients, parts, cost, window_ms, max_wait_ms,
	first_at_ms, last_at_ms, due_at_ms`

// getBucket reads the one bucket where cond holds.
func getBucket(ctx context.Context, tx *sql.Tx, cond string, arg any) (store.MailBucket, error) {
	rows, err := tx.QueryContext(ctx, "SELECT "+bucketCols+" FROM mail_buckets WHERE "+cond, arg)
	if err != nil {
		return store.MailBucket{}, fmt.Errorf("sqlite: mail bucket: %w", err)
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

func scanBuckets(rows *sql.Rows) ([]store.MailBucket, error) {
	defer rows.Close()
	var out []store.MailBucket
	for rows.Next() {
		var b store.MailBucket
		var rcpt string
		if err := rows.Scan(&b.ID, &b.Open, &b.Sender, &b.Key, &rcpt, &b.PartCount, &b.Cost, &b.WindowMS, &b.MaxWaitMS,
			&b.FirstAtMS, &b.LastAtMS, &b.DueAtMS); err != nil {
			return nil, fmt.Errorf("sqlite: mail bucket: %w", err)
		}
		if err := json.Unmarshal([]byte(rcpt), &b.Recipients); err != nil {
			return nil, fmt.Errorf("sqlite: mail bucket %d recipients: %w", b.ID, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: mail bucket: %w", err)
	}
	return out, nil
}

// DueMail lists due buckets with their parts.
func (s *Store) DueMail(ctx context.Context, beforeMS int64, limit int) ([]store.MailBucket, error) {
	return s.listBuckets(ctx, "due_at_ms <= ?", beforeMS, limitOr(limit, defaultLimit), true)
}

// ListMail lists pending buckets with their parts' ids.
func (s *Store) ListMail(ctx context.Context, q store.MailQuery) ([]store.MailBucket, error) {
	cond, arg := "? = ''", any(q.Sender)
	if q.Sender != "" {
		cond = "sender = ?"
	}
	return s.listBuckets(ctx, cond, arg, limitOr(q.Limit, defaultLimit), false)
}

func (s *Store) listBuckets(ctx context.Context, cond string, arg any, limit int, bodies bool) ([]store.MailBucket, error) {
	var out []store.MailBucket
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT "+bucketCols+" FROM mail_buckets WHERE "+cond+
			" ORDER BY due_at_ms, bucket_id LIMIT ?", arg, limit)
		if err != nil {
			return fmt.Errorf("sqlite: mail buckets: %w", err)
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

func bucketParts(ctx context.Context, tx *sql.Tx, id int64, bodies bool) ([]store.MailPart, error) {
	rows, err := tx.QueryContext(ctx, `SELECT msg_id, created_at_ms, CASE WHEN ? THEN body END, CASE WHEN ? THEN ctx END
		FROM mail_parts WHERE bucket_id = ? ORDER BY pos`, bodies, bodies, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: mail parts: %w", err)
	}
	defer rows.Close()
	var out []store.MailPart
	for rows.Next() {
		var p store.MailPart
		if err := rows.Scan(&p.MsgID, &p.NowMS, &p.Body, &p.Ctx); err != nil {
			return nil, fmt.Errorf("sqlite: mail parts: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: mail parts: %w", err)
	}
	return out, nil
}

// NextMailDue returns the earliest due time of any bucket.
func (s *Store) NextMailDue(ctx context.Context) (int64, bool, error) {
	var at sql.NullInt64
	err := s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT min(due_at_ms) FROM mail_buckets").Scan(&at)
	})
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: next mail due: %w", err)
	}
	return at.Int64, at.Valid, nil
}

// CloseMail closes the open buckets due by beforeMS.
func (s *Store) CloseMail(ctx context.Context, beforeMS int64) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE mail_buckets SET open_key = NULL WHERE open_key IS NOT NULL AND due_at_ms <= ?", beforeMS)
		if err != nil {
			return fmt.Errorf("sqlite: close mail: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// DropMail deletes a bucket and its parts without a Mail.
func (s *Store) DropMail(ctx context.Context, bucketID int64, parts int, nowMS int64, why string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var sender string
		err := tx.QueryRowContext(ctx, "DELETE FROM mail_buckets WHERE bucket_id = ? AND parts = ? RETURNING sender",
			bucketID, parts).Scan(&sender)
		if errors.Is(err, sql.ErrNoRows) {
			return model.NotFound("mail bucket")
		}
		if err != nil {
			return fmt.Errorf("sqlite: drop mail: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM mail_parts WHERE bucket_id = ?", bucketID); err != nil {
			return fmt.Errorf("sqlite: drop mail: %w", err)
		}
		_, err = tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, model.EventMailDropped, sender, "", "", "", "", "",
			nowMS, fmt.Sprintf("bucket=%d parts=%d: %s", bucketID, parts, why))
		if err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		return nil
	})
}

// consumeMail is Apply's part for a plan that writes a bucket's Mail.
func (s *Store) consumeMail(ctx context.Context, tx *sql.Tx, p *store.Plan) error {
	c := p.ConsumeMail
	var sender string
	err := tx.QueryRowContext(ctx, "DELETE FROM mail_buckets WHERE bucket_id = ? AND parts = ? RETURNING sender",
		c.BucketID, c.Parts).Scan(&sender)
	if errors.Is(err, sql.ErrNoRows) {
		return model.Conflict("mail", fmt.Sprintf("mail bucket %d was already flushed or changed", c.BucketID))
	}
	if err != nil {
		return fmt.Errorf("sqlite: consume mail: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE mail_parts SET bucket_id = NULL, body = NULL, ctx = NULL, mail_id = ?
		WHERE bucket_id = ?`, p.MsgID, c.BucketID); err != nil {
		return fmt.Errorf("sqlite: consume mail: %w", err)
	}
	_, err = tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, model.EventMailFlushed, sender, "", "", p.MsgID, "", "",
		p.NowMS, fmt.Sprintf("bucket=%d parts=%d", c.BucketID, c.Parts))
	if err != nil {
		return fmt.Errorf("sqlite: append event: %w", err)
	}
	return nil
}
