package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// sqlInsertRecords inserts a large plan's records in one statement: the
// records travel as one array per column. A group fan-out used to be one
// statement per record, each planned and executed on its own (1,000 of
// them for a group of 1,000).
//
// Only records not stored yet are inserted (a record repeated in the plan
// counts once, at its first place). Each gets the next seq of its box in
// plan order, from the counter row that lockBoxes created and locked
// earlier in the transaction: holding that lock, nothing else can insert
// into the box, so the lookup below sees every record there is and no
// seq is consumed for one that exists. The lookup is a scalar subquery,
// one index probe per row, rather than NOT EXISTS: PostgreSQL plans that
// as an anti join, and a generic plan made while records was small
// scanned the whole table. The counters move to the last seq
// handed out, each new record gets its record.created event (in plan
// order: the event ids follow the SELECT's order), and each conversation
// takes its last new record and one unread per new unread record — in one
// row per conversation, as PostgreSQL lets an INSERT … ON CONFLICT touch a
// row once. The result is the new records' ids and seqs, in plan order.
// A record stored before ids carried their message's locator exists under
// the id without it (legacy, model.LegacyRecordID), which is probed too:
// sent again after the upgrade, its message makes no second record.
const sqlInsertRecords = `WITH input AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
			$6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[],
			$12::int[], $13::bigint[], $14::text[], $15::bigint[], $16::text[],
			$17::text[], $18::bigint[], $19::text[], $20::text[], $21::text[], $22::bigint[],
			$23::bigint[], $24::boolean[], $26::text[])
		WITH ORDINALITY AS t(record_id, owner, box, msg_id, state,
			created_at_ms, updated_at_ms, sort_key, thread_key, tags, route,
			attempts, next_retry_at_ms, external_msg_id, delivered_at_ms, error_code,
			error_message, retry_after_ms, last_error, lease_id, lease_holder, lease_until_ms,
			unread, conv, legacy, ord)
	), firsts AS (
		SELECT DISTINCT ON (i.record_id) i.* FROM input i
		WHERE (SELECT true FROM records r WHERE r.record_id IN (i.record_id, i.legacy) LIMIT 1) IS NULL
		ORDER BY i.record_id, i.ord
	), numbered AS (
		SELECT f.*, b.last_seq + row_number() OVER (PARTITION BY f.owner, f.box ORDER BY f.ord) AS seq
		FROM firsts f JOIN box_seqs b ON b.owner = f.owner AND b.box = f.box
	), ins AS (
		INSERT INTO records (record_id, owner, box, msg_id, state, seq,
			created_at_ms, updated_at_ms, sort_key, thread_key, tags, route,
			attempts, next_retry_at_ms, external_msg_id, delivered_at_ms, error_code,
			error_message, retry_after_ms, last_error, visible_at_ms,
			lease_id, lease_holder, lease_until_ms)
		SELECT record_id, owner, box, msg_id, state, seq,
			created_at_ms, updated_at_ms, sort_key, thread_key, tags, route,
			attempts, next_retry_at_ms, external_msg_id, delivered_at_ms, error_code,
			error_message, retry_after_ms, last_error, next_retry_at_ms,
			lease_id, lease_holder, lease_until_ms
		FROM numbered ORDER BY ord
	), bump AS (
		UPDATE box_seqs b SET last_seq = m.seq
		FROM (SELECT owner, box, max(seq) AS seq FROM numbered GROUP BY owner, box) m
		WHERE b.owner = m.owner AND b.box = m.box
	), ev AS (
		INSERT INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail)
		SELECT 'record.created', owner, box, record_id, msg_id, '', state, $25::bigint, ''
		FROM numbered ORDER BY ord
	), conv AS (
		INSERT INTO conversations (owner, thread_key, last_msg_id, last_record_id,
			last_box, last_seq, unread_count, updated_at_ms)
		SELECT DISTINCT ON (owner, thread_key) owner, thread_key, msg_id, record_id, box, seq,
			sum(unread) OVER (PARTITION BY owner, thread_key), $25::bigint
		FROM numbered WHERE conv
		ORDER BY owner, thread_key, ord DESC
	` + sqlConvUpsert + `)
	SELECT record_id, seq FROM numbered ORDER BY ord`

