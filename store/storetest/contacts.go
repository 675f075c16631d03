package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func contactTests() []testCase {
	return []testCase{
		{"GroupSubscribers", testGroups},
		{"EmptyGroupIsAGroup", testEmptyGroup},
		{"DeleteGroup", testDeleteGroup},
		{"GroupDelivery", testGroupDelivery},
		{"Blocks", testBlocks},
		{"Routes", testRoutes},
		{"RoutesOfMany", testRoutesOf},
	}
}

func requireSubscribers(t *testing.T, s store.Store, group string, want []string) {
	t.Helper()
	got, err := s.GroupSubscribers(t.Context(), group)
	requireNoError(t, err, fmt.Sprintf("GroupSubscribers(%s)", group))
	requireSameSet(t, got, want, fmt.Sprintf("GroupSubscribers(%s)", group))
}

func requireBool(t *testing.T, got bool, err error, want bool, what string) {
	t.Helper()
	requireNoError(t, err, what)
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// isGroup: a DID is a group when it has a delivery.
func isGroup(ctx context.Context, s store.Store, did string) (bool, error) {
	d, err := s.GroupDelivery(ctx, did)
	return d != "", err
}

func requireNotGroup(t *testing.T, s store.Store, did string) {
	t.Helper()
	ok, err := isGroup(t.Context(), s, did)
	requireBool(t, ok, err, false, fmt.Sprintf("isGroup(%s)", did))
	subs, err := s.GroupSubscribers(t.Context(), did)
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GroupSubscribers(%s) of a non-group = %v, %v; want model.ErrNotFound", did, subs, err)
	}
}

// SetGroupSubscribers replaces the whole subscriber list.
func testGroups(t *testing.T, s store.Store) {
	ctx := t.Context()
	const g2 = "did:test:group-2"
	requireNotGroup(t, s, grp)

	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{alice, bob, carol}, "", base), "SetGroupSubscribers")
	ok, err := isGroup(ctx, s, grp)
	requireBool(t, ok, err, true, "isGroup after SetGroupSubscribers")
	requireSubscribers(t, s, grp, []string{alice, bob, carol})
	for did, want := range map[string]bool{alice: true, bob: true, carol: true, dave: false} {
		ok, err := s.IsSubscriber(ctx, grp, did)
		requireBool(t, ok, err, want, fmt.Sprintf("IsSubscriber(group, %s)", did))
	}

	requireNoError(t, s.SetGroupSubscribers(ctx, g2, []string{alice}, "", base), "SetGroupSubscribers(g2)")
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{carol, dave}, "", base+10), "SetGroupSubscribers (replace)")
	requireSubscribers(t, s, grp, []string{carol, dave})
	for did, want := range map[string]bool{alice: false, bob: false, carol: true, dave: true} {
		ok, err := s.IsSubscriber(ctx, grp, did)
		requireBool(t, ok, err, want, fmt.Sprintf("IsSubscriber(group, %s) after replace", did))
	}
	// Groups are independent.
	requireSubscribers(t, s, g2, []string{alice})
	ok, err = s.IsSubscriber(ctx, g2, alice)
	requireBool(t, ok, err, true, "IsSubscriber(g2, alice)")

	// Subscribers are not groups; unknown groups have no subscribers.
	requireNotGroup(t, s, alice)
	requireNotGroup(t, s, "did:test:group-unknown")
	ok, err = s.IsSubscriber(ctx, "did:test:group-unknown", alice)
	requireBool(t, ok, err, false, "IsSubscriber(unknown group, alice)")
}

// A group with no subscribers is still a group.
func testEmptyGroup(t *testing.T, s store.Store) {
	ctx := t.Context()
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{}, "", base), "SetGroupSubscribers(empty)")
	ok, err := isGroup(ctx, s, grp)
	requireBool(t, ok, err, true, "isGroup(empty group)")
	requireSubscribers(t, s, grp, nil)

	const g2 = "did:test:group-2"
	requireNoError(t, s.SetGroupSubscribers(ctx, g2, []string{alice, bob}, "", base), "SetGroupSubscribers")
	requireNoError(t, s.SetGroupSubscribers(ctx, g2, nil, "", base+1), "SetGroupSubscribers(nil)")
	ok, err = isGroup(ctx, s, g2)
	requireBool(t, ok, err, true, "isGroup after emptying")
	requireSubscribers(t, s, g2, nil)
	ok, err = s.IsSubscriber(ctx, g2, alice)
	requireBool(t, ok, err, false, "IsSubscriber after emptying")
}

