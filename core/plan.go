package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// newRecord builds a record of c in owner's box in the box's initial state.
func (c *checked) newRecord(owner string, box model.BoxKind, variant string, route *model.Route, now int64) model.Record {
	sortKey := c.msg.CreatedAtMS
	if sortKey == 0 {
		sortKey = now
	}
	r := model.Record{
		RecordID:    model.RecordID(owner, box, c.id, variant),
		Owner:       owner,
		BoxKind:     box,
		MsgID:       c.id,
		State:       model.InitialState(box),
		CreatedAtMS: now,
		UpdatedAtMS: now,
		Route:       route,
		SortKey:     sortKey,
	}
	if box.HasConversations() {
		r.ThreadKey = c.threadKey(owner)
	}
	if c.isGroup && box == model.Inbox {
		if c.groupTag == "" {
			c.groupTag = "group:" + c.msg.From
		}
		r.Tags = []string{c.groupTag}
	}
	return r
}

// threadKey groups an owner's records into conversations: the group's,
// or the people of a direct conversation (dmThreadKey), and within either
// a topic the message names ("group:G/topic:T", "dm:did:bob/topic:T"), so
// that two conversations that happen to use the same topic stay apart (a
// reply without a topic continues its parent's: topic.go). A
// group's key is the same for every owner, and worked out once: a fan-out
// asks once per member.
func (c *checked) threadKey(owner string) string {
	m := c.msg
	if c.isGroup {
		if c.shared == "" {
			c.shared = "group:" + m.From + c.topicSuffix()
		}
		return c.shared
	}
	if c.topic != "" {
		return c.dmThreadKey(owner) + c.topicSuffix()
	}
	return c.dmThreadKey(owner)
}

// topicMark separates a thread key's topic from the conversation's key.
const topicMark = "/topic:"

// topicSuffix is what the message's topic (its own, or the one a reply
// continues: topic.go) adds to its thread key.
func (c *checked) topicSuffix() string {
	if c.topic == "" {
		return ""
	}
	return topicMark + c.topic
}

// maxNamedPeers bounds the peers a direct conversation's key names.
const maxNamedPeers = 8

// dmThreadKey is a direct conversation's key for owner: everyone in it
// (the sender and the recipients) but the owner, sorted, so that every
// participant's copies of a conversation among the same people share one
// thread, whoever wrote each message ("dm:did:bob" for a two-person one,
// "dm:did:bob,did:carol" for three, on alice's side; "dm:" and the owner
// for a note to self). A conversation among more than maxNamedPeers+1
// people is keyed by a digest of all of them, the same for everyone.
func (c *checked) dmThreadKey(owner string) string {
	if c.people == nil {
		c.people = uniq(append([]string{c.msg.LogicalSender()}, c.msg.To...))
		sort.Strings(c.people)
		if len(c.people) > maxNamedPeers+1 {
			sum := sha256.Sum256([]byte(strings.Join(c.people, "\x00")))
			c.shared = "dm#" + hex.EncodeToString(sum[:16])
		}
	}
	if len(c.people) > maxNamedPeers+1 {
		return c.shared
	}
	var b strings.Builder
	b.WriteString("dm:")
	n := 0
	for _, p := range c.people {
		if p == owner {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p)
		n++
	}
	if n == 0 {
		b.WriteString(owner)
	}
	return b.String()
}