// bulkMin is the smallest plan written with sqlInsertRecords. Smaller
// plans (a send to one or two boxes) take one sqlInsertRecord per record:
// measured with EXPLAIN ANALYZE, two of them execute in about half the time
// of one sqlInsertRecords for two records, whose sorts and window
// functions cost more than they save until a plan has more rows.
const bulkMin = 8

const (
	// sqlInsertRecord inserts one record with the next seq of its box, bumps
	// the counter, appends record.created and updates the conversation, all
	// only if the record is new: a record that exists costs one statement
	// and consumes no seq. It runs after sqlLockBox in the same transaction,
	// so its snapshot already sees every committed record of the box and
	// ON CONFLICT (record_id) detects existing ones reliably; a record
	// stored under the id without its locator ($26) is existing too.
	sqlInsertRecord = `WITH ins AS (
			INSERT INTO records (record_id, owner, box, msg_id, state, seq,
				created_at_ms, updated_at_ms, sort_key, thread_key, tags, route,
				attempts, next_retry_at_ms, external_msg_id, delivered_at_ms, error_code,
				error_message, retry_after_ms, last_error, visible_at_ms,
				lease_id, lease_holder, lease_until_ms)
			SELECT $1::text, b.owner, b.box, $4::text, $5::text, b.last_seq + 1,
				$6::bigint, $7::bigint, $8::bigint, $9::text, $10::text, $11::text,
				$12::int, $13::bigint, $14::text, $15::bigint, $16::text,
				$17::text, $18::bigint, $19::text, $13::bigint,
				$20::text, $21::text, $22::bigint
			FROM box_seqs b WHERE b.owner = $2::text AND b.box = $3::text
				AND NOT EXISTS (SELECT 1 FROM records x WHERE x.record_id = $26::text)
			ON CONFLICT (record_id) DO NOTHING
			RETURNING record_id, owner, box, msg_id, state, seq, thread_key
		), bump AS (
			UPDATE box_seqs b SET last_seq = ins.seq FROM ins
			WHERE b.owner = ins.owner AND b.box = ins.box
		), ev AS (
			INSERT INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail)
			SELECT 'record.created', owner, box, record_id, msg_id, '', state, $23::bigint, '' FROM ins
		), conv AS (
			INSERT INTO conversations (owner, thread_key, last_msg_id, last_record_id,
				last_box, last_seq, unread_count, updated_at_ms)
			SELECT owner, thread_key, msg_id, record_id, box, seq, $24::bigint, $23::bigint
			FROM ins WHERE $25::boolean
		` + sqlConvUpsert + `)
		SELECT seq FROM ins`
)

// sqlConvUpsert moves a conversation to its new last record and adds the
// new unread records, for both record inserts.
const sqlConvUpsert = `ON CONFLICT (owner, thread_key) DO UPDATE SET
		last_msg_id = excluded.last_msg_id,
		last_record_id = excluded.last_record_id,
		last_box = excluded.last_box,
		last_seq = excluded.last_seq,
		unread_count = conversations.unread_count + excluded.unread_count,
		updated_at_ms = excluded.updated_at_ms`

// recordColumns is a plan's records as sqlInsertRecords' arrays.
type recordColumns struct {
	recordID, owner, box, msgID, state []string
	createdAt, updatedAt, sortKey      []int64
	threadKey                          []string
	tags, route                        []*string
	attempts                           []int32
	nextRetryAt                        []int64
	externalID                         []string
	deliveredAt                        []int64
	errorCode, errorMessage            []string
	retryAfter                         []int64
	lastError                          []string
	leaseID, leaseHolder               []*string
	leaseUntil                         []*int64
	unread                             []int64
	conv                               []bool
	legacy                             []string
}

