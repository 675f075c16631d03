package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// The event log without a lock, and without gaps.
//
// Event ids come from a sequence, taken inside the writing transactions,
// and those commit in any order: id 105 can be visible while 104 belongs
// to a transaction still running. A reader that returned 105 would move
// its cursor (the HTTP API's after=, a stream's last event id) past 104
// for good. Serializing the writers on a counter row, as box seqs do,
// would make the event log a global lock, so ListEvents instead returns
// only ids it has proved final: ids that no transaction still running can
// commit.
//
// The proof uses two facts about a writer. Its INSERT takes a write lock
// on the events table before it evaluates event_id's default and keeps it
// until it ends; and since migration 0003 that default assigns the
// transaction its id before it takes the next value of the sequence. A
// certification then
//
//  1. reads the sequence's last value L,
//  2. then lists, from pg_locks, the transaction ids of the transactions
//     holding that write lock (sqlEventWriters), and
//  3. waits until a new snapshot sees all of them ended (sqlEnded).
//
// A transaction holding an id <= L took it before step 1, so it held the
// lock and had a transaction id before step 1 too: in step 2 it is either
// listed or already over. After step 3 it has committed (and any new
// snapshot sees its events) or rolled back (the id stays a gap for ever);
// ids taken from now on are > L. So every id <= L is final, whatever
// happens next. The result is the Store's horizon, shared by its readers,
// and only ever grows.
//
// ListEvents returns the events of its page at or below the horizon. When
// the page goes beyond it (at the head of the log: the events of writes
// that just committed), it certifies a new horizon and reads the page
// again with a fresh snapshot, so a caller always sees its own committed
// writes. The wait is for the writers of events in flight at that moment,
// usually a few milliseconds, and only those: other transactions, however
// long, and other schemas do not count. It is bounded by eventWait, after
// which the page is cut at the horizon reached (possibly to nothing: the
// caller's cursor does not move, and it reads again later).
//
// One certification runs at a time per Store; readers that need one while
// it runs wait for it, and start the next one if it did not reach far
// enough.

const (
	// eventWait bounds how long ListEvents waits for transactions in
	// flight before it returns the proved-final part of its page only.
	eventWait = 2 * time.Second
	// eventPoll is how often a certification re-reads the snapshot.
	eventPoll = time.Millisecond
)

// eventHorizon is a Store's proof of which event ids are final.
type eventHorizon struct {
	mu    sync.Mutex
	wait  time.Duration // eventWait; tests change it
	final int64         // every event id <= final has committed or never will
	// flight is closed when the certification in progress ends; nil when
	// none is.
	flight chan struct{}
}

// load returns the current horizon.
func (h *eventHorizon) load() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.final
}

// sqlLastEventID reads the events' sequence (0003_event_order.sql): the
// last id handed out, committed or not, and never lowered. Before setval
// (..., false)'s value is handed out, last_value is the next id, not one
// handed out.
const sqlLastEventID = `SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_event_id_seq`

// LastEventID is at or above every event id handed out.
func (s *Store) LastEventID(ctx context.Context) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, sqlLastEventID).Scan(&id)
	if err != nil {
		return 0, fail("last event id", err)
	}
	return id, nil
}

// ListEvents pages the event log after f.After in event id order,
// optionally for one owner. It never returns an event while an event with
// a lower id could still commit: see the comment at the top of this file.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]model.Event, error) {
	final := s.events.load()
	page, err := s.readEvents(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(page) == 0 || page[len(page)-1].EventID <= final {
		return page, nil
	}
	proved, err := s.advanceHorizon(ctx, page[len(page)-1].EventID)
	if err != nil {
		return nil, err
	}
	if proved > final {
		// Rows at or below the new horizon may have committed since the
		// first read: only a snapshot taken after the proof has them all.
		final = proved
		if page, err = s.readEvents(ctx, f); err != nil {
			return nil, err
		}
	}
	n := len(page)
	for n > 0 && page[n-1].EventID > final {
		n--
	}
	return page[:n], nil
}

