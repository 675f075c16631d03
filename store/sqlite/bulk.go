package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Set-based record inserts. A group fan-out is one plan of a thousand
// records or more; one statement per record, four per record in all, spent
// a third of the writer's time in statement overhead (database/sql, the
// driver's binding, VDBE setup) rather than in the b-trees. So records,
// events and conversations are written a chunk of rows per statement. Seqs
// are assigned here, from each box's last seq read once per chunk (or
// remembered, seqcache.go): this connection is the file's only writer, so
// nothing can take a seq between the read and the insert.
//
// SQLite prepares a statement for one shape, so each kind is prepared for
// chunks of 1, 2, 4, … bulkMax rows and a run of n rows is cut into
// powers of two (n's binary digits): a plan of 3 records is a statement of
// 2 and one of 1, a fan-out of 1,000 is 15 of 64 and four smaller ones.

const (
	bulkMax    = 64 // rows per statement: 64 records × 25 values stays well under SQLite's 32,766
	bulkShapes = 7  // 1, 2, 4, … 64
)

// bulkKind is one statement with a repeating group of values.
type bulkKind struct {
	head, row, tail string // SQL before, per row (joined with ", "), after
}

var (
	// bulkSeqs reads the boxes' last seqs (0 for a box without records
	// yet): the highest seq of a record there, or of one deleted (migration
	// 0006), as boxLastSeq.
	bulkSeqs = bulkKind{`SELECT v.column1, v.column2, max(COALESCE(b.last_seq, 0),
			COALESCE((SELECT r.seq FROM records r WHERE r.owner = v.column1 AND r.box = v.column2
				ORDER BY r.seq DESC LIMIT 1), 0)) FROM (VALUES `, `(?, ?)`, `) AS v
		LEFT JOIN box_seqs b ON b.owner = v.column1 AND b.box = v.column2`}
	// OR FAIL, here and in the two below: a row that fails keeps the
	// rows the statement wrote before it, where the default (ABORT) undoes
	// them. That needs a statement journal, a copy of every page before
	// the statement first changes it, and with a chunk's rows spread over
	// four owner-keyed indexes that was a third of a 1,000-member fan-out's
	// time (docs/benchmarks.md, fifteenth round). Nothing is lost by it:
	// every caller drops the whole transaction on an error from
	// insertRecords, or rolls back to a savepoint taken before it
	// (TestFailedInsertLeavesNoRecords).
	//
	// No ON CONFLICT: existing and repeated records were filtered out, and
	// a conflict here would be a bug to report, not to skip.
	bulkRecords = bulkKind{`INSERT OR FAIL INTO records (record_id, owner, box, msg_id, state, seq,
			created_at_ms, updated_at_ms, sort_key, thread_key, tags, route,
			attempts, next_retry_at_ms, external_msg_id, delivered_at_ms, error_code,
			error_message, retry_after_ms, last_error, visible_at_ms,
			lease_id, lease_holder, lease_until_ms, msg_ref) VALUES `,
		`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, ``}
	// bulkFresh inserts records with no delivery and no lease, as every
	// plan makes them, leaving those eleven columns to their defaults:
	// binding a value costs the driver a conversion and often a copy,
	// and the constants were 40% of the values a fan-out bound.
	bulkFresh = bulkKind{`INSERT OR FAIL INTO records (record_id, owner, box, msg_id, state, seq,
			created_at_ms, updated_at_ms, sort_key, thread_key, tags, route, msg_ref) VALUES `,
		`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, ``}
	// Every row is a record.created: its type is no value to bind.
	bulkEvents = bulkKind{`INSERT OR FAIL INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail) VALUES `,
		`('` + model.EventRecordCreated + `', ?, ?, ?, ?, '', ?, ?, '')`, ``}
	// SQLite applies an upsert row by row, so two rows of one conversation
	// in a statement work like two statements: the later one is last.
	bulkConvs = bulkKind{`INSERT OR FAIL INTO conversations (owner, thread_key, last_msg_id, last_record_id,
			last_box, last_seq, unread_count, updated_at_ms) VALUES `, `(?, ?, ?, ?, ?, ?, ?, ?)`,
		` ON CONFLICT (owner, thread_key) DO UPDATE SET
			last_msg_id = excluded.last_msg_id,
			last_record_id = excluded.last_record_id,
			last_box = excluded.last_box,
			last_seq = excluded.last_seq,
			unread_count = unread_count + excluded.unread_count,
			updated_at_ms = excluded.updated_at_ms`}
)