func (c *recordColumns) add(rec *model.Record) error {
	tags, err := jsonText(len(rec.Tags) > 0, rec.Tags)
	if err != nil {
		return err
	}
	route, err := jsonText(rec.Route != nil, rec.Route)
	if err != nil {
		return err
	}
	var leaseID, holder *string
	var until *int64
	if l := rec.Lease; l != nil {
		leaseID, holder, until = &l.ID, &l.Holder, &l.ExpiresAtMS
	}
	var unread int64
	if rec.State.IsUnread() {
		unread = 1
	}
	d := &rec.Delivery
	c.recordID = append(c.recordID, rec.RecordID)
	c.owner = append(c.owner, rec.Owner)
	c.box = append(c.box, string(rec.BoxKind))
	c.msgID = append(c.msgID, rec.MsgID)
	c.state = append(c.state, string(rec.State))
	c.createdAt = append(c.createdAt, rec.CreatedAtMS)
	c.updatedAt = append(c.updatedAt, rec.UpdatedAtMS)
	c.sortKey = append(c.sortKey, rec.SortKey)
	c.threadKey = append(c.threadKey, rec.ThreadKey)
	c.tags = append(c.tags, textPtr(tags))
	c.route = append(c.route, textPtr(route))
	c.attempts = append(c.attempts, int32(d.Attempts))
	c.nextRetryAt = append(c.nextRetryAt, d.NextRetryAtMS)
	c.externalID = append(c.externalID, d.ExternalMsgID)
	c.deliveredAt = append(c.deliveredAt, d.DeliveredAtMS)
	c.errorCode = append(c.errorCode, d.ErrorCode)
	c.errorMessage = append(c.errorMessage, d.ErrorMessage)
	c.retryAfter = append(c.retryAfter, d.RetryAfterMS)
	c.lastError = append(c.lastError, d.LastError)
	c.leaseID = append(c.leaseID, leaseID)
	c.leaseHolder = append(c.leaseHolder, holder)
	c.leaseUntil = append(c.leaseUntil, until)
	c.unread = append(c.unread, unread)
	c.conv = append(c.conv, rec.BoxKind.HasConversations() && rec.ThreadKey != "")
	c.legacy = append(c.legacy, legacyID(rec.RecordID))
	return nil
}

// textPtr turns jsonText's result into a nullable array element.
func textPtr(v any) *string {
	if s, ok := v.(string); ok {
		return &s
	}
	return nil
}

// queueRecords queues everything inserting recs takes once their boxes are
// locked (lockBoxes): sqlInsertRecords, or one sqlInsertRecord per record
// for a small plan (bulkMin), and the notification of their
// boxes, which PostgreSQL delivers at commit, so other nodes' long polls
// and streams wake up once the records are visible. It defaults the
// records' timestamps as the SQLite driver does. Apply and AdvanceConsumer
// share it; readRecords reads its results.
func (s *Store) queueRecords(b *pgx.Batch, recs []model.Record, nowMS int64) error {
	var c recordColumns
	for i := range recs {
		rec := &recs[i]
		if rec.CreatedAtMS == 0 {
			rec.CreatedAtMS = nowMS
		}
		if rec.UpdatedAtMS == 0 {
			rec.UpdatedAtMS = rec.CreatedAtMS
		}
		if err := c.add(rec); err != nil {
			return err
		}
	}
	if len(recs) > 0 && len(recs) < bulkMin {
		for i := range recs {
			if err := queueInsertRecord(b, &recs[i], nowMS); err != nil {
				return err
			}
		}
	} else if len(recs) > 0 {
		b.Queue(sqlInsertRecords, c.recordID, c.owner, c.box, c.msgID, c.state,
			c.createdAt, c.updatedAt, c.sortKey, c.threadKey, c.tags, c.route,
			c.attempts, c.nextRetryAt, c.externalID, c.deliveredAt, c.errorCode,
			c.errorMessage, c.retryAfter, c.lastError, c.leaseID, c.leaseHolder, c.leaseUntil,
			c.unread, c.conv, nowMS, c.legacy)
	}
	b.Queue(sqlNotify, s.channel, changedBoxes(recs))
	return nil
}