func (s *Service) planDispatch(ctx context.Context, c *checked, ingress *model.Route, now int64) (*store.Plan, *wire.DispatchResult, error) {
	p := &store.Plan{MsgID: c.id, MsgBody: c.body, NowMS: now}
	res := &wire.DispatchResult{OK: true, MsgID: c.id, DeliveredRecipients: []string{},
		DroppedRecipients: []string{}, DeliveredAgents: []string{}}
	sender := c.msg.LogicalSender()
	var route *model.Route
	if ingress != nil {
		r := *ingress
		route = &r
	}
	if c.isGroup {
		group := c.msg.From
		blocked, err := s.st.BlockedBy(ctx, sender, []string{group})
		if err != nil {
			return nil, nil, err
		}
		if blocked[group] {
			res.OK, res.Reason = false, "blocked"
			res.DroppedRecipients = append(res.DroppedRecipients, group)
			return p, res, nil
		}
		p.Records = append(p.Records, c.newRecord(group, model.GroupInbox, "", route, now))
		res.DeliveredGroup, res.GroupDelivery = group, c.delivery
		// Not routed: a group message dispatched in came from the group's
		// chat, where its people saw it.
		if _, err := s.fanOut(ctx, c, p, route, now, &res.DeliveredAgents, &res.DroppedRecipients, false); err != nil {
			return nil, nil, err
		}
		res.DeliveredRecipients = append(res.DeliveredRecipients, res.DeliveredAgents...)
		return p, res, nil
	}
	to, blocked := c.to, map[string]bool(nil)
	if to == nil {
		to = uniq(c.msg.To)
		var err error
		if blocked, err = s.st.BlockedBy(ctx, sender, to); err != nil {
			return nil, nil, err
		}
	}
	for _, d := range to {
		if blocked[d] {
			res.DroppedRecipients = append(res.DroppedRecipients, d)
			continue
		}
		p.Records = append(p.Records, c.newRecord(d, model.Inbox, "", route, now))
		res.DeliveredRecipients = append(res.DeliveredRecipients, d)
	}
	if len(res.DeliveredRecipients) == 0 {
		res.OK, res.Reason = false, "blocked"
	}
	return p, res, nil
}

// fanOut adds an INBOX record, tagged with the group, for every member
// audience lists. With routed, a member with routes gets none: fanOut
// returns those members, in the audience's order, with their routes, for
// planPostSend to reach them there. A group that delivers to itself has
// no member records: its subscribers read its GROUP_INBOX.
func (s *Service) fanOut(ctx context.Context, c *checked, p *store.Plan, route *model.Route, now int64, delivered, dropped *[]string, routed bool) ([]routedMember, error) {
	if c.delivery == model.DeliverToGroup {
		return nil, nil
	}
	reach, err := s.audience(ctx, c, dropped)
	if err != nil {
		return nil, err
	}
	var routes map[string][]model.ContactRoute
	if routed {
		if routes, err = s.st.RoutesOf(ctx, reach); err != nil {
			return nil, err
		}
	}
	var out []routedMember
	p.Records = slices.Grow(p.Records, len(reach))
	*delivered = slices.Grow(*delivered, len(reach))
	for _, d := range reach {
		if rs := routes[d]; len(rs) > 0 {
			out = append(out, routedMember{d, rs})
			continue
		}
		p.Records = append(p.Records, c.newRecord(d, model.Inbox, "", route, now))
		*delivered = append(*delivered, d)
	}
	return out, nil
}

// routedMember is a group member reached through its own routes.
type routedMember struct {
	did    string
	routes []model.ContactRoute
}

// audience lists the subscribers of c's group that a message reaches:
// all but the author and those who block the author or the group (added
// to dropped).
func (s *Service) audience(ctx context.Context, c *checked, dropped *[]string) ([]string, error) {
	subs, err := s.st.GroupSubscribers(ctx, c.msg.From)
	if err != nil {
		return nil, err
	}
	author := c.msg.LogicalSender()
	blocked, err := s.st.BlockedBy(ctx, author, subs)
	if err != nil {
		return nil, err
	}
	// A member may block the group itself (mute it) as well as an author.
	muted, err := s.st.BlockedBy(ctx, c.msg.From, subs)
	if err != nil {
		return nil, err
	}
	reach := make([]string, 0, len(subs))
	for _, d := range subs {
		switch {
		case d == author:
		case blocked[d], muted[d]:
			*dropped = append(*dropped, d)
		default:
			reach = append(reach, d)
		}
	}
	return reach, nil
}

