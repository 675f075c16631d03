package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Retention (store.Consumers.Purge). Every step runs under READ COMMITTED
// against writers that do not wait for it and that it does not wait for:
// records and bodies are taken FOR UPDATE SKIP LOCKED, so a record being
// claimed or updated, or a body being reused, is simply left for a later
// pass.

// terminalStates is the SQL list of the states model.State.IsTerminal
// accepts, spelled exactly as in the records_terminal partial index of
// migration 0002: the planner uses the index only for a query that repeats
// its predicate (TestTerminalStates checks both).
const terminalStates = `'READED', 'SENT', 'DEAD', 'ARCHIVED', 'DELETED'`

// noAgeLimit is an age bound that excludes no body.
const noAgeLimit = math.MaxInt64

// familyExpr is a record's box family, as model.BoxKind.Family computes it.
var familyExpr = `CASE WHEN starts_with(r.box, '` + consumerBoxPrefix + `') THEN '` +
	string(model.ConsumerFamily) + `' ELSE r.box END`

// unexamined is true for a record some consumer of its box has not
// examined yet (its source_seq is below the record's seq): retention keeps
// it. It is part of each deleting statement, so a consumer is either in
// that statement's snapshot or committed after it: source_seq only grows,
// and a consumer created meanwhile starts from the oldest record kept.
const unexamined = `EXISTS (SELECT 1 FROM consumers c
	WHERE c.source_owner = r.owner AND c.source_box = r.box AND c.source_seq < r.seq)`

// sqlPurgeTerminal deletes at most $4 terminal records older than their
// family's cutoff, oldest first along records_terminal. $1 and $2 are the
// families and their cutoffs (parallel arrays); a family that is not in $1
// has a NULL cutoff, and nothing is below NULL: its records stay. $3 is the
// largest cutoff, which bounds the index scan.
var sqlPurgeTerminal = `DELETE FROM records WHERE record_id IN (
		SELECT r.record_id FROM records r
		WHERE r.state IN (` + terminalStates + `) AND r.updated_at_ms < $3::bigint
			AND r.updated_at_ms < ($2::bigint[])[array_position($1::text[], ` + familyExpr + `)]
			AND NOT ` + unexamined + `
		ORDER BY r.updated_at_ms
		LIMIT $4
		FOR UPDATE SKIP LOCKED)
	RETURNING box, msg_id, owner, thread_key, record_id`

// sqlPurgeGroupLog deletes at most $2 records of groups' logs
// (GROUP_INBOX) last changed before $1, whatever their state unless held,
// oldest first along records_group_log.
var sqlPurgeGroupLog = `DELETE FROM records WHERE record_id IN (
		SELECT r.record_id FROM records r
		WHERE r.box = '` + string(model.GroupInbox) + `' AND r.updated_at_ms < $1
			AND r.state <> '` + string(model.HeldState(model.GroupInbox)) + `'
			AND NOT ` + unexamined + `
		ORDER BY r.updated_at_ms
		LIMIT $2
		FOR UPDATE SKIP LOCKED)
	RETURNING box, msg_id, owner, thread_key, record_id, state`