// DeleteGroup makes a group a plain DID again: no delivery, no
// subscribers, no membership (read right after, through any cache), and one
// group.deleted event; another group is untouched, and a DID that is no
// group is not found.
func testDeleteGroup(t *testing.T, s store.Store) {
	ctx := t.Context()
	const g2 = "did:test:group-2"
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{alice, bob}, model.DeliverToGroup, base), "SetGroupSubscribers")
	requireNoError(t, s.SetGroupSubscribers(ctx, g2, []string{alice}, "", base), "SetGroupSubscribers(g2)")
	ok, err := s.IsSubscriber(ctx, grp, alice) // cached from here on, where a store caches
	requireBool(t, ok, err, true, "IsSubscriber before the delete")
	requireDelivery(t, s, grp, model.DeliverToGroup)

	requireNoError(t, s.DeleteGroup(ctx, grp, base+5), "DeleteGroup")
	requireNotGroup(t, s, grp)
	_, err = s.GroupSubscribers(ctx, grp)
	requireErrIs(t, err, model.ErrNotFound, "GroupSubscribers of a deleted group")
	ok, err = s.IsSubscriber(ctx, grp, alice)
	requireBool(t, ok, err, false, "IsSubscriber after the delete")
	requireSubscribers(t, s, g2, []string{alice})
	evs := eventsOf(allEvents(t, s, ""), model.EventGroupDeleted, "")
	if len(evs) != 1 || evs[0].Owner != grp || evs[0].AtMS != base+5 || evs[0].Detail != "subscribers: 2" {
		t.Fatalf("group.deleted events = %s; want one for %s with its 2 subscribers", dump(evs), grp)
	}

	requireErrIs(t, s.DeleteGroup(ctx, grp, base+6), model.ErrNotFound, "DeleteGroup again")
	requireErrIs(t, s.DeleteGroup(ctx, alice, base+6), model.ErrNotFound, "DeleteGroup of a DID that is no group")
	if n := len(eventsOf(allEvents(t, s, ""), model.EventGroupDeleted, "")); n != 1 {
		t.Fatalf("%d group.deleted events after two refused deletes, want 1", n)
	}
	// Made a group again, it starts anew.
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{carol}, "", base+7), "SetGroupSubscribers after the delete")
	requireDelivery(t, s, grp, model.DeliverToMembers)
	requireSubscribers(t, s, grp, []string{carol})
}

func requireDelivery(t *testing.T, s store.Store, group string, want model.GroupDelivery) {
	t.Helper()
	got, err := s.GroupDelivery(t.Context(), group)
	requireNoError(t, err, fmt.Sprintf("GroupDelivery(%s)", group))
	if got != want {
		t.Fatalf("GroupDelivery(%s) = %q, want %q", group, got, want)
	}
}

