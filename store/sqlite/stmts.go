package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/msgcenter/msgcenter/model"
)

// recordCols is the column list scanRecord expects, in order.
const recordCols = `record_id, owner, box, msg_id, state, seq, created_at_ms, updated_at_ms,
	sort_key, thread_key, tags, route, attempts, next_retry_at_ms, external_msg_id,
	delivered_at_ms, error_code, error_message, retry_after_ms, last_error,
	lease_id, lease_holder, lease_until_ms`

// A waiting claimer's reads (records_read.go); both walk records_box_state.
const (
	sqlClaimable = `SELECT record_id FROM records
		WHERE owner = ? AND box = ? AND state = ? AND visible_at_ms <= ? ORDER BY seq LIMIT ?`
	sqlNextVisible = `SELECT MIN(visible_at_ms) FROM records
		WHERE owner = ? AND box = ? AND state = ? AND visible_at_ms > ?`
)

// stmts are the statements of the hot paths, prepared once. database/sql
// keeps each one prepared per connection, and Tx.StmtContext reuses the
// writer connection's copy, so a write pays no parse cost.
type stmts struct {
	insertMsg      *sql.Stmt
	refreshMsg     *sql.Stmt
	msgRefs        *sql.Stmt
	fileID         *sql.Stmt
	insertIdem     *sql.Stmt
	getIdem        *sql.Stmt
	insertEvent    *sql.Stmt
	convUnread     *sql.Stmt
	claim          *sql.Stmt
	update         *sql.Stmt
	recordState    *sql.Stmt
	consumeSched   *sql.Stmt
	consumeSchedTo *sql.Stmt
	consumerW      *sql.Stmt
	advanceCAS     *sql.Stmt
	ackConsumer    *sql.Stmt
	lastSeqW       *sql.Stmt
	putReceipt     *sql.Stmt // a group's read state is a receipt per reader
	changeReceipt  *sql.Stmt // a member's ack as its read (store.Update.Receipt)
	getReceiptW    *sql.Stmt
	// group commit's per-write savepoint (commit.go)
	savepoint, rollbackTo, release *sql.Stmt
	bulk                           bulkStmts // record inserts, a chunk per statement (bulk.go)

	getRecord   *sql.Stmt // reader
	getMessage  *sql.Stmt // reader
	getConsumer *sql.Stmt // reader
	lastSeq     *sql.Stmt // reader
	claimable   *sql.Stmt // reader: Claimable's committed candidates
	nextVisible *sql.Stmt // reader
}