// readEvents reads one page in a fresh snapshot, beyond the horizon or not.
func (s *Store) readEvents(ctx context.Context, f store.EventFilter) ([]model.Event, error) {
	var q query
	q.b.WriteString(`SELECT event_id, type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail
		FROM events WHERE event_id > ` + q.arg(f.After))
	if f.Owner != "" {
		q.b.WriteString(" AND owner = " + q.arg(f.Owner))
	}
	q.b.WriteString(" ORDER BY event_id LIMIT " + q.arg(limitOr(f.Limit, defaultLimit)))
	rows, err := s.pool.Query(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, fail("list events", err)
	}
	defer rows.Close()
	out := []model.Event{}
	for rows.Next() {
		var e model.Event
		var box, from, to string
		if err := rows.Scan(&e.EventID, &e.Type, &e.Owner, &box, &e.RecordID, &e.MsgID,
			&from, &to, &e.AtMS, &e.Detail); err != nil {
			return nil, fail("list events", err)
		}
		e.BoxKind, e.FromState, e.ToState = model.BoxKind(box), model.State(from), model.State(to)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list events", err)
	}
	return out, nil
}

// advanceHorizon tries, for at most s.events.wait, to prove every id up to
// need final, joining the certification in progress or starting one. It
// returns the horizon it reached, which may be below need.
func (s *Store) advanceHorizon(ctx context.Context, need int64) (int64, error) {
	h := &s.events
	h.mu.Lock()
	wait := h.wait
	h.mu.Unlock()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		final, fl := h.final, h.flight
		if final >= need {
			h.mu.Unlock()
			return final, nil
		}
		if fl == nil {
			fl = make(chan struct{})
			h.flight = fl
			h.mu.Unlock()
			proved, ok, err := s.certify(ctx, deadline.C)
			h.mu.Lock()
			if ok {
				h.final = max(h.final, proved)
			}
			final = h.final
			h.flight = nil
			h.mu.Unlock()
			close(fl)
			if err != nil || !ok {
				return final, err
			}
			// The proof may have started before need was taken: loop.
			continue
		}
		h.mu.Unlock()
		select {
		case <-fl:
		case <-deadline.C:
			return final, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// sqlEventWriters lists the transaction ids of the transactions that hold
// a write lock on this schema's events table (taken by INSERT and DELETE
// before they evaluate a default, held to the end of the transaction) and
// have a transaction id. pg_locks shows 32-bit ids; each is widened to an
// xid8 by its distance to the snapshot's xmax, which every running
// transaction id is within 2^31 of.
const sqlEventWriters = `WITH l AS MATERIALIZED (
		SELECT locktype, relation, virtualtransaction, transactionid, mode FROM pg_locks
		WHERE granted AND (locktype = 'transactionid' OR (locktype = 'relation'
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())))
	), s AS (
		SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xm
	)
	SELECT coalesce(array_agg(DISTINCT (s.xm +
		((x.transactionid::text::bigint - (s.xm & 4294967295)) % 4294967296
			+ 4294967296 + 2147483648) % 4294967296 - 2147483648)::text), '{}')
	FROM l r
	JOIN l x ON x.virtualtransaction = r.virtualtransaction
		AND x.locktype = 'transactionid' AND x.mode = 'ExclusiveLock'
	CROSS JOIN s
	WHERE r.locktype = 'relation' AND r.relation = 'events'::regclass AND r.mode = 'RowExclusiveLock'`

// sqlEnded reports whether every transaction id of $1 has ended, as a new
// snapshot sees it (committed, so that every later snapshot sees its rows,
// or rolled back).
const sqlEnded = `SELECT coalesce(bool_and(pg_visible_in_snapshot(x::xid8, s)), true)
	FROM pg_current_snapshot() s, unnest($1::text[]) x`

// certify runs one certification (see the top of this file) and returns
// the last id it proved final; ok is false when deadline fired first.
func (s *Store) certify(ctx context.Context, deadline <-chan time.Time) (last int64, ok bool, err error) {
	// One batch is one implicit transaction whose statements run in order:
	// the sequence is read before the lock table.
	b := &pgx.Batch{}
	var writers []string
	b.Queue(sqlLastEventID).QueryRow(func(r pgx.Row) error {
		return r.Scan(&last)
	})
	b.Queue(sqlEventWriters).QueryRow(func(r pgx.Row) error {
		return r.Scan(&writers)
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, false, fail("list events: find the event writers", err)
	}
	if len(writers) == 0 {
		return last, true, nil
	}
	poll := time.NewTicker(eventPoll)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
		case <-deadline:
			return 0, false, nil
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
		var ended bool
		if err := s.pool.QueryRow(ctx, sqlEnded, writers).Scan(&ended); err != nil {
			return 0, false, fail("list events: wait for the event writers", err)
		}
		if ended {
			return last, true, nil
		}
	}
}