// A group's delivery starts as members, changes only when given, and
// survives replacing the subscribers; a DID that is no group has none.
func testGroupDelivery(t *testing.T, s store.Store) {
	ctx := t.Context()
	const g2 = "did:test:group-2"
	requireDelivery(t, s, grp, "")
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{alice}, "", base), "SetGroupSubscribers")
	requireDelivery(t, s, grp, model.DeliverToMembers)

	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{alice, bob}, model.DeliverToGroup, base+1), "SetGroupSubscribers(group)")
	requireDelivery(t, s, grp, model.DeliverToGroup)
	requireSubscribers(t, s, grp, []string{alice, bob})
	// "" keeps it, whatever the subscribers become.
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{carol}, "", base+2), "SetGroupSubscribers(keep)")
	requireDelivery(t, s, grp, model.DeliverToGroup)
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, nil, "", base+3), "SetGroupSubscribers(empty, keep)")
	requireDelivery(t, s, grp, model.DeliverToGroup)
	ok, err := isGroup(ctx, s, grp)
	requireBool(t, ok, err, true, "isGroup of an empty group delivering to the group")

	// A new group may start in either; groups do not share it.
	requireNoError(t, s.SetGroupSubscribers(ctx, g2, []string{bob}, model.DeliverToGroup, base), "SetGroupSubscribers(g2, group)")
	requireDelivery(t, s, g2, model.DeliverToGroup)
	requireNoError(t, s.SetGroupSubscribers(ctx, grp, []string{carol}, model.DeliverToMembers, base+4), "SetGroupSubscribers(back to members)")
	requireDelivery(t, s, grp, model.DeliverToMembers)
	requireDelivery(t, s, g2, model.DeliverToGroup)
	requireDelivery(t, s, alice, "")
}

func requireBlockedBy(t *testing.T, s store.Store, sender string, owners []string, want ...string) {
	t.Helper()
	got, err := s.BlockedBy(t.Context(), sender, owners)
	requireNoError(t, err, "BlockedBy")
	var blocking []string
	for o, b := range got {
		if b {
			blocking = append(blocking, o)
		}
	}
	requireSameSet(t, blocking, want, fmt.Sprintf("owners blocking %s", sender))
}

// SetBlock turns a directed block on and off; BlockedBy reports which of the
// given owners block the sender.
func testBlocks(t *testing.T, s store.Store) {
	ctx := t.Context()
	const spam, other = "did:test:spammer", "did:test:other"
	owners := []string{alice, bob, carol}
	requireBlockedBy(t, s, spam, owners)

	requireNoError(t, s.SetBlock(ctx, alice, spam, true, base), "SetBlock")
	requireNoError(t, s.SetBlock(ctx, carol, spam, true, base), "SetBlock")
	requireNoError(t, s.SetBlock(ctx, bob, other, true, base), "SetBlock")
	requireBlockedBy(t, s, spam, owners, alice, carol)
	requireBlockedBy(t, s, other, owners, bob)
	requireBlockedBy(t, s, spam, []string{bob, carol}, carol)
	requireBlockedBy(t, s, alice, []string{spam, bob, carol}) // blocks are directed
	requireBlockedBy(t, s, spam, nil)

	requireNoError(t, s.SetBlock(ctx, alice, spam, true, base+1), "SetBlock again")
	requireBlockedBy(t, s, spam, owners, alice, carol)

	requireNoError(t, s.SetBlock(ctx, alice, spam, false, base+2), "SetBlock off")
	requireBlockedBy(t, s, spam, owners, carol)
	requireNoError(t, s.SetBlock(ctx, dave, spam, false, base+3), "SetBlock off without a block")
	requireBlockedBy(t, s, spam, []string{alice, bob, carol, dave}, carol)
	requireBlockedBy(t, s, other, owners, bob)

	requireNoError(t, s.SetBlock(ctx, carol, other, true, base+4), "SetBlock")
	got, err := s.ListBlocks(ctx, carol, 0)
	requireNoError(t, err, "ListBlocks")
	want := []model.Block{{Owner: carol, DID: other, AtMS: base + 4}, {Owner: carol, DID: spam, AtMS: base}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListBlocks(carol) = %+v, want %+v", got, want)
	}
	if got, err := s.ListBlocks(ctx, carol, 1); err != nil || len(got) != 1 || got[0].DID != other {
		t.Fatalf("ListBlocks(carol, 1) = %+v, %v", got, err)
	}
	if got, err := s.ListBlocks(ctx, alice, 0); err != nil || len(got) != 0 {
		t.Fatalf("ListBlocks(alice), whose block was lifted = %+v, %v", got, err)
	}
}

func requireRoutes(t *testing.T, s store.Store, did string, want []model.ContactRoute) {
	t.Helper()
	got, err := s.Routes(t.Context(), did)
	requireNoError(t, err, "Routes")
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Routes(%s)\n got: %s\nwant: %s (in this order)", did, dump(got), dump(want))
	}
}