// deleteGroupLog deletes what sqlPurgeGroupLog selects and takes the
// unread ones out of their conversations' counts (as deltas, which lock
// nothing: migration 0005): unlike finished records, these may still
// count.
func deleteGroupLog(ctx context.Context, tx pgx.Tx, beforeMS int64, limit int) (goneRecords, error) {
	rows, err := tx.Query(ctx, sqlPurgeGroupLog, beforeMS, limit)
	if err != nil {
		return nil, err
	}
	var out goneRecords
	var owners, threads []string
	var deltas []int64
	at := map[[2]string]int{}
	var box, msg, owner, thread, recordID, state string
	_, err = pgx.ForEachRow(rows, []any{&box, &msg, &owner, &thread, &recordID, &state}, func() error {
		out = append(out, goneRecord{box: model.BoxKind(box), msgID: msg, owner: owner, thread: thread, recordID: recordID})
		if thread == "" || !model.State(state).IsUnread() {
			return nil
		}
		k := [2]string{owner, thread}
		i, ok := at[k]
		if !ok {
			i = len(owners)
			at[k] = i
			owners, threads, deltas = append(owners, owner), append(threads, thread), append(deltas, 0)
		}
		deltas[i]--
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(owners) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO conversation_unread (owner, thread_key, delta)
			SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`, owners, threads, deltas); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sqlPurgeAcked deletes at most $2 records of consumers' boxes at or below
// their consumer's cursor that are not in the queue's hands
// (store.AckedPurgeable).
var sqlPurgeAcked = `DELETE FROM records WHERE record_id IN (
		SELECT r.record_id FROM consumers k
		JOIN records r ON r.owner = k.owner AND r.box = $1::text || k.name AND r.seq <= k.acked_seq
		WHERE k.acked_seq > 0 AND ` + store.AckedPurgeable("r") + `
			AND NOT ` + unexamined + `
		LIMIT $2
		FOR UPDATE OF r SKIP LOCKED)
	RETURNING box, msg_id, owner, thread_key, record_id`

// sqlPurgeKeys deletes at most $2 idempotency keys bound before $1,
// oldest first along idempotency_age.
const sqlPurgeKeys = `DELETE FROM idempotency WHERE (scope, key) IN (
	SELECT scope, key FROM idempotency WHERE created_at_ms < $1 ORDER BY created_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)`

// sqlPurgeMailParts deletes at most $2 flushed parts (store.Mail) stored
// before $1, which only told a part dispatched again from a new one.
const sqlPurgeMailParts = `DELETE FROM mail_parts WHERE (mail_key, msg_id) IN (
	SELECT mail_key, msg_id FROM mail_parts WHERE bucket_id IS NULL AND created_at_ms < $1
	ORDER BY created_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)`

// sqlPurgeEvents deletes at most $2 events older than $1, oldest ids first.
const sqlPurgeEvents = `DELETE FROM events WHERE event_id IN (
	SELECT event_id FROM events WHERE at_ms < $1 ORDER BY event_id LIMIT $2 FOR UPDATE SKIP LOCKED)`

// Purge is one retention pass in one transaction: records (terminal past
// their family's cutoff, then groups' logs past p.GroupLogBeforeMS, then,
// with p.Acked, acknowledged consumer records), at most p.Limit of them
// (defaultLimit when unset); the bodies nothing refers to any more, of
// those records and of earlier ones that were too young to go then
// (purgeBodies), with their receipts; then at most p.Limit events older
// than p.EventsBeforeMS and as many idempotency keys bound before
// p.KeysBeforeMS (none when 0). More is set when any limit was reached. A retention.purged event with
// the counts as JSON is appended when anything went.
func (s *Store) Purge(ctx context.Context, p store.PurgeParams) (store.PurgeResult, error) {
	limit := limitOr(p.Limit, defaultLimit)
	fams := make([]string, 0, len(p.TerminalBeforeMS))
	cuts := make([]int64, 0, len(p.TerminalBeforeMS))
	var maxCut int64 = math.MinInt64
	for f, ms := range p.TerminalBeforeMS {
		fams = append(fams, string(f))
		cuts = append(cuts, ms)
		maxCut = max(maxCut, ms)
	}
	var res store.PurgeResult
	defer func() {
		if res.Messages > 0 {
			s.bodies.ForgetAll() // and inside the transaction (package bodies)
		}
	}()
	var gone goneRecords
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = store.PurgeResult{}
		gone = nil
		if len(fams) > 0 {
			rows, err := tx.Query(ctx, sqlPurgeTerminal, fams, cuts, maxCut, limit)
			if err != nil {
				return fail("purge terminal records", err)
			}
			if gone, err = collectGone(rows); err != nil {
				return fail("purge terminal records", err)
			}
		}
		if p.GroupLogBeforeMS > 0 && len(gone) < limit {
			g, err := deleteGroupLog(ctx, tx, p.GroupLogBeforeMS, limit-len(gone))
			if err != nil {
				return fail("purge group logs", err)
			}
			gone = append(gone, g...)
		}
		if p.Acked && len(gone) < limit {
			rows, err := tx.Query(ctx, sqlPurgeAcked, consumerBoxPrefix, limit-len(gone))
			if err != nil {
				return fail("purge acked records", err)
			}
			g, err := collectGone(rows)
			if err != nil {
				return fail("purge acked records", err)
			}
			gone = append(gone, g...)
		}
		if len(gone) > 0 {
			res.Records = map[model.BoxKind]int64{}
			for _, r := range gone {
				res.Records[r.box.Family()]++
			}
		}
		var more bool
		var err error
		if res.Messages, more, err = purgeBodies(ctx, tx, gone.msgIDs(), p.MessagesBeforeMS, limit); err != nil {
			return err
		}
		res.More = len(gone) >= limit || more
		if res.Messages > 0 {
			s.bodies.ForgetAll() // and again after the commit
		}
		if p.EventsBeforeMS > 0 {
			tag, err := tx.Exec(ctx, sqlPurgeEvents, p.EventsBeforeMS, limit)
			if err != nil {
				return fail("purge events", err)
			}
			res.Events = tag.RowsAffected()
			res.More = res.More || res.Events >= int64(limit)
		}
		if p.KeysBeforeMS > 0 {
			tag, err := tx.Exec(ctx, sqlPurgeKeys, p.KeysBeforeMS, limit)
			if err != nil {
				return fail("purge idempotency keys", err)
			}
			res.Keys = tag.RowsAffected()
			res.More = res.More || res.Keys >= int64(limit)
			if tag, err = tx.Exec(ctx, sqlPurgeMailParts, p.KeysBeforeMS, limit); err != nil {
				return fail("purge flushed mail parts", err)
			}
			res.MailParts = tag.RowsAffected()
			res.More = res.More || res.MailParts >= int64(limit)
		}
		if res.Empty() {
			return nil
		}
		detail, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("postgres: purge: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO events (type, at_ms, detail) VALUES ($1, $2, $3)`,
			model.EventPurged, p.NowMS, string(detail)); err != nil {
			return fail("purge: append event", err)
		}
		return nil
	})
	if err != nil {
		return store.PurgeResult{}, err
	}
	s.forgetInConversations(ctx, gone)
	return res, nil
}