func (k bulkKind) sql(rows int) string {
	var b strings.Builder
	b.WriteString(k.head)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k.row)
	}
	b.WriteString(k.tail)
	return b.String()
}

// bulkStmts holds each kind prepared on the writer for every shape.
type bulkStmts struct {
	exists, seqs, records, fresh, events, convs [bulkShapes]*sql.Stmt
	// alikeRecords is for runs of records alike but for their owner
	// (bulkshared.go)
	alikeRecords [bulkShapes]*sql.Stmt
}

func (b *bulkStmts) prepare(ctx context.Context, w *sql.DB) error {
	for _, k := range []struct {
		to   *[bulkShapes]*sql.Stmt
		kind bulkKind
	}{{&b.exists, bulkExists}, {&b.seqs, bulkSeqs}, {&b.records, bulkRecords},
		{&b.fresh, bulkFresh}, {&b.events, bulkEvents}, {&b.convs, bulkConvs}} {
		for i := range bulkShapes {
			q := k.kind.sql(1 << i)
			st, err := w.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("sqlite: prepare %.60q…: %w", q, err)
			}
			k.to[i] = st
		}
	}
	for i := range bulkShapes {
		st, err := w.PrepareContext(ctx, alikeRecords.sql(1<<i))
		if err != nil {
			return fmt.Errorf("sqlite: prepare the insert of alike records: %w", err)
		}
		b.alikeRecords[i] = st
	}
	return nil
}

func (b *bulkStmts) close() {
	for _, set := range []*[bulkShapes]*sql.Stmt{&b.exists, &b.seqs, &b.records, &b.fresh, &b.events, &b.convs,
		&b.alikeRecords} {
		for _, st := range set {
			if st != nil {
				st.Close()
			}
		}
	}
}

// chunked calls f for consecutive runs [lo, hi) of [0, n), each a power of
// two no longer than bulkMax, with that power's shape index.
func chunked(n int, f func(lo, hi, shape int) error) error {
	for lo := 0; lo < n; {
		size := min(n-lo, bulkMax)
		shape := bits.Len(uint(size)) - 1
		size = 1 << shape
		if err := f(lo, lo+size, shape); err != nil {
			return err
		}
		lo += size
	}
	return nil
}

// boxKey names a box in maps.
type boxKey struct {
	owner string
	box   model.BoxKind
}

// recordSet is one write's records: what one Apply or AdvanceConsumer
// inserts, at its time, reporting into its result.
type recordSet struct {
	recs  []model.Record
	nowMS int64
	res   *store.ApplyResult
	// msgID and msgRef name the plan's message (Apply's); msgRef is 0 when
	// the records may be of several messages (a consumer's copies). A
	// record of another message has its message's number looked up.
	msgID  string
	msgRef int64
	// fresh: this write stored msgID, so no record of it can exist yet
	// and none is probed (seqcache.go).
	fresh bool
}

// ownRef is r's message number when the set carries it, else 0.
func (set *recordSet) ownRef(r *model.Record) int64 {
	if r.MsgID == set.msgID {
		return set.msgRef
	}
	return 0
}

// newRecord is a record about to be inserted, with its set's time and its
// message's number.
type newRecord struct {
	model.Record
	nowMS  int64
	msgRef int64
}

// insertRecords inserts every record of the sets that does not exist yet,
// in order, each with the next seq of its box and a record.created event,
// and keeps conversations in step. It reports into each set's result
// which records it created and which existed (or repeat an earlier
// record). Inserting several sets at once is the same as inserting them
// one after the other, in fewer statements. Apply and AdvanceConsumer
// share it, so a record reaches a box the same way whatever put it there.
func (w *txWriter) insertRecords(ctx context.Context, sets ...recordSet) error {
	rest, err := w.insertRows(ctx, sets...)
	if err != nil || rest == nil {
		return err
	}
	return rest(ctx)
}