// planPostSend plans a post_send of c. strict is for a send made now: a
// tunnel asked for that a recipient has no route through fails it. A
// delayed send was checked so when it was made (checkSendRoutes), so when
// it comes due (not strict) a recipient whose routes changed since is
// reached through its routes as they are, rather than the whole message
// failing for every recipient.
func (s *Service) planPostSend(ctx context.Context, c *checked, sc *wire.SendCtx, now int64, strict bool) (*store.Plan, *wire.PostSendResult, error) {
	if sc == nil {
		sc = &wire.SendCtx{}
	}
	p := &store.Plan{MsgID: c.id, MsgBody: c.body, NowMS: now}
	res := &wire.PostSendResult{OK: true, MsgID: c.id, Deliveries: []wire.Delivery{},
		LocalRecipients: []string{}, DroppedRecipients: []string{}}
	author := c.msg.LogicalSender()
	out := c.newRecord(author, model.Outbox, "", nil, now)
	p.Records = append(p.Records, out)
	res.OutboxRecordID = out.RecordID
	if c.isGroup {
		// As for a dispatch: a group that blocks the author takes nothing
		// from it, in its box, its members' or its external chat.
		blocked, err := s.st.BlockedBy(ctx, author, []string{c.msg.From})
		if err != nil {
			return nil, nil, err
		}
		if blocked[c.msg.From] {
			res.OK, res.Reason = false, "blocked"
			res.DroppedRecipients = append(res.DroppedRecipients, c.msg.From)
			return p, res, nil
		}
	}

	groupChat := false // the group's own routes reach its people
	for _, target := range c.sendTargets() {
		chosen, err := s.sendRoutes(ctx, target, sc)
		if err != nil && !strict && errors.Is(err, model.ErrInvalid) {
			s.log.Warn("delayed post_send: the tunnel it asked for is no route of its recipient any more; using the recipient's routes",
				"msg_id", c.id, "recipient", target, "tunnel_did", sc.TunnelDID)
			chosen, err = s.sendRoutes(ctx, target, &wire.SendCtx{AllRoutes: sc.AllRoutes, Mode: sc.Mode})
		}
		if err != nil {
			return nil, nil, err
		}
		c.deliver(p, res, target, chosen, sc.Mode, now)
		if c.isGroup {
			groupChat = len(chosen) > 0
		}
		if len(chosen) > 0 || c.isGroup {
			continue
		}
		// No route: the recipient is local.
		blocked, err := s.st.BlockedBy(ctx, author, []string{target})
		if err != nil {
			return nil, nil, err
		}
		if blocked[target] {
			res.DroppedRecipients = append(res.DroppedRecipients, target)
			continue
		}
		p.Records = append(p.Records, c.newRecord(target, model.Inbox, "", nil, now))
		res.LocalRecipients = append(res.LocalRecipients, target)
	}
	if c.isGroup {
		res.GroupDelivery = c.delivery
		p.Records = append(p.Records, c.newRecord(c.msg.From, model.GroupInbox, "", nil, now))
		// A member with routes (a person a tunnel brought in; as for a
		// direct send, routes win over an INBOX) would never read an INBOX
		// record: it gets the message where it is, through its best route
		// (all of them with all_routes), unless the group's own chat
		// reaches it. send_ctx's tunnel_did is about the group's routes,
		// not the members'.
		routed, err := s.fanOut(ctx, c, p, nil, now, &res.LocalRecipients, &res.DroppedRecipients, !groupChat)
		if err != nil {
			return nil, nil, err
		}
		mine := &wire.SendCtx{AllRoutes: sc.AllRoutes}
		for _, m := range routed {
			c.deliver(p, res, m.did, chooseRoutes(m.routes, mine), sc.Mode, now)
		}
	}
	if len(res.Deliveries) == 0 && len(res.LocalRecipients) == 0 && len(res.DroppedRecipients) > 0 {
		res.OK, res.Reason = false, "blocked"
	}
	return p, res, nil
}

