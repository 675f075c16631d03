package core

import (
	"context"
	"fmt"
	"sort"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// MaxSubscribers bounds one group's subscriber list.
const MaxSubscribers = 100_000

// MaxAgentGroup bounds the subscribers of a group an agent makes of its
// own DID: each of its posts writes a record per member, so one token
// could otherwise fill the disk with a few requests. An admin makes the
// larger groups.
const MaxAgentGroup = 1_000

// MaxRoutes bounds the routes of one DID.
const MaxRoutes = 64

// SetSubscribers replaces a group's subscribers; the group itself or an
// admin may do it. Setting subscribers is what makes a DID a group.
func (s *Service) SetSubscribers(ctx context.Context, who model.Identity, group string, req *wire.SubscribersRequest) (*wire.SubscribersResult, error) {
	if err := message.CheckDID("group", group, true); err != nil {
		return nil, err
	}
	if err := canAct(who, group); err != nil {
		return nil, err
	}
	subs := req.Subscribers
	if subs == nil {
		return nil, model.Invalid("subscribers", "is required (an empty list clears the group)")
	}
	if req.Delivery != "" && !model.ValidGroupDelivery(req.Delivery) {
		return nil, model.Invalid("delivery", fmt.Sprintf("unknown delivery %q (want %q: a record in each subscriber's INBOX, or %q: once, in the group's GROUP_INBOX)",
			req.Delivery, model.DeliverToMembers, model.DeliverToGroup))
	}
	if len(subs) > MaxSubscribers {
		return nil, model.Invalid("subscribers", fmt.Sprintf("at most %d subscribers", MaxSubscribers))
	}
	if len(subs) > MaxAgentGroup && !isAdmin(who) {
		return nil, model.Invalid("subscribers", fmt.Sprintf("an agent's group has at most %d subscribers; an admin may make larger ones (up to %d)", MaxAgentGroup, MaxSubscribers))
	}
	for i, d := range subs {
		if err := message.CheckDID(fmt.Sprintf("subscribers[%d]", i), d, true); err != nil {
			return nil, err
		}
		if d == group {
			// Its messages come from it: it would be a member that
			// receives nothing, and a GROUP_INBOX reader of itself.
			return nil, model.Invalid(fmt.Sprintf("subscribers[%d]", i), "is the group itself; a group cannot subscribe to itself")
		}
	}
	subs = uniq(subs)
	sort.Strings(subs)
	if err := s.feedGroupConsumers(ctx, group, subs); err != nil {
		return nil, err
	}
	if err := s.st.SetGroupSubscribers(ctx, group, subs, req.Delivery, s.nowMS()); err != nil {
		return nil, err
	}
	delivery, err := s.st.GroupDelivery(ctx, group)
	if err != nil {
		return nil, err
	}
	return &wire.SubscribersResult{Group: group, Subscribers: subs, Delivery: delivery}, nil
}

// DeleteGroup makes a group a plain DID again (undoing SetSubscribers,
// which makes a group of any DID): messages to it go to its own INBOX
// again, and its members' streams and consumers of its GROUP_INBOX stop
// (their consumers are fed what the box held first, as when a member is
// removed). The group itself or an admin may.
func (s *Service) DeleteGroup(ctx context.Context, who model.Identity, group string) error {
	if err := message.CheckDID("group", group, true); err != nil {
		return err
	}
	if err := canAct(who, group); err != nil {
		return err
	}
	if err := s.feedGroupConsumers(ctx, group, nil); err != nil {
		return err
	}
	return s.st.DeleteGroup(ctx, group, s.nowMS())
}

// Subscribers lists a group's subscribers to the group, its members and
// admins.
func (s *Service) Subscribers(ctx context.Context, who model.Identity, group string) (*wire.SubscribersResult, error) {
	if !acts(who, group) {
		ok, err := s.st.IsSubscriber(ctx, group, who.DID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, model.Forbidden(fmt.Sprintf("%s is not a member of %s", who.DID, group))
		}
	}
	subs, err := s.st.GroupSubscribers(ctx, group)
	if err != nil {
		return nil, err
	}
	delivery, err := s.st.GroupDelivery(ctx, group)
	if err != nil {
		return nil, err
	}
	return &wire.SubscribersResult{Group: group, Subscribers: subs, Delivery: delivery}, nil
}

// Block makes owner refuse messages whose logical sender is did (on), or
// accept them again (off). did may be a group: its messages then no longer
// reach owner's INBOX (a group that delivers to members).
func (s *Service) Block(ctx context.Context, who model.Identity, owner, did string, on bool) (*wire.BlockResult, error) {
	if err := message.CheckDID("owner", owner, true); err != nil {
		return nil, err
	}
	if err := message.CheckDID("did", did, true); err != nil {
		return nil, err
	}
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	if on && did == owner {
		return nil, model.Invalid("did", did+" is the owner itself; an owner cannot block itself")
	}
	if err := s.st.SetBlock(ctx, owner, did, on, s.nowMS()); err != nil {
		return nil, err
	}
	return &wire.BlockResult{Owner: owner, DID: did, Blocked: on}, nil
}

// Blocks lists whom owner blocks, by DID; owner itself or an admin may ask.
func (s *Service) Blocks(ctx context.Context, who model.Identity, owner string, limit int) (*wire.BlocksResult, error) {
	if err := message.CheckDID("owner", owner, true); err != nil {
		return nil, err
	}
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, err
	}
	items, err := s.st.ListBlocks(ctx, owner, limit)
	if err != nil {
		return nil, err
	}
	return &wire.BlocksResult{Items: items}, nil
}

