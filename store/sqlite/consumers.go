package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// consumerCols is the column list scanConsumer expects, in order.
const consumerCols = `owner, name, source_owner, source_box, filter, source_seq, acked_seq,
	created_at_ms, updated_at_ms`

// consumerByKey reads one consumer; prepared on both the writer and the
// read pool (stmts.go).
const consumerByKey = `SELECT ` + consumerCols + ` FROM consumers WHERE owner = ? AND name = ?`

// boxLastSeq reads the last seq handed out in (owner, box), 0 if none:
// the highest seq of its records, or of one deleted (migration 0006).
const boxLastSeq = `SELECT max(
	COALESCE((SELECT last_seq FROM box_seqs WHERE owner = ?1 AND box = ?2), 0),
	COALESCE((SELECT seq FROM records WHERE owner = ?1 AND box = ?2 ORDER BY seq DESC LIMIT 1), 0))`

func scanConsumer(sc scanner) (model.Consumer, error) {
	var (
		c      model.Consumer
		box    string
		filter []byte
	)
	err := sc.Scan(&c.Owner, &c.Name, &c.SourceOwner, &box, &filter, &c.SourceSeq, &c.AckedSeq,
		&c.CreatedAtMS, &c.UpdatedAtMS)
	if err != nil {
		return c, err
	}
	c.SourceBox = model.BoxKind(box)
	if len(filter) > 0 {
		if err := json.Unmarshal(filter, &c.Filter); err != nil {
			return c, fmt.Errorf("sqlite: consumer %s/%s: bad filter: %w", c.Owner, c.Name, err)
		}
	}
	return c, nil
}

