package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

// SetGroupSubscribers replaces a group's subscriber set. The group row is
// written even for an empty set: a group with no subscribers is still a
// group, not a plain DID. The upsert of that row comes first and locks it,
// so concurrent replacements of one group take turns instead of merging.
func (s *Store) SetGroupSubscribers(ctx context.Context, group string, subscribers []string, delivery model.GroupDelivery, nowMS int64) error {
	if subscribers == nil {
		subscribers = []string{}
	}
	defer s.contacts.forget()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// NULLIF: "" keeps a group's delivery, and a new group's is members.
		b.Queue(`INSERT INTO groups (group_did, updated_at_ms, delivery)
			VALUES ($1, $2, COALESCE(NULLIF($3, ''), 'members'))
			ON CONFLICT (group_did) DO UPDATE SET updated_at_ms = excluded.updated_at_ms,
				delivery = COALESCE(NULLIF($3, ''), groups.delivery)`, group, nowMS, string(delivery))
		b.Queue("DELETE FROM group_subscribers WHERE group_did = $1", group)
		b.Queue(`INSERT INTO group_subscribers (group_did, subscriber)
			SELECT $1, sub FROM unnest($2::text[]) AS u(sub) ON CONFLICT DO NOTHING`, group, subscribers)
		queueEvent(b, store.GroupSetEvent(group, len(subscribers), delivery, nowMS))
		b.Queue(sqlNotify, s.channel, []string{contactsPayload})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fail("set group subscribers", err)
		}
		return nil
	})
}

// DeleteGroup makes group a plain DID again. Deleting the groups row first
// takes its lock, as a replacement of the subscribers does.
func (s *Store) DeleteGroup(ctx context.Context, group string, nowMS int64) error {
	defer s.contacts.forget()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM groups WHERE group_did = $1", group)
		if err != nil {
			return fail("delete group", err)
		}
		if tag.RowsAffected() == 0 {
			return model.NotFound("group")
		}
		tag, err = tx.Exec(ctx, "DELETE FROM group_subscribers WHERE group_did = $1", group)
		if err != nil {
			return fail("delete group", err)
		}
		b := &pgx.Batch{}
		queueEvent(b, store.GroupDeletedEvent(group, int(tag.RowsAffected()), nowMS))
		b.Queue(sqlNotify, s.channel, []string{contactsPayload})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fail("delete group", err)
		}
		return nil
	})
}

// GroupSubscribers returns a group's subscribers, sorted.
func (s *Store) GroupSubscribers(ctx context.Context, group string) ([]string, error) {
	// The LEFT JOIN tells "no such group" (no row) from "empty group" (one
	// row with a NULL subscriber) in one query.
	rows, err := s.pool.Query(ctx, `SELECT gs.subscriber FROM groups g
		LEFT JOIN group_subscribers gs ON gs.group_did = g.group_did
		WHERE g.group_did = $1 ORDER BY gs.subscriber`, group)
	if err != nil {
		return nil, fail("group subscribers", err)
	}
	defer rows.Close()
	out := []string{}
	found := false
	for rows.Next() {
		found = true
		var sub *string
		if err := rows.Scan(&sub); err != nil {
			return nil, fail("group subscribers", err)
		}
		if sub != nil {
			out = append(out, *sub)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fail("group subscribers", err)
	}
	if !found {
		return nil, model.NotFound("group")
	}
	return out, nil
}

func (s *Store) exists(ctx context.Context, what, q string, args ...any) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
		return false, fail(what, err)
	}
	return ok, nil
}

// GroupDelivery returns how group delivers, or "" if it is not a group.
func (s *Store) GroupDelivery(ctx context.Context, group string) (model.GroupDelivery, error) {
	fill := func() (model.GroupDelivery, error) {
		var d string
		err := s.pool.QueryRow(ctx, "SELECT delivery FROM groups WHERE group_did = $1", group).Scan(&d)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil
		}
		if err != nil {
			return "", fail("group delivery", err)
		}
		return model.GroupDelivery(d), nil
	}
	if !s.contacts.remembering() {
		return fill()
	}
	return lookup.Remember(&s.contacts.groups, group, fill)
}