// SetRoutes replaces the list and keeps its order.
func testRoutes(t *testing.T, s store.Store) {
	ctx := t.Context()
	requireRoutes(t, s, alice, nil)

	r1 := model.ContactRoute{TunnelDID: tunnel, Address: "@alice", Platform: "telegram", ChatID: "42", AccountID: "bot-1", Mode: "dm", Priority: 5}
	r2 := model.ContactRoute{TunnelDID: "did:test:tunnel-mail", Address: "alice@example.com", Platform: "email", Priority: 1}
	r3 := model.ContactRoute{TunnelDID: "did:test:tunnel-slack", Platform: "slack", ChatID: "C123", Mode: "channel", Priority: 3}
	// Deliberately not in priority or name order: the order is the caller's.
	requireNoError(t, s.SetRoutes(ctx, alice, []model.ContactRoute{r1, r2, r3}, base), "SetRoutes")
	requireRoutes(t, s, alice, []model.ContactRoute{r1, r2, r3})
	requireNoError(t, s.SetRoutes(ctx, bob, []model.ContactRoute{r2}, base), "SetRoutes(bob)")

	r3b := r3
	r3b.ChatID = "C999"
	requireNoError(t, s.SetRoutes(ctx, alice, []model.ContactRoute{r3b, r1}, base), "SetRoutes (replace)")
	requireRoutes(t, s, alice, []model.ContactRoute{r3b, r1})
	requireRoutes(t, s, bob, []model.ContactRoute{r2})

	requireNoError(t, s.SetRoutes(ctx, alice, nil, base), "SetRoutes(nil)")
	requireRoutes(t, s, alice, nil)
	requireRoutes(t, s, bob, []model.ContactRoute{r2})
	requireRoutes(t, s, "did:test:unknown", nil)
}

// RoutesOf answers for many DIDs at once, each one's routes in order and
// only those that have any, and sees every change, as Routes does.
func testRoutesOf(t *testing.T, s store.Store) {
	ctx := t.Context()
	r1 := model.ContactRoute{TunnelDID: tunnel, Address: "@alice", Platform: "telegram", ChatID: "42", Priority: 5}
	r2 := model.ContactRoute{TunnelDID: "did:test:tunnel-mail", Address: "alice@example.com", Platform: "email", Priority: 1}
	r3 := model.ContactRoute{TunnelDID: "did:test:tunnel-slack", Platform: "slack", ChatID: "C123", Mode: "channel"}
	requireRoutesOf := func(dids []string, want map[string][]model.ContactRoute, when string) {
		t.Helper()
		got, err := s.RoutesOf(ctx, dids)
		requireNoError(t, err, "RoutesOf")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("RoutesOf(%v) %s\n got: %s\nwant: %s", dids, when, dump(got), dump(want))
		}
	}
	requireRoutesOf(nil, map[string][]model.ContactRoute{}, "of no one")
	requireRoutesOf([]string{alice, bob}, map[string][]model.ContactRoute{}, "before any route")
	requireNoError(t, s.SetRoutes(ctx, alice, []model.ContactRoute{r2, r1}, base), "SetRoutes(alice)")
	requireNoError(t, s.SetRoutes(ctx, carol, []model.ContactRoute{r3}, base), "SetRoutes(carol)")
	all := []string{dave, carol, alice, bob, alice}
	want := map[string][]model.ContactRoute{alice: {r2, r1}, carol: {r3}}
	requireRoutesOf(all, want, "")
	requireRoutesOf(all, want, "asked again")
	requireRoutes(t, s, alice, []model.ContactRoute{r2, r1})

	requireNoError(t, s.SetRoutes(ctx, alice, nil, base), "SetRoutes(alice, none)")
	requireNoError(t, s.SetRoutes(ctx, bob, []model.ContactRoute{r1}, base), "SetRoutes(bob)")
	requireRoutesOf(all, map[string][]model.ContactRoute{bob: {r1}, carol: {r3}}, "after the routes changed")
}