// goneRecord is what retention needs of a deleted record.
type goneRecord struct {
	box   model.BoxKind
	msgID string
	// owner, thread and recordID find the conversation that may name it.
	owner, thread, recordID string
}

type goneRecords []goneRecord

// msgIDs lists the distinct message ids of the records, sorted.
func (g goneRecords) msgIDs() []string {
	ids := make([]string, 0, len(g))
	for _, r := range g {
		ids = append(ids, r.msgID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// collectGone reads the rows of a DELETE ... RETURNING box, msg_id,
// owner, thread_key, record_id.
func collectGone(rows pgx.Rows) (goneRecords, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (goneRecord, error) {
		var g goneRecord
		var box string
		err := row.Scan(&box, &g.msgID, &g.owner, &g.thread, &g.recordID)
		g.box = model.BoxKind(box)
		return g, err
	})
}

// sqlForgetInConversations clears the last message of the conversations
// that name a record that is gone ($1, $2, $3: owners, threads, record
// ids). SKIP LOCKED: a conversation a send holds is being pointed at the
// send's new record, and retention must not wait for writers.
const sqlForgetInConversations = `UPDATE conversations SET last_record_id = '', last_msg_id = ''
	WHERE (owner, thread_key) IN (
		SELECT c.owner, c.thread_key FROM conversations c
		JOIN unnest($1::text[], $2::text[], $3::text[]) AS g(owner, thread_key, record_id)
			ON c.owner = g.owner AND c.thread_key = g.thread_key AND c.last_record_id = g.record_id
		FOR UPDATE OF c SKIP LOCKED)`

// forgetInConversations runs sqlForgetInConversations for the records
// retention deleted, after its transaction: a conversation must not send
// its reader to a record (and, usually, a message) that no longer exists.
// The thread, its last seq, unread count and time stay; an empty
// last_record_id says the last message was removed. Its own statement, so
// that the rows it locks are held for no longer than it runs; a failure
// leaves names of deleted records, which is what it would prevent, so it
// is logged, not returned.
func (s *Store) forgetInConversations(ctx context.Context, gone goneRecords) {
	var owners, threads, ids []string
	for _, g := range gone {
		if g.thread != "" && g.box.HasConversations() {
			owners, threads, ids = append(owners, g.owner), append(threads, g.thread), append(ids, g.recordID)
		}
	}
	if len(ids) == 0 {
		return
	}
	if _, err := s.pool.Exec(ctx, sqlForgetInConversations, owners, threads, ids); err != nil {
		s.log.Warn("postgres: purge: conversations keep naming records retention deleted", "records", len(ids), "err", err)
	}
}

// sqlLockOrphans locks, among $1, the bodies that look unreferenced and
// were last stored or reused before $2. SKIP LOCKED passes over a body an
// Apply or Schedule in flight has upserted: that writer holds the row
// until it commits, and is about to refer to it. When a writer touched the
// row after this statement's snapshot and has committed, the lock is taken
// on the row's newest version, whose WHERE is re-checked (EvalPlanQual):
// a refreshed ref_at_ms drops it.
const sqlLockOrphans = `SELECT msg_id FROM messages m
	WHERE m.msg_id = ANY($1::text[]) AND GREATEST(m.created_at_ms, m.ref_at_ms) < $2
		AND NOT EXISTS (SELECT 1 FROM records r WHERE r.msg_id = m.msg_id)
		AND NOT EXISTS (SELECT 1 FROM scheduled s WHERE s.msg_id = m.msg_id)
	ORDER BY m.msg_id
	FOR UPDATE SKIP LOCKED`

// sqlDeleteOrphans deletes the locked bodies that still have no record and
// no scheduled entry, and their receipts. Being a new statement, it has a
// new snapshot, taken after sqlLockOrphans got its locks: it sees the
// records of every writer that touched one of these bodies before us (even
// one whose upsert left ref_at_ms as it was), and a writer that comes now
// waits for our commit and then stores the body anew.
const sqlDeleteOrphans = `WITH m AS (
		DELETE FROM messages m WHERE m.msg_id = ANY($1::text[])
			AND NOT EXISTS (SELECT 1 FROM records r WHERE r.msg_id = m.msg_id)
			AND NOT EXISTS (SELECT 1 FROM scheduled s WHERE s.msg_id = m.msg_id)
		RETURNING msg_id
	), rc AS (
		DELETE FROM receipts WHERE msg_id IN (SELECT msg_id FROM m)
	)
	SELECT count(*) FROM m`

// sqlTakeDueOrphans takes from orphan_bodies at most $2 ids whose body
// was last stored or reused before $1, or is gone already. SKIP LOCKED:
// another node's pass may be taking the same ones.
const sqlTakeDueOrphans = `DELETE FROM orphan_bodies WHERE msg_id IN (
		SELECT o.msg_id FROM orphan_bodies o LEFT JOIN messages m ON m.msg_id = o.msg_id
		WHERE m.msg_id IS NULL OR GREATEST(m.created_at_ms, m.ref_at_ms) < $1
		LIMIT $2
		FOR UPDATE OF o SKIP LOCKED)
	RETURNING msg_id`

// sqlKeepOrphans puts in orphan_bodies, among $1, the bodies still there
// that nothing refers to: those stored or reused too recently to go now,
// and those sqlLockOrphans skipped because a writer held them (a writer
// that rolls back leaves them unreferenced). A later pass takes them once
// they are old enough; one a writer refers to meanwhile stays then.
const sqlKeepOrphans = `INSERT INTO orphan_bodies (msg_id)
	SELECT m.msg_id FROM messages m
	WHERE m.msg_id = ANY($1::text[])
		AND NOT EXISTS (SELECT 1 FROM records r WHERE r.msg_id = m.msg_id)
		AND NOT EXISTS (SELECT 1 FROM scheduled s WHERE s.msg_id = m.msg_id)
	ON CONFLICT (msg_id) DO NOTHING`

// purgeBodies deletes the bodies nothing refers to among ids (the messages
// of the records this pass deleted) and among those waiting in
// orphan_bodies whose time has come; those left that nothing refers to
// (too young, or held by a writer) wait there for a later pass. It says
// how many went and whether more waiting ones are due than one pass takes.
func purgeBodies(ctx context.Context, tx pgx.Tx, ids []string, beforeMS int64, limit int) (int64, bool, error) {
	rows, err := tx.Query(ctx, sqlTakeDueOrphans, beforeMS, limit)
	if err != nil {
		return 0, false, fail("purge waiting bodies", err)
	}
	due, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, false, fail("purge waiting bodies", err)
	}
	all := ids
	if len(due) > 0 {
		all = append(slices.Clone(ids), due...)
		slices.Sort(all)
		all = slices.Compact(all)
	}
	n, err := deleteOrphanBodies(ctx, tx, all, beforeMS)
	if err != nil {
		return 0, false, err
	}
	if len(all) > 0 {
		if _, err := tx.Exec(ctx, sqlKeepOrphans, all); err != nil {
			return 0, false, fail("keep bodies for later", err)
		}
	}
	return n, len(due) >= limit, nil
}

// deleteOrphanBodies deletes, among ids, the bodies that no record and no
// scheduled entry refers to and that were last stored before beforeMS,
// with the receipts of those messages, and returns how many bodies went.
// Two statements, see sqlLockOrphans and sqlDeleteOrphans: one statement
// would check "no record" in a snapshot taken before it waited for, or
// skipped, a concurrent writer.
func deleteOrphanBodies(ctx context.Context, tx pgx.Tx, ids []string, beforeMS int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	rows, err := tx.Query(ctx, sqlLockOrphans, ids, beforeMS)
	if err != nil {
		return 0, fail("purge messages", err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fail("purge messages", err)
	}
	if len(locked) == 0 {
		return 0, nil
	}
	var n int64
	if err := tx.QueryRow(ctx, sqlDeleteOrphans, locked).Scan(&n); err != nil {
		return 0, fail("purge messages", err)
	}
	return n, nil
}
