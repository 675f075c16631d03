package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Durable consumers (store.Consumers). A consumer is one row of consumers;
// its box is ordinary records under (owner, 'CONSUMER:' || name), written
// by the same statements as Apply's, so seqs, events and notifications
// behave exactly as in any other box.

// consumerBoxPrefix is what every consumer's box starts with.
var consumerBoxPrefix = string(model.ConsumerBox(""))

const consumerCols = `owner, name, source_owner, source_box, filter, source_seq, acked_seq,
	created_at_ms, updated_at_ms`

func scanConsumer(row pgx.Row) (model.Consumer, error) {
	var (
		c      model.Consumer
		box    string
		filter string
	)
	err := row.Scan(&c.Owner, &c.Name, &c.SourceOwner, &box, &filter, &c.SourceSeq, &c.AckedSeq,
		&c.CreatedAtMS, &c.UpdatedAtMS)
	if err != nil {
		return model.Consumer{}, err
	}
	c.SourceBox = model.BoxKind(box)
	if filter != "" {
		if err := json.Unmarshal([]byte(filter), &c.Filter); err != nil {
			return c, fmt.Errorf("postgres: consumer %s/%s: bad filter: %w", c.Owner, c.Name, err)
		}
	}
	return c, nil
}

// sqlSourceEnd reads the source box's counter FOR SHARE: a transaction
// adding records to the source holds that row until it commits, so the
// read waits for it and returns the seq it committed. A consumer created
// from the end thus starts exactly after every record committed before it
// and sees every later one.
const sqlSourceEnd = `SELECT COALESCE((SELECT last_seq FROM box_seqs
	WHERE owner = $1 AND box = $2 FOR SHARE), 0)`