// SetRoutes replaces the endpoints through which did is reached.
//
// A tunnel may also set the routes of a DID it brings in (a person on its
// platform), so that an agent's reply finds its way back: only through
// itself, and only for a DID that is nobody else's to route: not a local
// identity (one with a token, or that has sent with post_send), not a
// group, and not reached through any other tunnel. Those stay an admin's
// (or the DID's own) to change. (A local DID with no token that has never
// sent cannot be told from a person; the webhook tunnel refuses senders
// outside its platform's DIDs for that reason.)
func (s *Service) SetRoutes(ctx context.Context, who model.Identity, did string, routes []model.ContactRoute) (*wire.RoutesResult, error) {
	if err := message.CheckDID("did", did, true); err != nil {
		return nil, err
	}
	switch {
	case who.Role == model.RoleAgent:
		// A route makes a tunnel send to its address, and answers come
		// back in the record (external id, error): an agent routing
		// itself could point the webhook tunnel at any URL inside the
		// network and read what it says, or make a chat tunnel write to
		// any chat.
		return nil, model.Forbidden("routes are set by an admin, or by a tunnel for the people it brings in: a route makes a tunnel send to its address")
	case tunnelOfOthers(who, did):
		if err := s.checkTunnelRoutes(ctx, who, did, routes); err != nil {
			return nil, err
		}
	default:
		if err := canAct(who, did); err != nil {
			return nil, err
		}
	}
	if err := checkRoutes(routes); err != nil {
		return nil, err
	}
	if err := s.st.SetRoutes(ctx, did, routes, s.nowMS()); err != nil {
		return nil, err
	}
	return &wire.RoutesResult{DID: did, Routes: routes}, nil
}

// tunnelOfOthers: is who a tunnel acting on another DID's routes?
func tunnelOfOthers(who model.Identity, did string) bool {
	return who.Role == model.RoleTunnel && who.DID != did
}

// checkTunnelRoutes checks a tunnel's routes for another DID (see
// SetRoutes), filling in the tunnel where a route leaves it out.
func (s *Service) checkTunnelRoutes(ctx context.Context, who model.Identity, did string, routes []model.ContactRoute) error {
	for i := range routes {
		switch routes[i].TunnelDID {
		case "":
			routes[i].TunnelDID = who.DID
		case who.DID:
		default:
			return model.Forbidden(fmt.Sprintf("%s may set routes of %s only through itself, not through routes[%d].tunnel_did %s", who.DID, did, i, routes[i].TunnelDID))
		}
	}
	has, err := s.st.HoldsToken(ctx, did)
	if err != nil {
		return err
	}
	if has {
		return model.Forbidden(fmt.Sprintf("%s is a local identity (it has a token); a tunnel may not route it", did))
	}
	// Nor one that has sent with post_send: people a tunnel brings in
	// speak through dispatch, which gives them no OUTBOX.
	sent, err := s.st.Sync(ctx, store.SyncParams{Owner: did, Box: model.Outbox, Limit: 1})
	if err != nil {
		return err
	}
	if len(sent) > 0 {
		return model.Forbidden(fmt.Sprintf("%s is a local identity (it has sent messages); a tunnel may not route it", did))
	}
	g, err := s.st.GroupDelivery(ctx, did)
	if err != nil {
		return err
	}
	if g != "" {
		return model.Forbidden(fmt.Sprintf("%s is a group; a tunnel may not route it", did))
	}
	old, err := s.st.Routes(ctx, did)
	if err != nil {
		return err
	}
	for _, r := range old {
		if r.TunnelDID != who.DID {
			return model.Forbidden(fmt.Sprintf("%s is reached through %s too; only an admin may change its routes", did, r.TunnelDID))
		}
	}
	return nil
}

