package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

// SetGroupSubscribers replaces a group's subscriber set. The group row is
// written even for an empty set: a group with no subscribers is still a
// group, not a plain DID.
func (s *Store) SetGroupSubscribers(ctx context.Context, group string, subscribers []string, delivery model.GroupDelivery, nowMS int64) error {
	defer s.lk.groups.Forget(group)
	// Clear rather than forget: the old members are not at hand, and a
	// group's members change far less often than they read.
	defer s.lk.subscribed.Clear()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// NULLIF: "" keeps a group's delivery, and the column's default
		// applies to a new group.
		if _, err := tx.ExecContext(ctx, `INSERT INTO groups (group_did, updated_at_ms, delivery)
			VALUES (?1, ?2, COALESCE(NULLIF(?3, ''), 'members'))
			ON CONFLICT (group_did) DO UPDATE SET updated_at_ms = excluded.updated_at_ms,
				delivery = COALESCE(NULLIF(?3, ''), groups.delivery)`, group, nowMS, string(delivery)); err != nil {
			return fmt.Errorf("sqlite: set group: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM group_subscribers WHERE group_did = ?", group); err != nil {
			return fmt.Errorf("sqlite: set group subscribers: %w", err)
		}
		if err := insertEvent(ctx, tx, store.GroupSetEvent(group, len(subscribers), delivery, nowMS)); err != nil {
			return err
		}
		if len(subscribers) == 0 {
			return nil
		}
		ins, err := tx.PrepareContext(ctx,
			"INSERT INTO group_subscribers (group_did, subscriber) VALUES (?, ?) ON CONFLICT DO NOTHING")
		if err != nil {
			return fmt.Errorf("sqlite: set group subscribers: %w", err)
		}
		defer ins.Close()
		for _, sub := range subscribers {
			if _, err := ins.ExecContext(ctx, group, sub); err != nil {
				return fmt.Errorf("sqlite: set group subscribers: %w", err)
			}
		}
		return nil
	})
}

// DeleteGroup makes group a plain DID again.
func (s *Store) DeleteGroup(ctx context.Context, group string, nowMS int64) error {
	defer s.lk.groups.Forget(group)
	defer s.lk.subscribed.Clear()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM groups WHERE group_did = ?", group)
		if err != nil {
			return fmt.Errorf("sqlite: delete group: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: delete group: %w", err)
		} else if n == 0 {
			return model.NotFound("group")
		}
		res, err = tx.ExecContext(ctx, "DELETE FROM group_subscribers WHERE group_did = ?", group)
		if err != nil {
			return fmt.Errorf("sqlite: delete group: %w", err)
		}
		subs, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite: delete group: %w", err)
		}
		return insertEvent(ctx, tx, store.GroupDeletedEvent(group, int(subs), nowMS))
	})
}