// sqlCreateConsumer inserts the consumer and its consumer.created event,
// both only if the consumer is new.
const sqlCreateConsumer = `WITH ins AS (
		INSERT INTO consumers (` + consumerCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $11, $7, $8)
		ON CONFLICT (owner, name) DO NOTHING
		RETURNING owner, name
	), ev AS (
		INSERT INTO events (type, owner, box, at_ms, detail)
		SELECT '` + model.EventConsumerCreated + `', owner, $9::text || name, $7, $10 FROM ins
	)
	SELECT count(*) FROM ins`

// CreateConsumer stores c, with SourceSeq at the source's end if fromEnd.
// c.CreatedAtMS is the creation time (and the event's); UpdatedAtMS
// defaults to it. The event's detail is the stored consumer as JSON.
func (s *Store) CreateConsumer(ctx context.Context, c *model.Consumer, fromEnd bool) error {
	filter, err := json.Marshal(c.Filter)
	if err != nil {
		return fmt.Errorf("postgres: encode consumer filter: %w", err)
	}
	updated := c.UpdatedAtMS
	if updated == 0 {
		updated = c.CreatedAtMS
	}
	var stored model.Consumer
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		stored = *c
		stored.UpdatedAtMS = updated
		if fromEnd {
			if err := tx.QueryRow(ctx, sqlSourceEnd, c.SourceOwner, string(c.SourceBox)).Scan(&stored.SourceSeq); err != nil {
				return fail("create consumer: read source seq", err)
			}
		}
		// A consumer made again under a deleted one's name starts its
		// cursor where that one's box ended (its seqs are never reused).
		if err := tx.QueryRow(ctx, sqlSourceEnd, c.Owner, consumerBoxPrefix+c.Name).Scan(&stored.AckedSeq); err != nil {
			return fail("create consumer: read its box's seq", err)
		}
		detail, err := json.Marshal(stored)
		if err != nil {
			return fmt.Errorf("postgres: create consumer: %w", err)
		}
		var n int
		if err := tx.QueryRow(ctx, sqlCreateConsumer, c.Owner, c.Name, c.SourceOwner, string(c.SourceBox),
			string(filter), stored.SourceSeq, c.CreatedAtMS, updated, consumerBoxPrefix, string(detail), stored.AckedSeq).Scan(&n); err != nil {
			return fail("create consumer", err)
		}
		if n == 0 {
			return model.Conflict("name", fmt.Sprintf("consumer %q of %s already exists", c.Name, c.Owner))
		}
		// Tells the other nodes (at commit) of the new consumer: a change
		// naming a consumer box a node does not know makes it reload its
		// consumers, so that writes to the source through any node are
		// fanned out at once rather than at its next sweep.
		if _, err := tx.Exec(ctx, sqlNotify, s.channel, []string{c.Owner + payloadSep + consumerBoxPrefix + c.Name}); err != nil {
			return fail("create consumer: notify", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.SourceSeq, c.AckedSeq, c.UpdatedAtMS = stored.SourceSeq, stored.AckedSeq, updated
	return nil
}

// GetConsumer returns one consumer or model.ErrNotFound.
func (s *Store) GetConsumer(ctx context.Context, owner, name string) (model.Consumer, error) {
	c, err := scanConsumer(s.pool.QueryRow(ctx, "SELECT "+consumerCols+
		" FROM consumers WHERE owner = $1 AND name = $2", owner, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, model.NotFound("consumer")
	}
	if err != nil {
		return c, fail("get consumer", err)
	}
	return c, nil
}

// ListConsumers lists the consumers matching every set field of f, by
// (owner, name).
func (s *Store) ListConsumers(ctx context.Context, f store.ConsumerQuery) ([]model.Consumer, error) {
	var q query
	q.b.WriteString("SELECT " + consumerCols + " FROM consumers WHERE TRUE")
	for _, c := range []struct{ col, v string }{
		{"owner", f.Owner}, {"source_owner", f.SourceOwner}, {"source_box", string(f.SourceBox)},
	} {
		if c.v != "" {
			q.b.WriteString(" AND " + c.col + " = " + q.arg(c.v))
		}
	}
	q.b.WriteString(" ORDER BY owner, name")
	rows, err := s.pool.Query(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, fail("list consumers", err)
	}
	defer rows.Close()
	out := []model.Consumer{}
	for rows.Next() {
		c, err := scanConsumer(rows)
		if err != nil {
			return nil, fail("list consumers", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list consumers", err)
	}
	return out, nil
}

// sqlAdvanceConsumer is the compare-and-set on the consumer's source seq.
// Its row lock is held until commit, so two nodes advancing the same
// consumer take turns, and the second one's re-check of source_seq fails.
const sqlAdvanceConsumer = `UPDATE consumers SET source_seq = $4, updated_at_ms = $5
	WHERE owner = $1 AND name = $2 AND source_seq = $3 AND created_at_ms = $6`

// sqlLockBodies locks the bodies a fan-out step refers to until it
// commits: a concurrent orphan purge skips locked bodies (FOR UPDATE SKIP
// LOCKED) and, once the step has committed, sees its records. A body a
// purge already took is not returned, which the caller checks.
const sqlLockBodies = `SELECT count(*) FROM (SELECT 1 FROM messages WHERE msg_id = ANY($1::text[]) FOR SHARE) b`

// msgIDsOf lists the distinct message ids of recs.
func msgIDsOf(recs []model.Record) []string {
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		ids = append(ids, r.MsgID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// AdvanceConsumer inserts one fan-out step's records into the consumer's
// box and moves its source seq, in one transaction sent as one batch: the
// compare-and-set comes first, then the box locks and exactly what Apply
// queues for records (queueRecords). When the compare-and-set misses, the whole transaction
// is rolled back, so nothing the batch did afterwards is kept.
func (s *Store) AdvanceConsumer(ctx context.Context, a *store.ConsumerAdvance) (*store.ApplyResult, error) {
	var res *store.ApplyResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = &store.ApplyResult{}
		recs := slices.Clone(a.Records)
		b := &pgx.Batch{}
		b.Queue(sqlAdvanceConsumer, a.Owner, a.Name, a.FromSourceSeq, a.ToSourceSeq, a.NowMS, a.CreatedAtMS)
		var bodies []string
		locks := 0
		if len(recs) > 0 {
			bodies = msgIDsOf(recs)
			b.Queue(sqlLockBodies, bodies)
			locks = lockBoxes(b, recs)
			if err := s.queueRecords(b, recs, a.NowMS); err != nil {
				return err
			}
		}
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		tag, err := br.Exec()
		if err != nil {
			return fail("advance consumer", err)
		}
		if tag.RowsAffected() == 0 {
			if err := br.Close(); err != nil {
				return fail("advance consumer", err)
			}
			return s.advanceMiss(ctx, tx, a)
		}
		if len(recs) > 0 {
			var n int
			if err := br.QueryRow().Scan(&n); err != nil {
				return fail("advance consumer: lock bodies", err)
			}
			if n != len(bodies) {
				// A purge took a body between our read of the source and
				// now (with the source record, which the next step will no
				// longer see): this step must not refer to it.
				return model.Conflict("source_seq", "a message body of this step was purged meanwhile; the step is examined again")
			}
			if err := readLocks(br, locks); err != nil {
				return err
			}
			if err := readRecords(br, recs, res); err != nil {
				return err
			}
		}
		if err := br.Close(); err != nil {
			return fail("advance consumer", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// advanceMiss explains why AdvanceConsumer's compare-and-set matched
// nothing, and returns it as the error that rolls the transaction back.
func (s *Store) advanceMiss(ctx context.Context, tx pgx.Tx, a *store.ConsumerAdvance) error {
	var seq int64
	err := tx.QueryRow(ctx, "SELECT source_seq FROM consumers WHERE owner = $1 AND name = $2",
		a.Owner, a.Name).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return model.NotFound("consumer")
	}
	if err != nil {
		return fail("advance consumer", err)
	}
	return model.Conflict("source_seq", fmt.Sprintf("consumer %q is at source seq %d, not %d", a.Name, seq, a.FromSourceSeq))
}

// sqlAckConsumer moves the cursor forward, never back, and only to a seq
// the consumer's box has handed out (a committed one: box_seqs is read
// from the statement's snapshot). A repeated ack leaves updated_at_ms.
var sqlAckConsumer = `UPDATE consumers c SET acked_seq = GREATEST(c.acked_seq, $3::bigint),
		updated_at_ms = CASE WHEN $3::bigint > c.acked_seq THEN $4::bigint ELSE c.updated_at_ms END
	WHERE c.owner = $1::text AND c.name = $2::text
		AND $3::bigint <= COALESCE((SELECT b.last_seq FROM box_seqs b
			WHERE b.owner = $1::text AND b.box = $5::text || c.name), 0)
	RETURNING ` + consumerCols

// AckConsumer moves a consumer's cursor to seq if that is ahead of it.
func (s *Store) AckConsumer(ctx context.Context, owner, name string, seq, nowMS int64) (model.Consumer, error) {
	var c model.Consumer
	err := retry(ctx, s.log, func() error {
		var err error
		c, err = scanConsumer(s.pool.QueryRow(ctx, sqlAckConsumer, owner, name, seq, nowMS, consumerBoxPrefix))
		return err
	})
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return c, fail("ack consumer", err)
	}
	// Unknown consumer, or a seq beyond its box.
	if _, err := s.GetConsumer(ctx, owner, name); err != nil {
		return model.Consumer{}, err
	}
	last, err := s.BoxLastSeq(ctx, owner, model.ConsumerBox(name))
	if err != nil {
		return model.Consumer{}, err
	}
	return model.Consumer{}, model.Invalid("seq", fmt.Sprintf("seq %d is beyond the last seq %d of consumer %q's box", seq, last, name))
}

// BoxLastSeq is the last seq handed out in (owner, box), 0 if none.
func (s *Store) BoxLastSeq(ctx context.Context, owner string, box model.BoxKind) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT last_seq FROM box_seqs WHERE owner = $1 AND box = $2",
		owner, string(box)).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fail("box last seq", err)
	}
	return n, nil
}

// DeleteConsumer removes the consumer, every record of its box and the
// bodies that no other record (or scheduled entry) refers to, and appends
// a consumer.deleted event whose detail counts what went.
//
// The box's counter row stays: a consumer created later under the same
// name continues its seqs instead of handing out seqs a client of the old
// one may hold as a cursor.
func (s *Store) DeleteConsumer(ctx context.Context, owner, name string, nowMS int64) error {
	box := string(model.ConsumerBox(name))
	bodiesGone := false
	defer func() {
		if bodiesGone {
			s.bodies.ForgetAll()
		}
	}()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// First, so a concurrent AdvanceConsumer waits on the row and then
		// finds it gone, instead of adding records behind our delete.
		tag, err := tx.Exec(ctx, "DELETE FROM consumers WHERE owner = $1 AND name = $2", owner, name)
		if err != nil {
			return fail("delete consumer", err)
		}
		if tag.RowsAffected() == 0 {
			return model.NotFound("consumer")
		}
		rows, err := tx.Query(ctx, `DELETE FROM records WHERE owner = $1 AND box = $2 RETURNING box, msg_id, owner, thread_key, record_id`, owner, box)
		if err != nil {
			return fail("delete consumer records", err)
		}
		gone, err := collectGone(rows)
		if err != nil {
			return fail("delete consumer records", err)
		}
		nrecs, ids := len(gone), gone.msgIDs()
		// No age condition: the locks alone keep bodies being reused.
		msgs, err := deleteOrphanBodies(ctx, tx, ids, noAgeLimit)
		if err != nil {
			return err
		}
		if msgs > 0 {
			bodiesGone = true
			s.bodies.ForgetAll() // and again after the commit (package bodies)
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO events (type, owner, box, at_ms, detail) VALUES ($1, $2, $3, $4, $5)`,
			model.EventConsumerDeleted, owner, box, nowMS, fmt.Sprintf(`{"records":%d,"messages":%d}`, nrecs, msgs))
		// Wakes the consumer's streams and long polls on every node, to
		// find it gone rather than wait out their timeout.
		b.Queue(sqlNotify, s.channel, []string{owner + payloadSep + box})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fail("delete consumer", err)
		}
		return nil
	})
}