// lastSeqOf runs a boxLastSeq statement: 0 when the box never had a record.
func lastSeqOf(ctx context.Context, st *sql.Stmt, owner string, box model.BoxKind) (int64, error) {
	var n int64
	err := st.QueryRowContext(ctx, owner, string(box)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// CreateConsumer stores c and appends a consumer.created event. With
// fromEnd, c.SourceSeq becomes the source box's last seq, read in the same
// transaction. c's CreatedAtMS is the creation time (and the event's);
// UpdatedAtMS defaults to it.
func (s *Store) CreateConsumer(ctx context.Context, c *model.Consumer, fromEnd bool) error {
	filter, err := json.Marshal(c.Filter)
	if err != nil {
		return fmt.Errorf("sqlite: encode consumer filter: %w", err)
	}
	created, updated := c.CreatedAtMS, c.UpdatedAtMS
	if updated == 0 {
		updated = created
	}
	var sourceSeq, ackedSeq int64
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		sourceSeq = c.SourceSeq
		last := tx.StmtContext(ctx, s.st.lastSeqW)
		if fromEnd {
			var err error
			sourceSeq, err = lastSeqOf(ctx, last, c.SourceOwner, c.SourceBox)
			if err != nil {
				return fmt.Errorf("sqlite: create consumer: %w", err)
			}
		}
		// A consumer made again under a deleted one's name starts its
		// cursor where that one's box ended (its seqs are never reused).
		ackedSeq, err = lastSeqOf(ctx, last, c.Owner, model.ConsumerBox(c.Name))
		if err != nil {
			return fmt.Errorf("sqlite: create consumer: %w", err)
		}
		n, err := txExecN(ctx, tx, `INSERT INTO consumers (`+consumerCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (owner, name) DO NOTHING`,
			c.Owner, c.Name, c.SourceOwner, string(c.SourceBox), string(filter), sourceSeq, ackedSeq, created, updated)
		if err != nil {
			return fmt.Errorf("sqlite: create consumer: %w", err)
		}
		if n == 0 {
			return model.Conflict("name", fmt.Sprintf("consumer %q of %s already exists", c.Name, c.Owner))
		}
		stored := *c
		stored.SourceSeq, stored.AckedSeq, stored.UpdatedAtMS = sourceSeq, ackedSeq, updated
		detail, err := json.Marshal(stored)
		if err != nil {
			return fmt.Errorf("sqlite: create consumer: %w", err)
		}
		return s.consumerEvent(ctx, tx, model.EventConsumerCreated, c.Owner, c.Name, created, string(detail))
	})
	if err != nil {
		return err
	}
	c.SourceSeq, c.AckedSeq, c.UpdatedAtMS = sourceSeq, ackedSeq, updated
	return nil
}

// txExecN executes an ad-hoc statement in tx and returns the number of
// rows it changed.
func txExecN(ctx context.Context, tx *sql.Tx, q string, args ...any) (int64, error) {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// consumerEvent appends an event about the consumer's box.
func (s *Store) consumerEvent(ctx context.Context, tx *sql.Tx, typ, owner, name string, atMS int64, detail string) error {
	_, err := tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, typ, owner, string(model.ConsumerBox(name)),
		"", "", "", "", atMS, detail)
	if err != nil {
		return fmt.Errorf("sqlite: append event: %w", err)
	}
	return nil
}

// GetConsumer returns one consumer or model.ErrNotFound.
func (s *Store) GetConsumer(ctx context.Context, owner, name string) (model.Consumer, error) {
	if err := s.settle(ctx); err != nil {
		return model.Consumer{}, err
	}
	c, err := scanConsumer(s.st.getConsumer.QueryRowContext(ctx, owner, name))
	if errors.Is(err, sql.ErrNoRows) {
		return c, model.NotFound("consumer")
	}
	if err != nil {
		return c, fmt.Errorf("sqlite: get consumer: %w", err)
	}
	return c, nil
}

// ListConsumers lists consumers by (owner, name), filtered by every set
// field of f.
func (s *Store) ListConsumers(ctx context.Context, f store.ConsumerQuery) ([]model.Consumer, error) {
	var conds []string
	var args []any
	for _, c := range []struct{ col, v string }{
		{"owner", f.Owner}, {"source_owner", f.SourceOwner}, {"source_box", string(f.SourceBox)},
	} {
		if c.v != "" {
			conds = append(conds, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	q := "SELECT " + consumerCols + " FROM consumers"
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY owner, name"
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list consumers: %w", err)
	}
	defer rows.Close()
	out := []model.Consumer{}
	for rows.Next() {
		c, err := scanConsumer(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list consumers: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list consumers: %w", err)
	}
	return out, nil
}

// DeleteConsumer removes the consumer, every record of its box and the
// bodies of those records that nothing else refers to (as Purge decides,
// without a time bound: writes are serialized here, so no plan can be
// reusing a body meanwhile), and appends a consumer.deleted event whose
// detail counts what went. The box's seq counter is kept, so a consumer
// created again under the name never hands out a seq a reader of the old
// one has seen.
func (s *Store) DeleteConsumer(ctx context.Context, owner, name string, nowMS int64) error {
	bodiesGone := false
	defer func() {
		if bodiesGone {
			s.bodies.ForgetAll()
		}
	}()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := txExecN(ctx, tx, `DELETE FROM consumers WHERE owner = ? AND name = ?`, owner, name)
		if err != nil {
			return fmt.Errorf("sqlite: delete consumer: %w", err)
		}
		if n == 0 {
			return model.NotFound("consumer")
		}
		gone, err := deleteRecords(ctx, tx, `DELETE FROM records WHERE owner = ? AND box = ? RETURNING box, msg_id, owner, thread_key, record_id`,
			owner, string(model.ConsumerBox(name)))
		if err != nil {
			return fmt.Errorf("sqlite: delete consumer: %w", err)
		}
		msgs, err := deleteOrphanBodies(ctx, tx, gone.msgIDs(), maxMS)
		if err != nil {
			return err
		}
		if msgs > 0 {
			bodiesGone = true
			s.bodies.ForgetAll() // and again after the commit (package bodies)
		}
		detail := fmt.Sprintf(`{"records":%d,"messages":%d}`, len(gone), msgs)
		return s.consumerEvent(ctx, tx, model.EventConsumerDeleted, owner, name, nowMS, detail)
	})
}

// AdvanceConsumer moves the consumer's SourceSeq by compare-and-set and
// inserts the records the step produced, exactly as Apply inserts a plan's.
func (s *Store) AdvanceConsumer(ctx context.Context, a *store.ConsumerAdvance) (*store.ApplyResult, error) {
	var res *store.ApplyResult
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res = &store.ApplyResult{}
		// The compare-and-set goes first, so a lost race writes nothing.
		n, err := execN(ctx, tx.StmtContext(ctx, s.st.advanceCAS), a.ToSourceSeq, a.NowMS, a.Owner, a.Name, a.FromSourceSeq, a.CreatedAtMS)
		if err != nil {
			return fmt.Errorf("sqlite: advance consumer: %w", err)
		}
		if n == 0 {
			c, err := scanConsumer(tx.StmtContext(ctx, s.st.consumerW).QueryRowContext(ctx, a.Owner, a.Name))
			if errors.Is(err, sql.ErrNoRows) {
				return model.NotFound("consumer")
			}
			if err != nil {
				return fmt.Errorf("sqlite: advance consumer: %w", err)
			}
			return model.Conflict("source_seq", fmt.Sprintf("consumer %q of %s examined its source up to %d, not %d",
				a.Name, a.Owner, c.SourceSeq, a.FromSourceSeq))
		}
		if len(a.Records) == 0 {
			return nil
		}
		return s.txStmts(ctx, tx).insertRecords(ctx, recordSet{recs: a.Records, nowMS: a.NowMS, res: res})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// AckConsumer moves the consumer's cursor forward to seq.
func (s *Store) AckConsumer(ctx context.Context, owner, name string, seq, nowMS int64) (model.Consumer, error) {
	var c model.Consumer
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		c, err = scanConsumer(tx.StmtContext(ctx, s.st.consumerW).QueryRowContext(ctx, owner, name))
		if errors.Is(err, sql.ErrNoRows) {
			return model.NotFound("consumer")
		}
		if err != nil {
			return fmt.Errorf("sqlite: ack consumer: %w", err)
		}
		if seq <= c.AckedSeq {
			return nil
		}
		last, err := lastSeqOf(ctx, tx.StmtContext(ctx, s.st.lastSeqW), owner, c.Box())
		if err != nil {
			return fmt.Errorf("sqlite: ack consumer: %w", err)
		}
		if seq > last {
			return model.Invalid("seq", fmt.Sprintf("seq %d is beyond the last seq %d of consumer %q's box", seq, last, name))
		}
		if _, err := tx.StmtContext(ctx, s.st.ackConsumer).ExecContext(ctx, seq, nowMS, owner, name); err != nil {
			return fmt.Errorf("sqlite: ack consumer: %w", err)
		}
		c.AckedSeq, c.UpdatedAtMS = seq, nowMS
		return nil
	})
	return c, err
}

// BoxLastSeq is the last seq handed out in (owner, box), 0 if none.
func (s *Store) BoxLastSeq(ctx context.Context, owner string, box model.BoxKind) (int64, error) {
	if err := s.settle(ctx); err != nil {
		return 0, err
	}
	n, err := lastSeqOf(ctx, s.st.lastSeq, owner, box)
	if err != nil {
		return 0, fmt.Errorf("sqlite: box last seq: %w", err)
	}
	return n, nil
}