// insertRows is insertRecords in two steps: it inserts the records
// themselves, and reports into the sets' results, and returns rest, which
// writes what follows from them (events, conversations) and
// must run before anything else in the transaction. rest is nil when
// there is nothing to write. A logged group is answered between the two
// (commit.go): no read of those tables runs before the writer is done with
// them, and a failure in rest loses the transaction, whose logged writes
// the writer applies again (recover). A group that is not answered yet
// (not logged, or its append failed) is run again write by write instead
// (retryAlone), as after any failed group.
func (w *txWriter) insertRows(ctx context.Context, sets ...recordSet) (rest func(context.Context) error, err error) {
	refs, err := w.msgRefs(ctx, sets)
	if err != nil {
		return nil, err
	}
	existing, last, err := w.lookup(ctx, sets)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, set := range sets {
		n += len(set.recs)
	}
	fresh := make([]newRecord, 0, n)
	var boxes []boxKey // those that get records, in order of first use
	used := make(map[boxKey]bool, len(last))
	for _, set := range sets {
		for _, r := range set.recs {
			if existing[r.RecordID] {
				set.res.Existing = append(set.res.Existing, r.RecordID)
				continue
			}
			existing[r.RecordID] = true // a repeat later exists by then
			k := boxKey{r.Owner, r.BoxKind}
			if !used[k] {
				used[k] = true
				boxes = append(boxes, k)
			}
			last[k]++
			r.Seq = last[k]
			if r.CreatedAtMS == 0 {
				r.CreatedAtMS = set.nowMS
			}
			if r.UpdatedAtMS == 0 {
				r.UpdatedAtMS = r.CreatedAtMS
			}
			set.res.Created = append(set.res.Created, r)
			ref := set.ownRef(&r)
			if ref == 0 {
				ref = refs[r.MsgID]
			}
			fresh = append(fresh, newRecord{r, set.nowMS, ref})
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if err := w.writeRecords(ctx, fresh); err != nil {
		return nil, err
	}
	if err := w.unlocated(ctx, fresh); err != nil {
		return nil, err
	}
	// The records hold their boxes' last seqs now; box_seqs is written
	// only when records are deleted (migration 0006).
	for _, k := range boxes {
		w.seqs.set(w.tx, k, last[k])
	}
	return func(ctx context.Context) error {
		if err := w.createdEvents(ctx, fresh); err != nil {
			return err
		}
		return w.conversations(ctx, fresh)
	}, nil
}

// lookup reports which records of the sets are stored already and the
// last seq of each of their boxes, probing only the records of messages
// stored before this write and the boxes the writer does not remember
// (seqcache.go).
func (w *txWriter) lookup(ctx context.Context, sets []recordSet) (map[string]bool, map[boxKey]int64, error) {
	last := make(map[boxKey]int64)
	var probe []string
	var boxes []boxKey
	for _, set := range sets {
		for _, r := range set.recs {
			if !set.fresh || r.MsgID != set.msgID {
				probe = append(probe, r.RecordID)
			}
			k := boxKey{r.Owner, r.BoxKind}
			if _, ok := last[k]; ok {
				continue
			}
			if v, ok := w.seqs.get(w.tx, k); ok {
				last[k] = v
				continue
			}
			last[k] = 0 // until the probe answers
			boxes = append(boxes, k)
		}
	}
	existing, err := w.stored(ctx, probe)
	if err != nil {
		return nil, nil, err
	}
	if err := w.boxSeqs(ctx, boxes, last); err != nil {
		return nil, nil, err
	}
	return existing, last, nil
}

// boxSeqs sets last[k] to each box's last seq.
func (w *txWriter) boxSeqs(ctx context.Context, boxes []boxKey, last map[boxKey]int64) error {
	args := make([]any, 0, 2*min(len(boxes), bulkMax))
	err := chunked(len(boxes), func(lo, hi, shape int) error {
		args = args[:0]
		for _, k := range boxes[lo:hi] {
			args = append(args, k.owner, string(k.box))
		}
		rows, err := w.tx.StmtContext(ctx, w.st.bulk.seqs[shape]).QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var owner, box string
			var seq int64
			if err := rows.Scan(&owner, &box, &seq); err != nil {
				return err
			}
			last[boxKey{owner, model.BoxKind(box)}] = seq
		}
		return rows.Err()
	})
	if err != nil {
		return fmt.Errorf("sqlite: read box seqs: %w", err)
	}
	return nil
}

func (w *txWriter) writeRecords(ctx context.Context, recs []newRecord) error {
	args := make([]any, 0, 25*min(len(recs), bulkMax))
	return chunked(len(recs), func(lo, hi, shape int) error {
		args = args[:0]
		fresh := true
		for i := lo; i < hi && fresh; i++ {
			fresh = recs[i].Delivery == (model.Delivery{}) && recs[i].Lease == nil
		}
		if fresh && hi-lo > 1 && recordsAlike(recs[lo:hi]) {
			return w.alikeRecords(ctx, recs[lo:hi], shape, args)
		}
		for i := lo; i < hi; i++ {
			rec := &recs[i]
			tags, route, err := tagsAndRoute(&rec.Record)
			if err != nil {
				return err
			}
			if fresh {
				args = append(args, rec.RecordID, rec.Owner, string(rec.BoxKind), rec.MsgID, string(rec.State), rec.Seq,
					rec.CreatedAtMS, rec.UpdatedAtMS, rec.SortKey, rec.ThreadKey, tags, route, rec.msgRef)
				continue
			}
			var leaseID, holder, until any
			if rec.Lease != nil {
				leaseID, holder, until = rec.Lease.ID, rec.Lease.Holder, rec.Lease.ExpiresAtMS
			}
			d := &rec.Delivery
			args = append(args, rec.RecordID, rec.Owner, string(rec.BoxKind), rec.MsgID, string(rec.State), rec.Seq,
				rec.CreatedAtMS, rec.UpdatedAtMS, rec.SortKey, rec.ThreadKey, tags, route,
				d.Attempts, d.NextRetryAtMS, d.ExternalMsgID, d.DeliveredAtMS, d.ErrorCode, d.ErrorMessage,
				d.RetryAfterMS, d.LastError, d.NextRetryAtMS, leaseID, holder, until, rec.msgRef)
		}
		stmt := w.st.bulk.records[shape]
		if fresh {
			stmt = w.st.bulk.fresh[shape]
		}
		if _, err := w.tx.StmtContext(ctx, stmt).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite: insert records: %w", err)
		}
		return nil
	})
}