// GroupSubscribers returns a group's subscribers, sorted.
func (s *Store) GroupSubscribers(ctx context.Context, group string) ([]string, error) {
	// The LEFT JOIN tells "no such group" (no row) from "empty group" (one
	// row with a NULL subscriber) in one query.
	rows, err := s.queryContacts(ctx, `SELECT gs.subscriber FROM groups g
		LEFT JOIN group_subscribers gs ON gs.group_did = g.group_did
		WHERE g.group_did = ? ORDER BY gs.subscriber`, group)
	if err != nil {
		return nil, fmt.Errorf("sqlite: group subscribers: %w", err)
	}
	defer rows.Close()
	var out []string
	found := false
	for rows.Next() {
		found = true
		var sub sql.NullString
		if err := rows.Scan(&sub); err != nil {
			return nil, fmt.Errorf("sqlite: group subscribers: %w", err)
		}
		if sub.Valid {
			out = append(out, sub.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: group subscribers: %w", err)
	}
	if !found {
		return nil, model.NotFound("group")
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// contactExists asks a yes-or-no question of the contact tables.
func (s *Store) contactExists(ctx context.Context, what, q string, args ...any) (bool, error) {
	var ok bool
	if err := s.queryRowContacts(ctx, q, args...).Scan(&ok); err != nil {
		return false, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return ok, nil
}

// GroupDelivery returns how group delivers, or "" if it is not a group.
func (s *Store) GroupDelivery(ctx context.Context, group string) (model.GroupDelivery, error) {
	return lookup.Remember(&s.lk.groups, group, func() (model.GroupDelivery, error) {
		var d string
		err := s.queryRowContacts(ctx, "SELECT delivery FROM groups WHERE group_did = ?", group).Scan(&d)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("sqlite: group delivery: %w", err)
		}
		return model.GroupDelivery(d), nil
	})
}

// IsSubscriber reports whether did subscribes to group.
func (s *Store) IsSubscriber(ctx context.Context, group, did string) (bool, error) {
	return lookup.Remember(&s.lk.subscribed, lookup.PairKey(group, did), func() (bool, error) {
		return s.contactExists(ctx, "is subscriber",
			"SELECT EXISTS (SELECT 1 FROM group_subscribers WHERE group_did = ? AND subscriber = ?)", group, did)
	})
}

// SetBlock makes owner block (on) or unblock blocked. Blocking twice keeps
// the first time.
func (s *Store) SetBlock(ctx context.Context, owner, blocked string, on bool, nowMS int64) error {
	defer s.lk.blocked.Forget(lookup.BlockKey(owner, blocked))
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var res sql.Result
		var err error
		if on {
			res, err = tx.ExecContext(ctx, `INSERT INTO blocks (owner, blocked, at_ms) VALUES (?, ?, ?)
				ON CONFLICT (owner, blocked) DO NOTHING`, owner, blocked, nowMS)
		} else {
			res, err = tx.ExecContext(ctx, "DELETE FROM blocks WHERE owner = ? AND blocked = ?", owner, blocked)
		}
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			return fmt.Errorf("sqlite: set block: %w", err)
		}
		if n == 0 {
			return nil // as it was: nothing to record
		}
		return insertEvent(ctx, tx, store.BlockEvent(owner, blocked, on, nowMS))
	})
}

// BlockedBy returns which of owners block sender, asking the database only
// about the owners it has no answer for in memory.
func (s *Store) BlockedBy(ctx context.Context, sender string, owners []string) (map[string]bool, error) {
	return lookup.BlockedBy(&s.lk.blocked, sender, owners, func(owners []string) (map[string]bool, error) {
		return s.blockedBy(ctx, sender, owners)
	})
}

// blockedBy is BlockedBy's query. The owners travel as one JSON array
// parameter, so a fan-out of any size is one query with a fixed text and no
// parameter limit to chunk around.
func (s *Store) blockedBy(ctx context.Context, sender string, owners []string) (map[string]bool, error) {
	out := map[string]bool{}
	list, err := json.Marshal(owners)
	if err != nil {
		return nil, fmt.Errorf("sqlite: blocked by: %w", err)
	}
	rows, err := s.queryContacts(ctx, `SELECT owner FROM blocks
		WHERE blocked = ? AND owner IN (SELECT value FROM json_each(?))`, sender, string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite: blocked by: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, fmt.Errorf("sqlite: blocked by: %w", err)
		}
		out[o] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: blocked by: %w", err)
	}
	return out, nil
}

