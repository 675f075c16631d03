package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// terminalStates is the SQL list of the states model.State.IsTerminal
// accepts. It must be spelled exactly as in the records_retention partial
// index (migrations 0002 and 0005), or the planner cannot use that index
// (a driver test checks both).
const terminalStates = `'READED', 'SENT', 'DEAD', 'ARCHIVED', 'DELETED'`

// maxMS is a time bound that excludes nothing.
const maxMS = math.MaxInt64

// familyExpr is a record's box family in SQL, as model.BoxKind.Family
// computes it: a consumer's box ("CONSUMER:name", the prefix in this case)
// belongs to the CONSUMER family. GLOB, unlike LIKE, is case-sensitive.
const familyExpr = `CASE WHEN r.box GLOB 'CONSUMER:*' THEN 'CONSUMER' ELSE r.box END`

// unexamined is true for a record that some consumer of its box has not
// examined yet (its SourceSeq is below the record's seq): retention keeps
// it. It is part of each deleting statement, so no consumer can appear
// between the check and the delete.
const unexamined = `EXISTS (SELECT 1 FROM consumers c
	WHERE c.source_owner = r.owner AND c.source_box = r.box AND c.source_seq < r.seq)`

// goneRecord is what the store needs of a deleted record.
type goneRecord struct {
	box   model.BoxKind
	msgID string
	// owner, thread and recordID find the conversation that may name it.
	owner, thread, recordID string
}

type goneRecords []goneRecord