func (w *txWriter) createdEvents(ctx context.Context, recs []newRecord) error {
	args := make([]any, 0, 6*min(len(recs), bulkMax))
	return chunked(len(recs), func(lo, hi, shape int) error {
		args = args[:0]
		for _, r := range recs[lo:hi] {
			args = append(args, r.Owner, string(r.BoxKind), r.RecordID, r.MsgID, string(r.State), r.nowMS)
		}
		if _, err := w.tx.StmtContext(ctx, w.st.bulk.events[shape]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite: append events: %w", err)
		}
		return nil
	})
}

func (w *txWriter) conversations(ctx context.Context, recs []newRecord) error {
	var conv []*newRecord
	for i := range recs {
		if r := &recs[i]; r.BoxKind.HasConversations() && r.ThreadKey != "" {
			conv = append(conv, r)
		}
	}
	args := make([]any, 0, 8*min(len(conv), bulkMax))
	return chunked(len(conv), func(lo, hi, shape int) error {
		args = args[:0]
		for _, r := range conv[lo:hi] {
			unread := 0
			if r.State.IsUnread() {
				unread = 1
			}
			args = append(args, r.Owner, r.ThreadKey, r.MsgID, r.RecordID, string(r.BoxKind), r.Seq, unread, r.nowMS)
		}
		if _, err := w.tx.StmtContext(ctx, w.st.bulk.convs[shape]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite: update conversations: %w", err)
		}
		return nil
	})
}
