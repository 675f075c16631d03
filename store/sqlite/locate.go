package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/msgcenter/msgcenter/model"
)

// Where a record is found (schema 5, migration 0005). A record's id carries
// the first digits of its message's id (model.RecordID), and records are
// indexed by their message's number, msg_ref, which messages get in the
// order they arrive. So a record is found by its id through the message
// the id names (records_msg), and a new message's records are inserted at
// the end of that index rather than on random pages of an index keyed by
// a hash: the only hash-keyed index a send touches is the messages' own.
//
// Ids that locate no message (those of records stored before schema 5,
// and any a caller made other than with model.RecordID) are kept in
// record_ids. Every lookup by id tries both, and also the id without its
// locator: a record stored before schema 5 is found by the id the core
// derives for it now (its old id is that id's prefix), which keeps writes
// of old messages idempotent across the upgrade.

// ridOf is the scalar subquery finding a record's rid by its id, given as
// SQL expressions for the id and idArgs' three values: the record next to
// the messages its id locates (records_msg), else among the ids that
// locate no message (record_ids, which holds the ids of records stored
// before schema 5), looked up as given and without the locator, as the
// core derives them now. The LIMIT ends it at the first part that finds
// the record. Point lookups bind parameters (ridParams); bulkExists asks
// it of each row of a VALUES list.
func ridOf(id, lo, hi, legacy string) string {
	return `(SELECT r.rid FROM messages m JOIN records r ON r.msg_ref = m.msg_ref AND r.record_id = ` + id + `
			WHERE m.msg_id >= ` + lo + ` AND m.msg_id < ` + hi + `
		UNION ALL SELECT rid FROM record_ids WHERE record_id = ` + id + `
		UNION ALL SELECT rid FROM record_ids WHERE record_id = ` + legacy + `
		LIMIT 1)`
}

// ridParams is ridOf on numbered parameters: the id at id, idArgs' values
// from n on.
func ridParams(id, n int) string {
	p := func(i int) string { return fmt.Sprintf("?%d", i) }
	return ridOf(p(id), p(n), p(n+1), p(n+2))
}

// idArgs are the values ridOf binds after the id: the range of message ids
// the id's locator names, and the id the record had before ids carried
// one. An id without a locator names no range and no other id.
func idArgs(recordID string) (lo, hi, legacy string) {
	p, ok := model.RecordLocator(recordID)
	if !ok {
		return "", "", ""
	}
	legacy, _ = model.LegacyRecordID(recordID)
	// Message ids continue in hex digits, all below 'g'.
	return p, p + "g", legacy
}

// bulkExists returns those of the record ids that are stored, each found
// as ridOf finds one (TestQueryPlans checks that each part is an index
// lookup). Values: id, then idArgs.
var bulkExists = bulkKind{`SELECT v.column1 FROM (VALUES `, `(?, ?, ?, ?)`, `) AS v
		WHERE ` + ridOf("v.column1", "v.column2", "v.column3", "v.column4") + ` IS NOT NULL`}

// msgRefs numbers the messages of the records whose set does not carry
// their message's number (a consumer's copies, or a plan's record of
// another message), storing a message without a body for any that is not
// stored: every record refers to a stored message.
func (w *txWriter) msgRefs(ctx context.Context, sets []recordSet) (map[string]int64, error) {
	var ids []string
	for _, set := range sets {
		for i := range set.recs {
			if set.ownRef(&set.recs[i]) == 0 {
				ids = append(ids, set.recs[i].MsgID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("sqlite: look up messages: %w", err)
	}
	refs := make(map[string]int64, len(ids))
	rows, err := w.tx.StmtContext(ctx, w.st.msgRefs).QueryContext(ctx, string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite: look up messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var ref int64
		if err := rows.Scan(&id, &ref); err != nil {
			return nil, fmt.Errorf("sqlite: look up messages: %w", err)
		}
		refs[id] = ref
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: look up messages: %w", err)
	}
	for _, id := range ids {
		if refs[id] == 0 {
			var ref int64
			if err := w.tx.StmtContext(ctx, w.st.insertMsg).QueryRowContext(ctx, id, []byte{}, 0).Scan(&ref); err != nil {
				return nil, fmt.Errorf("sqlite: store message: %w", err)
			}
			refs[id] = ref
		}
	}
	return refs, nil
}

// stored reports which of ids are stored.
func (w *txWriter) stored(ctx context.Context, ids []string) (map[string]bool, error) {
	exists := make(map[string]bool, len(ids))
	args := make([]any, 0, 4*min(len(ids), bulkMax))
	err := chunked(len(ids), func(lo, hi, shape int) error {
		args = args[:0]
		for _, id := range ids[lo:hi] {
			from, to, legacy := idArgs(id)
			args = append(args, id, from, to, legacy)
		}
		rows, err := w.tx.StmtContext(ctx, w.st.bulk.exists[shape]).QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			exists[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: look up records: %w", err)
	}
	return exists, nil
}

// unlocated files the ids of recs that do not locate their message in
// record_ids, where ridOf finds them. The core's ids always locate their
// message (model.RecordID of a message.IDOf id); this keeps the store
// whole for ids of other shapes.
func (w *txWriter) unlocated(ctx context.Context, recs []newRecord) error {
	for i := range recs {
		r := &recs[i]
		if model.RecordLocates(r.RecordID, r.MsgID) {
			continue
		}
		if _, err := w.tx.StmtContext(ctx, w.st.fileID).ExecContext(ctx, r.msgRef, r.RecordID); err != nil {
			return fmt.Errorf("sqlite: file record id: %w", err)
		}
	}
	return nil
}