// msgIDs lists the distinct message ids of the records.
func (g goneRecords) msgIDs() []string {
	ids := make([]string, 0, len(g))
	for _, r := range g {
		ids = append(ids, r.msgID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// deleteRecords runs a DELETE … RETURNING box, msg_id, owner, thread_key,
// record_id and collects the rows.
func deleteRecords(ctx context.Context, tx *sql.Tx, q string, args ...any) (goneRecords, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out goneRecords
	for rows.Next() {
		var g goneRecord
		var box string
		if err := rows.Scan(&box, &g.msgID, &g.owner, &g.thread, &g.recordID); err != nil {
			return nil, err
		}
		g.box = model.BoxKind(box)
		out = append(out, g)
	}
	return out, rows.Err()
}

// forgetInConversations clears the last message of the conversations that
// name a record that is gone: a conversation must not send its reader to
// a record (and, usually, a message) that no longer exists. The thread, its
// last seq, unread count and time stay; an empty last_record_id says the
// last message was removed.
func forgetInConversations(ctx context.Context, tx *sql.Tx, gone goneRecords) error {
	var stmt *sql.Stmt
	for _, g := range gone {
		if g.thread == "" || !g.box.HasConversations() {
			continue
		}
		if stmt == nil {
			var err error
			if stmt, err = tx.PrepareContext(ctx, `UPDATE conversations SET last_record_id = '', last_msg_id = ''
				WHERE owner = ? AND thread_key = ? AND last_record_id = ?`); err != nil {
				return err
			}
			defer stmt.Close()
		}
		if _, err := stmt.ExecContext(ctx, g.owner, g.thread, g.recordID); err != nil {
			return err
		}
	}
	return nil
}

// deleteOrphanBodies deletes, among ids, the bodies that no record and no
// scheduled entry refers to and that were last stored before beforeMS,
// with the receipts of those messages. It returns how many bodies went.
func deleteOrphanBodies(ctx context.Context, tx *sql.Tx, ids []string, beforeMS int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge messages: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `DELETE FROM messages
		WHERE msg_id IN (SELECT value FROM json_each(?1)) AND created_at_ms < ?2
			AND NOT EXISTS (SELECT 1 FROM records r WHERE r.msg_ref = messages.msg_ref)
			AND NOT EXISTS (SELECT 1 FROM scheduled s WHERE s.msg_id = messages.msg_id)
		RETURNING msg_id`, string(list), beforeMS)
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge messages: %w", err)
	}
	var gone []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("sqlite: purge messages: %w", err)
		}
		gone = append(gone, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("sqlite: purge messages: %w", err)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if list, err = json.Marshal(gone); err != nil {
		return 0, fmt.Errorf("sqlite: purge receipts: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM receipts WHERE msg_id IN (SELECT value FROM json_each(?))`,
		string(list)); err != nil {
		return 0, fmt.Errorf("sqlite: purge receipts: %w", err)
	}
	return int64(len(gone)), nil
}

// takeDueOrphans takes from orphan_bodies at most limit ids whose body was
// last stored before beforeMS, or is gone already.
func takeDueOrphans(ctx context.Context, tx *sql.Tx, beforeMS int64, limit int) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `DELETE FROM orphan_bodies WHERE msg_id IN (
			SELECT o.msg_id FROM orphan_bodies o LEFT JOIN messages m ON m.msg_id = o.msg_id
			WHERE m.msg_id IS NULL OR m.created_at_ms < ?1 LIMIT ?2)
		RETURNING msg_id`, beforeMS, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: purge waiting bodies: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: purge waiting bodies: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// keepOrphans puts in orphan_bodies, among ids, the bodies still there
// that nothing refers to, which deleteOrphanBodies kept for being stored
// too recently: a later pass takes them once they are old enough.
func keepOrphans(ctx context.Context, tx *sql.Tx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("sqlite: keep bodies for later: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orphan_bodies (msg_id)
		SELECT m.msg_id FROM messages m
		WHERE m.msg_id IN (SELECT value FROM json_each(?1))
			AND NOT EXISTS (SELECT 1 FROM records r WHERE r.msg_ref = m.msg_ref)
			AND NOT EXISTS (SELECT 1 FROM scheduled s WHERE s.msg_id = m.msg_id)
		ON CONFLICT (msg_id) DO NOTHING`, string(list)); err != nil {
		return fmt.Errorf("sqlite: keep bodies for later: %w", err)
	}
	return nil
}

// purgeBodies deletes the bodies nothing refers to among ids (the messages
// of the records this pass deleted) and among those waiting in
// orphan_bodies whose time has come; those among ids still too young wait
// there for a later pass. It says how many went and whether more waiting
// ones are due than one pass takes.
func purgeBodies(ctx context.Context, tx *sql.Tx, ids []string, beforeMS int64, limit int) (int64, bool, error) {
	due, err := takeDueOrphans(ctx, tx, beforeMS, limit)
	if err != nil {
		return 0, false, err
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
	if err := keepOrphans(ctx, tx, all); err != nil {
		return 0, false, err
	}
	return n, len(due) >= limit, nil
}

// terminalQuery is the DELETE of at most limit terminal records past their
// family's cutoff, oldest first, walking the records_retention index.
func terminalQuery(cutoffs map[model.BoxKind]int64, limit int) (string, []any) {
	fams := make([]model.BoxKind, 0, len(cutoffs))
	var maxCut int64 = math.MinInt64
	for f, ms := range cutoffs {
		fams = append(fams, f)
		maxCut = max(maxCut, ms)
	}
	slices.Sort(fams) // a stable text, for the statement cache
	var b strings.Builder
	args := []any{maxCut}
	for _, f := range fams {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, string(f), cutoffs[f])
	}
	args = append(args, limit)
	// A family absent from the map falls through the CASE to NULL, and
	// nothing is below NULL: its records stay.
	return `DELETE FROM records WHERE rowid IN (SELECT r.rowid FROM records r
		WHERE r.state IN (` + terminalStates + `) AND r.updated_at_ms < ?
			AND r.updated_at_ms < (CASE ` + familyExpr + b.String() + ` END)
			AND NOT ` + unexamined + `
		ORDER BY r.updated_at_ms LIMIT ?)
		RETURNING box, msg_id, owner, thread_key, record_id`, args
}

// ackedQuery is the DELETE of at most limit records of consumers' boxes at
// or below their consumer's cursor and not in the queue's hands (store.
// AckedPurgeable), walking each consumer's box by seq.
var ackedQuery = `DELETE FROM records WHERE rowid IN (SELECT r.rowid FROM consumers k
		JOIN records r ON r.owner = k.owner AND r.box = 'CONSUMER:' || k.name AND r.seq <= k.acked_seq
		WHERE k.acked_seq > 0 AND ` + store.AckedPurgeable("r") + ` AND NOT ` + unexamined + `
		LIMIT ?)
	RETURNING box, msg_id, owner, thread_key, record_id`

// groupLogQuery is the DELETE of at most limit records of groups' logs
// (GROUP_INBOX) last changed before a cutoff, whatever their state unless
// held, walking the records_group_log index, whose condition it repeats
// (migrations 0007 and 0014 say why it is neither an equality nor a GLOB).
var groupLogQuery = `DELETE FROM records WHERE rowid IN (SELECT r.rowid FROM records r
		WHERE r.box BETWEEN '` + string(model.GroupInbox) + `' AND '` + string(model.GroupInbox) + `' AND r.updated_at_ms < ?
			AND r.state <> '` + string(model.HeldState(model.GroupInbox)) + `'
			AND NOT ` + unexamined + `
		ORDER BY r.updated_at_ms LIMIT ?)
	RETURNING box, msg_id, owner, thread_key, record_id, state`

// deleteGroupLog deletes what groupLogQuery selects and takes the unread
// ones out of their conversations' counts: unlike finished records, these
// may still count.
func deleteGroupLog(ctx context.Context, tx *sql.Tx, beforeMS int64, limit int) (goneRecords, error) {
	rows, err := tx.QueryContext(ctx, groupLogQuery, beforeMS, limit)
	if err != nil {
		return nil, err
	}
	var out goneRecords
	unread := map[[2]string]int64{}
	for rows.Next() {
		var g goneRecord
		var box, state string
		if err := rows.Scan(&box, &g.msgID, &g.owner, &g.thread, &g.recordID, &state); err != nil {
			rows.Close()
			return nil, err
		}
		g.box = model.BoxKind(box)
		out = append(out, g)
		if g.thread != "" && model.State(state).IsUnread() {
			unread[[2]string{g.owner, g.thread}]++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for k, n := range unread {
		if _, err := tx.ExecContext(ctx, `UPDATE conversations SET unread_count = max(unread_count - ?, 0)
			WHERE owner = ? AND thread_key = ?`, n, k[0], k[1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keysQuery deletes at most limit idempotency keys bound before a time,
// oldest first along idempotency_age.
const keysQuery = `DELETE FROM idempotency WHERE (scope, key) IN
	(SELECT scope, key FROM idempotency WHERE created_at_ms < ? ORDER BY created_at_ms LIMIT ?)`

// mailPartsQuery deletes at most limit flushed parts (store.Mail) stored
// before a time, which only told a part dispatched again from a new one.
const mailPartsQuery = `DELETE FROM mail_parts WHERE (mail_key, msg_id) IN
	(SELECT mail_key, msg_id FROM mail_parts WHERE bucket_id IS NULL AND created_at_ms < ? ORDER BY created_at_ms LIMIT ?)`

// Purge is one retention pass in one transaction: records (terminal past
// their family's cutoff, then groups' logs past p.GroupLogBeforeMS, then,
// with p.Acked, acknowledged consumer records), at most p.Limit of them
// (defaultLimit when unset); the bodies nothing refers to any more, of
// those records and of earlier ones that were too young to go then
// (purgeBodies), with their receipts; then at most p.Limit events older
// than p.EventsBeforeMS and as many idempotency keys bound before
// p.KeysBeforeMS (none when 0). More is set when any limit was reached. A retention.purged event with the
// counts is appended when anything went; events keep AUTOINCREMENT ids, so
// the ones deleted are never handed out again.
func (s *Store) Purge(ctx context.Context, p store.PurgeParams) (store.PurgeResult, error) {
	limit := limitOr(p.Limit, defaultLimit)
	var res store.PurgeResult
	defer func() {
		if res.Messages > 0 {
			s.bodies.ForgetAll()
		}
	}()
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res = store.PurgeResult{}
		var gone goneRecords
		if len(p.TerminalBeforeMS) > 0 {
			q, args := terminalQuery(p.TerminalBeforeMS, limit)
			g, err := deleteRecords(ctx, tx, q, args...)
			if err != nil {
				return fmt.Errorf("sqlite: purge terminal records: %w", err)
			}
			gone = g
		}
		if p.GroupLogBeforeMS > 0 && len(gone) < limit {
			g, err := deleteGroupLog(ctx, tx, p.GroupLogBeforeMS, limit-len(gone))
			if err != nil {
				return fmt.Errorf("sqlite: purge group logs: %w", err)
			}
			gone = append(gone, g...)
		}
		if p.Acked && len(gone) < limit {
			g, err := deleteRecords(ctx, tx, ackedQuery, limit-len(gone))
			if err != nil {
				return fmt.Errorf("sqlite: purge acked records: %w", err)
			}
			gone = append(gone, g...)
		}
		if len(gone) > 0 {
			res.Records = map[model.BoxKind]int64{}
			for _, r := range gone {
				res.Records[r.box.Family()]++
			}
			if err := forgetInConversations(ctx, tx, gone); err != nil {
				return fmt.Errorf("sqlite: purge: conversations: %w", err)
			}
		}
		var more bool
		var err error
		if res.Messages, more, err = purgeBodies(ctx, tx, gone.msgIDs(), p.MessagesBeforeMS, limit); err != nil {
			return err
		}
		res.More = len(gone) >= limit || more
		if res.Messages > 0 {
			s.bodies.ForgetAll() // and again after the commit (package bodies)
		}
		if p.EventsBeforeMS > 0 {
			// Only among the oldest ids: events are appended in time order,
			// so this walks the primary key a page at a time and a pass with
			// nothing to delete reads one page, not the whole log. (An event
			// stamped out of order waits for the next pass.) AUTOINCREMENT
			// keeps sqlite_sequence, so even deleting the newest rows never
			// lets an id come back.
			n, err := txExecN(ctx, tx, `DELETE FROM events WHERE event_id IN
				(SELECT event_id FROM events ORDER BY event_id LIMIT ?) AND at_ms < ?`,
				limit, p.EventsBeforeMS)
			if err != nil {
				return fmt.Errorf("sqlite: purge events: %w", err)
			}
			res.Events = n
			res.More = res.More || n >= int64(limit)
		}
		if p.KeysBeforeMS > 0 {
			n, err := txExecN(ctx, tx, keysQuery, p.KeysBeforeMS, limit)
			if err != nil {
				return fmt.Errorf("sqlite: purge idempotency keys: %w", err)
			}
			m, err := txExecN(ctx, tx, mailPartsQuery, p.KeysBeforeMS, limit)
			if err != nil {
				return fmt.Errorf("sqlite: purge flushed mail parts: %w", err)
			}
			res.Keys, res.MailParts = n, m
			res.More = res.More || n >= int64(limit) || m >= int64(limit)
		}
		if res.Empty() {
			return nil
		}
		detail, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("sqlite: purge: %w", err)
		}
		if _, err := tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, model.EventPurged,
			"", "", "", "", "", "", p.NowMS, string(detail)); err != nil {
			return fmt.Errorf("sqlite: append event: %w", err)
		}
		return nil
	})
	if err != nil {
		return store.PurgeResult{}, err
	}
	return res, nil
}