func (st *stmts) prepare(ctx context.Context, w, r *sql.DB) error {
	ws := []struct {
		p *(*sql.Stmt)
		q string
	}{
		// A new message gets the next msg_ref; RETURNING answers only
		// then, so no row back means it was stored already (refreshMsg).
		{&st.insertMsg, `INSERT INTO messages (msg_id, body, created_at_ms) VALUES (?, ?, ?)
			ON CONFLICT (msg_id) DO NOTHING RETURNING msg_ref`},
		// A body stored again keeps its bytes but takes the later time:
		// retention keeps bodies stored after its MessagesBeforeMS. A
		// message stored without its body (empty) gets it now; given
		// without one, nothing changes.
		{&st.refreshMsg, `UPDATE messages SET
				created_at_ms = CASE WHEN length(?2) > 0 THEN max(created_at_ms, ?3) ELSE created_at_ms END,
				body = CASE WHEN length(body) = 0 THEN ?2 ELSE body END
			WHERE msg_id = ?1 RETURNING msg_ref`},
		{&st.msgRefs, `SELECT msg_id, msg_ref FROM messages WHERE msg_id IN (SELECT value FROM json_each(?))`},
		{&st.fileID, `INSERT INTO record_ids (record_id, rid) SELECT record_id, rid FROM records
			WHERE msg_ref = ?1 AND record_id = ?2`},
		{&st.insertIdem, `INSERT INTO idempotency (scope, key, msg_id, created_at_ms, answer) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (scope, key) DO NOTHING`},
		{&st.getIdem, `SELECT msg_id, sched_id, due_at_ms, answer FROM idempotency WHERE scope = ? AND key = ?`},
		{&st.insertEvent, `INSERT INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		// Clamped at zero so a count can never go negative, even if records
		// predate the conversation row.
		{&st.convUnread, `UPDATE conversations SET unread_count = max(unread_count + ?, 0)
			WHERE owner = ? AND thread_key = ?`},
		// One statement picks and takes the record, so the choice and the
		// change cannot be separated by another writer.
		{&st.claim, `UPDATE records SET state = ?1, lease_id = ?2, lease_holder = ?3,
				lease_until_ms = ?4, updated_at_ms = ?5
			WHERE rowid = (SELECT rowid FROM records
				WHERE owner = ?6 AND box = ?7 AND state = ?8 AND visible_at_ms <= ?5
				ORDER BY seq LIMIT 1)
			RETURNING ` + recordCols},
		{&st.update, `UPDATE records SET state = ?1, attempts = ?2, next_retry_at_ms = ?3,
				external_msg_id = ?4, delivered_at_ms = ?5, error_code = ?6, error_message = ?7,
				retry_after_ms = ?8, last_error = ?9, visible_at_ms = ?10, lease_id = ?11,
				lease_holder = ?12, lease_until_ms = ?13, updated_at_ms = ?14
			WHERE rid = ` + ridParams(15, 18) + ` AND state = ?16
				AND (?17 = '' OR (lease_id = ?17 AND lease_until_ms IS NOT NULL))
			RETURNING ` + recordCols},
		{&st.recordState, `SELECT state, COALESCE(lease_id, '') FROM records WHERE rid = ` + ridParams(1, 2)},
		{&st.consumeSched, `DELETE FROM scheduled WHERE sched_id = ?`},
		{&st.consumeSchedTo, `DELETE FROM scheduled_recipients WHERE sched_id = ?`},
		{&st.consumerW, consumerByKey},
		// The compare-and-set of AdvanceConsumer: it matches only while
		// source_seq is still where the caller examined the source from.
		{&st.advanceCAS, `UPDATE consumers SET source_seq = ?1, updated_at_ms = ?2
			WHERE owner = ?3 AND name = ?4 AND source_seq = ?5 AND created_at_ms = ?6`},
		// Only forward: an older or repeated ack changes nothing.
		{&st.ackConsumer, `UPDATE consumers SET acked_seq = ?1, updated_at_ms = ?2
			WHERE owner = ?3 AND name = ?4 AND acked_seq < ?1`},
		{&st.lastSeqW, boxLastSeq},
		{&st.putReceipt, `INSERT INTO receipts (` + receiptCols + `) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (msg_id, reader) DO UPDATE SET
				iss = excluded.iss, group_id = excluded.group_id, at_ms = excluded.at_ms,
				status = excluded.status, reason = excluded.reason
			WHERE excluded.at_ms >= receipts.at_ms`},
		{&st.changeReceipt, `INSERT INTO receipts (` + receiptCols + `) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (msg_id, reader) DO UPDATE SET
				iss = excluded.iss, group_id = excluded.group_id, at_ms = excluded.at_ms,
				status = excluded.status, reason = excluded.reason
			WHERE excluded.at_ms >= receipts.at_ms
				AND receipts.status IN ('` + string(model.ReceiptUnread) + `', '` + string(model.ReceiptReading) + `')
				AND (receipts.status, receipts.reason) <> (excluded.status, excluded.reason)
			RETURNING 1`},
		{&st.getReceiptW, "SELECT " + receiptCols + " FROM receipts WHERE msg_id = ? AND reader = ?"},
		{&st.savepoint, "SAVEPOINT w"},
		{&st.rollbackTo, "ROLLBACK TO w"},
		{&st.release, "RELEASE w"},
	}
	for _, s := range ws {
		p, err := w.PrepareContext(ctx, s.q)
		if err != nil {
			return fmt.Errorf("sqlite: prepare %q: %w", s.q, err)
		}
		*s.p = p
	}
	if err := st.bulk.prepare(ctx, w); err != nil {
		return err
	}
	rs := []struct {
		p *(*sql.Stmt)
		q string
	}{
		{&st.getRecord, `SELECT ` + recordCols + ` FROM records WHERE rid = ` + ridParams(1, 2)},
		// An empty body is a message stored without one: not found.
		{&st.getMessage, `SELECT body FROM messages WHERE msg_id = ? AND length(body) > 0`},
		{&st.getConsumer, consumerByKey},
		{&st.lastSeq, boxLastSeq},
		{&st.claimable, sqlClaimable},
		{&st.nextVisible, sqlNextVisible},
	}
	for _, s := range rs {
		p, err := r.PrepareContext(ctx, s.q)
		if err != nil {
			return fmt.Errorf("sqlite: prepare %q: %w", s.q, err)
		}
		*s.p = p
	}
	return nil
}

func (st *stmts) close() {
	st.bulk.close()
	for _, p := range []*sql.Stmt{st.insertMsg, st.refreshMsg, st.msgRefs, st.fileID, st.insertIdem, st.getIdem,
		st.insertEvent, st.convUnread, st.claim, st.update,
		st.recordState, st.consumeSched, st.consumeSchedTo, st.consumerW, st.advanceCAS,
		st.ackConsumer, st.lastSeqW, st.putReceipt, st.changeReceipt, st.getReceiptW, st.savepoint, st.rollbackTo, st.release,
		st.getRecord, st.getMessage, st.getConsumer, st.lastSeq, st.claimable, st.nextVisible} {
		if p != nil {
			p.Close()
		}
	}
}
