package postgres

import (
	"context"
	"time"
)

// Conversation unread counts as a row plus appended deltas (migration
// 0005). Sends add their new unread records to the conversation's row, as
// they rewrite it anyway; a claim, ack or fail that changes the count
// appends a delta row, so it takes no lock a send holds. Readers add the
// two in one snapshot, and every node folds deltas into their rows
// (upkeep.go) so that a conversation's deltas stay few.

// sqlUnreadCount is conversation v's unread count: its row plus the deltas
// not folded into it yet. Clamped at zero as the count always was.
const sqlUnreadCount = `GREATEST(v.unread_count + COALESCE((SELECT sum(u.delta) FROM conversation_unread u
		WHERE u.owner = v.owner AND u.thread_key = v.thread_key), 0), 0)::bigint`

// sqlFoldUnread moves the deltas of up to $1 conversations into their
// rows. It locks those rows with SKIP LOCKED, so it never waits for a send
// (or another node's fold) and cannot deadlock with one; a row it skips
// keeps its deltas for the next pass, and does not count towards $1, so one
// held row does not end a pass early nor do two nodes folding at once stop
// each other. Deltas are removed only with their row locked, so each is
// added to the row exactly once, and a reader's snapshot sees either the
// deltas or the row they went into, never both. Deltas appended after this
// statement's snapshot are not removed.
const sqlFoldUnread = `WITH held AS (
		SELECT v.owner, v.thread_key
		FROM (SELECT DISTINCT owner, thread_key FROM conversation_unread) p
		JOIN conversations v ON v.owner = p.owner AND v.thread_key = p.thread_key
		LIMIT $1
		FOR UPDATE OF v SKIP LOCKED
	), gone AS (
		DELETE FROM conversation_unread u USING held h
		WHERE u.owner = h.owner AND u.thread_key = h.thread_key
		RETURNING u.owner, u.thread_key, u.delta
	), sums AS (
		SELECT owner, thread_key, sum(delta)::bigint AS delta FROM gone GROUP BY owner, thread_key
	)
	UPDATE conversations v SET unread_count = GREATEST(v.unread_count + s.delta, 0)
	FROM sums s WHERE v.owner = s.owner AND v.thread_key = s.thread_key`

const (
	// foldEvery is how often a node folds deltas. An ack appends one row;
	// at a few thousand acks a second a pass removes a few thousand rows.
	foldEvery = time.Second
	// foldBatch bounds the conversations of one statement: their rows stay
	// locked until it commits, and a send to one of them waits that long.
	foldBatch = 500
	// foldPasses bounds the statements of one tick.
	foldPasses = 20
)

// foldUnread folds pending deltas, a batch at a time, until a batch finds
// less than a full one. It returns how many conversations it updated.
func (s *Store) foldUnread(ctx context.Context) (int64, error) {
	var total int64
	for range foldPasses {
		tag, err := s.pool.Exec(ctx, sqlFoldUnread, foldBatch)
		if err != nil {
			return total, fail("fold unread counts", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < foldBatch {
			break
		}
	}
	return total, nil
}