// IsSubscriber reports whether did subscribes to group.
func (s *Store) IsSubscriber(ctx context.Context, group, did string) (bool, error) {
	fill := func() (bool, error) {
		return s.exists(ctx, "is subscriber",
			"SELECT EXISTS (SELECT 1 FROM group_subscribers WHERE group_did = $1 AND subscriber = $2)", group, did)
	}
	if !s.contacts.remembering() {
		return fill()
	}
	return lookup.Remember(&s.contacts.subscribed, lookup.PairKey(group, did), fill)
}

// SetBlock makes owner block (on) or unblock blocked. Blocking twice keeps
// the first time.
func (s *Store) SetBlock(ctx context.Context, owner, blocked string, on bool, nowMS int64) error {
	defer s.contacts.forget()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// The event only when a row went in or out: a block already there,
		// or none to lift, changes nothing.
		e := store.BlockEvent(owner, blocked, on, nowMS)
		if on {
			b.Queue(`WITH ch AS (INSERT INTO blocks (owner, blocked, at_ms) VALUES ($1, $2, $3)
					ON CONFLICT (owner, blocked) DO NOTHING RETURNING owner)
				INSERT INTO events (type, owner, at_ms, detail) SELECT $4, owner, $3, $5 FROM ch`,
				owner, blocked, nowMS, e.Type, e.Detail)
		} else {
			b.Queue(`WITH ch AS (DELETE FROM blocks WHERE owner = $1 AND blocked = $2 RETURNING owner)
				INSERT INTO events (type, owner, at_ms, detail) SELECT $4, owner, $3, $5 FROM ch`,
				owner, blocked, nowMS, e.Type, e.Detail)
		}
		b.Queue(sqlNotify, s.channel, []string{contactsPayload})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fail("set block", err)
		}
		return nil
	})
}

// BlockedBy returns which of owners block sender. The owners travel as one
// array parameter, so a fan-out of any size is one query with a fixed text.
func (s *Store) BlockedBy(ctx context.Context, sender string, owners []string) (map[string]bool, error) {
	if !s.contacts.remembering() {
		return s.blockedBy(ctx, sender, owners)
	}
	return lookup.BlockedBy(&s.contacts.blocked, sender, owners, func(owners []string) (map[string]bool, error) {
		return s.blockedBy(ctx, sender, owners)
	})
}