// readRecords reads the results queueRecords queued, setting each new
// record's seq and sorting recs into res.Created and res.Existing (in plan
// order both).
func readRecords(br pgx.BatchResults, recs []model.Record, res *store.ApplyResult) error {
	if len(recs) > 0 && len(recs) < bulkMin {
		for i := range recs {
			err := br.QueryRow().Scan(&recs[i].Seq)
			if errors.Is(err, pgx.ErrNoRows) {
				res.Existing = append(res.Existing, recs[i].RecordID)
				continue
			}
			if err != nil {
				return fail("insert record "+recs[i].RecordID, err)
			}
			res.Created = append(res.Created, recs[i])
		}
	} else if len(recs) > 0 {
		rows, err := br.Query()
		if err != nil {
			return fail("insert records", err)
		}
		seqs := make(map[string]int64, len(recs))
		for rows.Next() {
			var id string
			var seq int64
			if err := rows.Scan(&id, &seq); err != nil {
				rows.Close()
				return fail("insert records", err)
			}
			seqs[id] = seq
		}
		if err := rows.Err(); err != nil {
			return fail("insert records", err)
		}
		for i := range recs {
			seq, ok := seqs[recs[i].RecordID]
			if !ok {
				res.Existing = append(res.Existing, recs[i].RecordID)
				continue
			}
			delete(seqs, recs[i].RecordID) // a repeat later in recs is existing
			recs[i].Seq = seq
			res.Created = append(res.Created, recs[i])
		}
	}
	if _, err := br.Exec(); err != nil {
		return fail("notify", err)
	}
	return nil
}

// queueInsertRecord queues rec's insert, defaulting its timestamps as the
// SQLite driver does.
func queueInsertRecord(b *pgx.Batch, rec *model.Record, nowMS int64) error {
	if rec.CreatedAtMS == 0 {
		rec.CreatedAtMS = nowMS
	}
	if rec.UpdatedAtMS == 0 {
		rec.UpdatedAtMS = rec.CreatedAtMS
	}
	tags, err := jsonText(len(rec.Tags) > 0, rec.Tags)
	if err != nil {
		return err
	}
	route, err := jsonText(rec.Route != nil, rec.Route)
	if err != nil {
		return err
	}
	var leaseID, holder, until any
	if rec.Lease != nil {
		leaseID, holder, until = rec.Lease.ID, rec.Lease.Holder, rec.Lease.ExpiresAtMS
	}
	var unread int64
	if rec.State.IsUnread() {
		unread = 1
	}
	d := &rec.Delivery
	b.Queue(sqlInsertRecord, rec.RecordID, rec.Owner, string(rec.BoxKind), rec.MsgID,
		string(rec.State), rec.CreatedAtMS, rec.UpdatedAtMS, rec.SortKey, rec.ThreadKey, tags, route,
		d.Attempts, d.NextRetryAtMS, d.ExternalMsgID, d.DeliveredAtMS, d.ErrorCode,
		d.ErrorMessage, d.RetryAfterMS, d.LastError, leaseID, holder, until,
		nowMS, unread, rec.BoxKind.HasConversations() && rec.ThreadKey != "", legacyID(rec.RecordID))
	return nil
}

// legacyID is the id a record had before ids carried their message's
// locator (model.LegacyRecordID): the id itself for one without a locator,
// so a lookup of both finds the record under either.
func legacyID(recordID string) string {
	if l, ok := model.LegacyRecordID(recordID); ok {
		return l
	}
	return recordID
}
