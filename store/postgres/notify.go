package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Cross-node wake-ups with LISTEN/NOTIFY. A write that makes records
// claimable notifies "owner<US>box" on the schema's channel; NOTIFY is
// transactional, so the message arrives only once the write is committed
// and visible. Each node LISTENs on one dedicated connection and wakes its
// local waiters (store.Notifier).

var _ store.Notifier = (*Store)(nil)

const (
	payloadSep       = "\x1f"
	scheduledPayload = "\x1fscheduled"
	sqlNotify        = `SELECT pg_notify($1, x) FROM unnest($2::text[]) AS x`
)

// channelFor derives the channel name of a schema: an identifier of at
// most 63 bytes.
func channelFor(schema string) string {
	var b strings.Builder
	b.WriteString("msgcenter_")
	for _, r := range strings.ToLower(schema) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	c := b.String()
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// changedBoxes lists the distinct boxes of recs as notification payloads.
func changedBoxes(recs []model.Record) []string {
	out := make([]string, 0, 1)
	seen := map[string]bool{}
	for _, r := range recs {
		p := r.Owner + payloadSep + string(r.BoxKind)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// notify sends payloads outside any transaction. A failure only delays
// other nodes' waiters until their next look, so it is logged, not
// returned.
func (s *Store) notify(ctx context.Context, payloads []string) {
	if _, err := s.pool.Exec(ctx, sqlNotify, s.channel, payloads); err != nil {
		s.log.Warn("postgres: notify failed", "err", err)
	}
}

// Listen implements store.Notifier.
func (s *Store) Listen(ctx context.Context, ready func(), fn func(store.Change)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	// The connection is in LISTEN mode for good: do not give it back.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres: listen: %w", err)
	}
	// Remember contacts only from now on, and only what is read from now
	// on: changes made while no session was up were not heard.
	s.contacts.forget()
	s.contacts.listening.Add(1)
	defer func() {
		s.contacts.listening.Add(-1)
		s.contacts.forget()
	}()
	if ready != nil {
		ready()
	}
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("postgres: wait for notification: %w", err)
		}
		switch n.Payload {
		case scheduledPayload:
			fn(store.Change{Scheduled: true})
			continue
		case contactsPayload:
			s.contacts.forget()
			continue
		}
		owner, box, ok := strings.Cut(n.Payload, payloadSep)
		if !ok {
			continue
		}
		fn(store.Change{Owner: owner, Box: model.BoxKind(box)})
	}
}