func (s *Store) blockedBy(ctx context.Context, sender string, owners []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(owners) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT owner FROM blocks WHERE blocked = $1 AND owner = ANY($2::text[])`,
		sender, owners)
	if err != nil {
		return nil, fail("blocked by", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, fail("blocked by", err)
		}
		out[o] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fail("blocked by", err)
	}
	return out, nil
}

// routesLockClass keys the advisory lock SetRoutes takes per DID: routes
// have no parent row to lock, and without it two concurrent replacements
// of one DID's list would both delete nothing and then collide on
// (did, idx) instead of one replacing the other.
const routesLockClass = 0x726f7574 // "rout"

// SetRoutes replaces did's routes; their order is kept.
func (s *Store) SetRoutes(ctx context.Context, did string, routes []model.ContactRoute, nowMS int64) error {
	n := len(routes)
	var (
		tunnels, addrs, platforms = make([]string, n), make([]string, n), make([]string, n)
		chats, accounts, modes    = make([]string, n), make([]string, n), make([]string, n)
		prios                     = make([]int32, n)
	)
	for i, r := range routes {
		tunnels[i], addrs[i], platforms[i] = r.TunnelDID, r.Address, r.Platform
		chats[i], accounts[i], modes[i], prios[i] = r.ChatID, r.AccountID, r.Mode, int32(r.Priority)
	}
	defer s.contacts.forget()
	return s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SELECT pg_advisory_xact_lock($1, hashtext($2))", int32(routesLockClass), did)
		b.Queue("DELETE FROM routes WHERE did = $1", did)
		b.Queue(`INSERT INTO routes (did, idx, tunnel_did, address, platform, chat_id, account_id, mode, priority)
			SELECT $1, u.ord - 1, u.tunnel, u.addr, u.platform, u.chat, u.account, u.mode, u.prio
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[])
				WITH ORDINALITY AS u(tunnel, addr, platform, chat, account, mode, prio, ord)`,
			did, tunnels, addrs, platforms, chats, accounts, modes, prios)
		queueEvent(b, store.RoutesSetEvent(did, len(routes), nowMS))
		b.Queue(sqlNotify, s.channel, []string{contactsPayload})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fail("set routes", err)
		}
		return nil
	})
}

// Routes returns did's routes in the order they were set.
func (s *Store) Routes(ctx context.Context, did string) ([]model.ContactRoute, error) {
	if !s.contacts.remembering() {
		return s.routes(ctx, did)
	}
	return lookup.Remember(&s.contacts.routes, did, func() ([]model.ContactRoute, error) { return s.routes(ctx, did) })
}

// RoutesOf reads the routes of the DIDs the cache has no answer for (all
// of them when it keeps none) in one query.
func (s *Store) RoutesOf(ctx context.Context, dids []string) (map[string][]model.ContactRoute, error) {
	ask := func(missing []int) ([][]model.ContactRoute, error) {
		asked := make([]string, len(missing))
		for j, i := range missing {
			asked[j] = dids[i]
		}
		rows, err := s.pool.Query(ctx, `SELECT did, tunnel_did, address, platform, chat_id, account_id,
			mode, priority FROM routes WHERE did = ANY($1::text[]) ORDER BY did, idx`, asked)
		if err != nil {
			return nil, fail("routes", err)
		}
		defer rows.Close()
		out, err := lookup.ScanRoutes(rows, asked)
		if err != nil {
			return nil, fail("routes", err)
		}
		return out, nil
	}
	var vals [][]model.ContactRoute
	var err error
	if s.contacts.remembering() {
		vals, err = lookup.RememberMany(&s.contacts.routes, dids, ask)
	} else {
		all := make([]int, len(dids))
		for i := range all {
			all[i] = i
		}
		vals, err = ask(all)
	}
	if err != nil {
		return nil, err
	}
	return lookup.RoutesByDID(dids, vals), nil
}

func (s *Store) routes(ctx context.Context, did string) ([]model.ContactRoute, error) {
	rows, err := s.pool.Query(ctx, `SELECT tunnel_did, address, platform, chat_id, account_id,
		mode, priority FROM routes WHERE did = $1 ORDER BY idx`, did)
	if err != nil {
		return nil, fail("routes", err)
	}
	defer rows.Close()
	out := []model.ContactRoute{}
	for rows.Next() {
		var r model.ContactRoute
		if err := rows.Scan(&r.TunnelDID, &r.Address, &r.Platform, &r.ChatID, &r.AccountID,
			&r.Mode, &r.Priority); err != nil {
			return nil, fail("routes", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("routes", err)
	}
	return out, nil
}

// ListBlocks lists whom owner blocks, by DID.
func (s *Store) ListBlocks(ctx context.Context, owner string, limit int) ([]model.Block, error) {
	rows, err := s.pool.Query(ctx, `SELECT blocked, at_ms FROM blocks WHERE owner = $1
		ORDER BY blocked LIMIT $2`, owner, limitOr(limit, defaultLimit))
	if err != nil {
		return nil, fail("list blocks", err)
	}
	defer rows.Close()
	out := []model.Block{}
	for rows.Next() {
		b := model.Block{Owner: owner}
		if err := rows.Scan(&b.DID, &b.AtMS); err != nil {
			return nil, fail("list blocks", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list blocks", err)
	}
	return out, nil
}

// queueEvent adds a contact or token change's event (store.GroupSetEvent
// and the others) to its transaction's batch.
func queueEvent(b *pgx.Batch, e model.Event) {
	b.Queue(`INSERT INTO events (type, owner, at_ms, detail) VALUES ($1, $2, $3, $4)`, e.Type, e.Owner, e.AtMS, e.Detail)
}