// checkRoutes checks a DID's whole list of routes.
func checkRoutes(routes []model.ContactRoute) error {
	if routes == nil {
		return model.Invalid("routes", "is required (an empty list removes all routes)")
	}
	if len(routes) > MaxRoutes {
		return model.Invalid("routes", fmt.Sprintf("at most %d routes", MaxRoutes))
	}
	seen := make(map[[3]string]int, len(routes))
	for i := range routes {
		if err := checkContactRoute(fmt.Sprintf("routes[%d]", i), &routes[i]); err != nil {
			return err
		}
		// One endpoint is one delivery record (its id follows from the
		// tunnel, address and chat): a repeat would be the same record
		// twice, with one of the two routes' settings.
		r := &routes[i]
		key := [3]string{r.TunnelDID, r.Address, r.ChatID}
		if j, ok := seen[key]; ok {
			return model.Invalid(fmt.Sprintf("routes[%d]", i), fmt.Sprintf("reaches the same endpoint as routes[%d] (tunnel_did, address and chat_id); give each endpoint once", j))
		}
		seen[key] = i
	}
	return nil
}

// Routes lists did's routes; a tunnel asking for another DID's sees only
// the routes through itself.
func (s *Service) Routes(ctx context.Context, who model.Identity, did string) (*wire.RoutesResult, error) {
	own := tunnelOfOthers(who, did)
	if !own {
		if err := canAct(who, did); err != nil {
			return nil, err
		}
	}
	routes, err := s.st.Routes(ctx, did)
	if err != nil {
		return nil, err
	}
	out := []model.ContactRoute{}
	for _, r := range routes {
		if !own || r.TunnelDID == who.DID {
			out = append(out, r)
		}
	}
	return &wire.RoutesResult{DID: did, Routes: out}, nil
}

// Conversations pages owner's conversations, most recently updated first.
// A conversation updated while a client pages moves to the first page: a
// client that wants what changed reads from the top again.
func (s *Service) Conversations(ctx context.Context, who model.Identity, q wire.ConversationQuery) (*wire.ConversationsResult, error) {
	if err := canAct(who, q.Owner); err != nil {
		return nil, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	if (q.CursorThreadKey == "") != (q.CursorUpdatedAtMS == 0) {
		return nil, model.Invalid("cursor_thread_key", "give cursor_updated_at_ms and cursor_thread_key together (the next_cursor_* of the page before), or neither")
	}
	if q.CursorUpdatedAtMS < 0 {
		return nil, model.Invalid("cursor_updated_at_ms", "must not be negative")
	}
	items, err := s.st.ListConversations(ctx, store.ConversationQuery{Owner: q.Owner, Limit: limit,
		CursorUpdatedAtMS: q.CursorUpdatedAtMS, CursorThreadKey: q.CursorThreadKey})
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []model.Conversation{}
	}
	res := &wire.ConversationsResult{Items: items}
	if len(items) == limit {
		last := items[len(items)-1]
		res.NextCursorUpdatedAtMS, res.NextCursorThreadKey = last.UpdatedAtMS, last.ThreadKey
	}
	return res, nil
}

// sawEvent notes that event id was handed out.
func (s *Service) sawEvent(id int64) {
	for {
		cur := s.eventsSeen.Load()
		if id <= cur || s.eventsSeen.CompareAndSwap(cur, id) {
			return
		}
	}
}

// Events pages the event log. Admins see everything; others see the
// events of their own boxes.
func (s *Service) Events(ctx context.Context, who model.Identity, q wire.EventQuery) (*wire.EventsResult, error) {
	if q.After < 0 {
		return nil, model.Invalid("after", "must not be negative")
	}
	if !isAdmin(who) {
		if q.Owner != "" && q.Owner != who.DID {
			return nil, model.Forbidden(fmt.Sprintf("%s may read only its own events", who.DID))
		}
		q.Owner = who.DID
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	items, err := s.st.ListEvents(ctx, store.EventFilter{After: q.After, Owner: q.Owner, Limit: limit})
	if err != nil {
		return nil, err
	}
	if n := len(items); n > 0 {
		s.sawEvent(items[n-1].EventID)
	} else if q.After > s.eventsSeen.Load() {
		// As for a box's seq (emptySync): ids are never reused, so a
		// cursor past the last one is another store's, and its holder
		// would wait for ever for ids handed out already. A cursor this
		// node handed out (a stream's, paging on) is not looked up.
		last, err := s.st.LastEventID(ctx)
		if err != nil {
			return nil, err
		}
		s.sawEvent(last)
		if q.After > last {
			return nil, model.Invalid("after", fmt.Sprintf("%d is beyond the end of the event log, which is at event %d: the cursor is not this server's (resume from at most %d)", q.After, last, last))
		}
	}
	if items == nil {
		items = []model.Event{}
	}
	res := &wire.EventsResult{Items: items, NextAfter: q.After}
	if n := len(items); n > 0 {
		res.NextAfter = items[n-1].EventID
	}
	return res, nil
}