// SetRoutes replaces did's routes; their order is kept.
func (s *Store) SetRoutes(ctx context.Context, did string, routes []model.ContactRoute, nowMS int64) error {
	defer s.lk.routes.Forget(did)
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM routes WHERE did = ?", did); err != nil {
			return fmt.Errorf("sqlite: set routes: %w", err)
		}
		if err := insertEvent(ctx, tx, store.RoutesSetEvent(did, len(routes), nowMS)); err != nil {
			return err
		}
		for i, r := range routes {
			_, err := tx.ExecContext(ctx, `INSERT INTO routes (did, idx, tunnel_did, address, platform,
					chat_id, account_id, mode, priority)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				did, i, r.TunnelDID, r.Address, r.Platform, r.ChatID, r.AccountID, r.Mode, r.Priority)
			if err != nil {
				return fmt.Errorf("sqlite: set routes: %w", err)
			}
		}
		return nil
	})
}

// Routes returns did's routes in the order they were set.
func (s *Store) Routes(ctx context.Context, did string) ([]model.ContactRoute, error) {
	v, err := lookup.Remember(&s.lk.routes, did, func() ([]model.ContactRoute, error) { return s.routes(ctx, did) })
	return slices.Clone(v), err // the caller's copy: it must not reach the cache
}

// RoutesOf reads the routes of the DIDs the cache has no answer for in
// one query, their list as one JSON array parameter (as blockedBy).
func (s *Store) RoutesOf(ctx context.Context, dids []string) (map[string][]model.ContactRoute, error) {
	vals, err := lookup.RememberMany(&s.lk.routes, dids, func(missing []int) ([][]model.ContactRoute, error) {
		asked := make([]string, len(missing))
		for j, i := range missing {
			asked[j] = dids[i]
		}
		list, err := json.Marshal(asked)
		if err != nil {
			return nil, fmt.Errorf("sqlite: routes: %w", err)
		}
		rows, err := s.queryContacts(ctx, `SELECT did, tunnel_did, address, platform, chat_id, account_id,
			mode, priority FROM routes WHERE did IN (SELECT value FROM json_each(?)) ORDER BY did, idx`, string(list))
		if err != nil {
			return nil, fmt.Errorf("sqlite: routes: %w", err)
		}
		defer rows.Close()
		out, err := lookup.ScanRoutes(rows, asked)
		if err != nil {
			return nil, fmt.Errorf("sqlite: routes: %w", err)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return lookup.RoutesByDID(dids, vals), nil
}

func (s *Store) routes(ctx context.Context, did string) ([]model.ContactRoute, error) {
	rows, err := s.queryContacts(ctx, `SELECT tunnel_did, address, platform, chat_id, account_id,
		mode, priority FROM routes WHERE did = ? ORDER BY idx`, did)
	if err != nil {
		return nil, fmt.Errorf("sqlite: routes: %w", err)
	}
	defer rows.Close()
	out := []model.ContactRoute{}
	for rows.Next() {
		var r model.ContactRoute
		if err := rows.Scan(&r.TunnelDID, &r.Address, &r.Platform, &r.ChatID, &r.AccountID,
			&r.Mode, &r.Priority); err != nil {
			return nil, fmt.Errorf("sqlite: routes: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: routes: %w", err)
	}
	return out, nil
}

// ListBlocks lists whom owner blocks, by DID.
func (s *Store) ListBlocks(ctx context.Context, owner string, limit int) ([]model.Block, error) {
	rows, err := s.queryContacts(ctx, `SELECT blocked, at_ms FROM blocks WHERE owner = ?
		ORDER BY blocked LIMIT ?`, owner, limitOr(limit, defaultLimit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list blocks: %w", err)
	}
	defer rows.Close()
	out := []model.Block{}
	for rows.Next() {
		b := model.Block{Owner: owner}
		if err := rows.Scan(&b.DID, &b.AtMS); err != nil {
			return nil, fmt.Errorf("sqlite: list blocks: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list blocks: %w", err)
	}
	return out, nil
}

// insertEvent writes a contact or token change's event (store.GroupSetEvent
// and the others) in its transaction.
func insertEvent(ctx context.Context, tx *sql.Tx, e model.Event) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (type, owner, box, record_id, msg_id, from_state, to_state, at_ms, detail)
		VALUES (?, ?, '', '', ?, '', '', ?, ?)`, e.Type, e.Owner, e.MsgID, e.AtMS, e.Detail); err != nil {
		return fmt.Errorf("sqlite: event %s: %w", e.Type, err)
	}
	return nil
}
