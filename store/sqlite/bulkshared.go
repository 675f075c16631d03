package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Runs of records alike but for their owner. A fan-out writes, per
// member, a record the same as the other members' but for its owner, id
// and seq. Binding costs the driver a conversion per value and a copy per
// string, and a fan-out's records repeated most of their values: so a run
// of such records is written by a statement that binds the shared values
// once, as ?1…?N, and only the differing ones per row (docs/benchmarks.md,
// twenty-fifth round). Any other run takes the ordinary statements of
// bulk.go. The same for the fan-out's events and conversations, which are
// written after the answer, measured no faster and was not kept.

// alikeKind is a statement whose rows share their first shared values.
type alikeKind struct {
	head string // INSERT … VALUES, listing the shared columns first
	// shared and perRow count the bound values: once per statement, and
	// per row.
	shared, perRow int
}

func (k alikeKind) sql(rows int) string {
	var b strings.Builder
	b.WriteString(k.head)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j := 1; j <= k.shared; j++ {
			fmt.Fprintf(&b, "?%d, ", j)
		}
		n := k.shared + 1 + k.perRow*i
		for j := range k.perRow {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "?%d", n+j)
		}
		b.WriteString(")")
	}
	return b.String()
}

// alikeRecords are fresh records (bulkFresh) alike but for id, owner
// and seq.
var alikeRecords = alikeKind{head: `INSERT OR FAIL INTO records (box, msg_id, state, created_at_ms, updated_at_ms,
			sort_key, thread_key, tags, route, msg_ref, record_id, owner, seq) VALUES `, shared: 10, perRow: 3}

// recordsAlike reports whether recs differ only in id, owner and seq; a
// route is the same only as the same pointer.
func recordsAlike(recs []newRecord) bool {
	a := &recs[0]
	for i := 1; i < len(recs); i++ {
		r := &recs[i]
		if r.BoxKind != a.BoxKind || r.MsgID != a.MsgID || r.State != a.State || r.CreatedAtMS != a.CreatedAtMS ||
			r.UpdatedAtMS != a.UpdatedAtMS || r.SortKey != a.SortKey || r.ThreadKey != a.ThreadKey ||
			r.Route != a.Route || r.msgRef != a.msgRef || !slices.Equal(r.Tags, a.Tags) {
			return false
		}
	}
	return true
}

func (w *txWriter) alikeRecords(ctx context.Context, recs []newRecord, shape int, args []any) error {
	a := &recs[0]
	tags, route, err := tagsAndRoute(&a.Record)
	if err != nil {
		return err
	}
	args = append(args, string(a.BoxKind), a.MsgID, string(a.State), a.CreatedAtMS, a.UpdatedAtMS, a.SortKey,
		a.ThreadKey, tags, route, a.msgRef)
	for i := range recs {
		args = append(args, recs[i].RecordID, recs[i].Owner, recs[i].Seq)
	}
	if _, err := w.tx.StmtContext(ctx, w.st.bulk.alikeRecords[shape]).ExecContext(ctx, args...); err != nil {
		return fmt.Errorf("sqlite: insert records: %w", err)
	}
	return nil
}