// deliver adds a TUNNEL_OUTBOX record for target through each of chosen,
// in mode when one is given (else the route's own).
func (c *checked) deliver(p *store.Plan, res *wire.PostSendResult, target string, chosen []model.ContactRoute, mode string, now int64) {
	for _, cr := range chosen {
		m := cr.Mode
		if mode != "" {
			m = mode
		}
		route := &model.Route{TunnelDID: cr.TunnelDID, Platform: cr.Platform, AccountID: cr.AccountID,
			Address: cr.Address, ChatID: cr.ChatID, TargetDID: target, Mode: m, Priority: cr.Priority}
		variant := target + "\x00" + cr.Address + "\x00" + cr.ChatID
		r := c.newRecord(cr.TunnelDID, model.TunnelOutbox, variant, route, now)
		p.Records = append(p.Records, r)
		res.Deliveries = append(res.Deliveries, wire.Delivery{TunnelDID: cr.TunnelDID, RecordID: r.RecordID,
			TargetDID: target, Mode: m, Priority: cr.Priority})
	}
}

// sendTargets are the recipients a post_send of c routes: a group
// message reaches the group's external chat through the group's routes
// (and its local subscribers through the group fan-out).
func (c *checked) sendTargets() []string {
	if c.isGroup {
		return []string{c.msg.From}
	}
	return uniq(c.msg.To)
}

// sendRoutes returns the routes a post_send uses for target (none: the
// target is local). It fails when the send asks for a tunnel the target
// has routes but none through: delivering to its local inbox instead
// would never reach it where it is.
func (s *Service) sendRoutes(ctx context.Context, target string, sc *wire.SendCtx) ([]model.ContactRoute, error) {
	routes, err := s.st.Routes(ctx, target)
	if err != nil {
		return nil, err
	}
	chosen := chooseRoutes(routes, sc)
	if len(routes) > 0 && len(chosen) == 0 {
		return nil, model.Invalid("send_ctx.tunnel_did", fmt.Sprintf("%s has no route through %s (its routes go through %s)",
			target, sc.TunnelDID, strings.Join(routeTunnels(routes), ", ")))
	}
	return chosen, nil
}

// checkSendRoutes fails as planPostSend would on the routes of c's
// recipients; a delayed send is checked so when it is sent, not only when
// it comes due.
func (s *Service) checkSendRoutes(ctx context.Context, c *checked, sc *wire.SendCtx) error {
	if sc == nil || sc.TunnelDID == "" {
		return nil
	}
	for _, target := range c.sendTargets() {
		if _, err := s.sendRoutes(ctx, target, sc); err != nil {
			return err
		}
	}
	return nil
}

// routeTunnels lists the tunnels of routes, each once.
func routeTunnels(routes []model.ContactRoute) []string {
	var out []string
	for _, r := range routes {
		if !slices.Contains(out, r.TunnelDID) {
			out = append(out, r.TunnelDID)
		}
	}
	return out
}

// chooseRoutes picks the routes a post_send uses for one recipient: those
// of the requested tunnel, all of them, or the single best one (highest
// priority, first listed on a tie).
func chooseRoutes(routes []model.ContactRoute, sc *wire.SendCtx) []model.ContactRoute {
	if sc.TunnelDID != "" {
		var only []model.ContactRoute
		for _, r := range routes {
			if r.TunnelDID == sc.TunnelDID {
				only = append(only, r)
			}
		}
		routes = only
	}
	if sc.AllRoutes || len(routes) <= 1 {
		return routes
	}
	best := 0
	for i, r := range routes {
		if r.Priority > routes[best].Priority {
			best = i
		}
	}
	return routes[best : best+1]
}
