package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// Two nodes on one database remember groups, members, routes and blocks
// while they listen: a change through the other node reaches them with its
// notification, one through the node itself at once, and a node that is
// not listening remembers nothing.
func TestContactsAcrossNodes(t *testing.T) {
	schema := newSchema(t)
	a, b, c := openStore(t, schema), openStore(t, schema), openStore(t, schema)
	// a's clock stands still, so its answers never age out (contactsTTL):
	// only a notification can make it forget them.
	frozen := time.Unix(1_700_000_000, 0)
	postgres.SetContactsClock(a, func() time.Time { return frozen })
	ctx := t.Context()
	stopA := listen(t, a)
	// behind writes to the database as no node would: without a
	// notification, so only a node that remembers misses it.
	behind := func(q string) {
		t.Helper()
		if _, err := adminPool(t).Exec(ctx, "BEGIN; SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()+"; "+q+"; COMMIT"); err != nil {
			t.Fatal(err)
		}
	}
	isGroup := func(s *postgres.Store, did string) bool {
		t.Helper()
		d, err := s.GroupDelivery(ctx, did)
		if err != nil {
			t.Fatal(err)
		}
		return d != ""
	}
	blocks := func(s *postgres.Store, owner, sender string) bool {
		t.Helper()
		m, err := s.BlockedBy(ctx, sender, []string{owner})
		if err != nil {
			t.Fatal(err)
		}
		return m[owner]
	}
	routes := func(s *postgres.Store, did string) int {
		t.Helper()
		r, err := s.Routes(ctx, did)
		if err != nil {
			t.Fatal(err)
		}
		return len(r)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 5 s", what)
			}
		}
	}

	// a remembers what it read.
	if isGroup(a, "did:g") || blocks(a, "did:o", "did:s") || routes(a, "did:r") != 0 {
		t.Fatal("an empty database answered otherwise")
	}
	behind("INSERT INTO groups (group_did, updated_at_ms) VALUES ('did:g', 1)")
	behind("INSERT INTO blocks (owner, blocked, at_ms) VALUES ('did:o', 'did:s', 1)")
	behind("INSERT INTO routes (did, idx, tunnel_did) VALUES ('did:r', 0, 'did:tunnel')")
	if isGroup(a, "did:g") || blocks(a, "did:o", "did:s") || routes(a, "did:r") != 0 {
		t.Fatal("a listening node asked the database again: it remembers nothing")
	}
	// c does not listen: it always asks.
	if !isGroup(c, "did:g") || !blocks(c, "did:o", "did:s") || routes(c, "did:r") != 1 {
		t.Fatal("a node that is not listening answered from memory")
	}

	// A change through b reaches a with its notification, and a forgets
	// everything it remembered, the changes made behind its back included.
	if err := b.SetBlock(ctx, "did:o2", "did:s", true, 2); err != nil {
		t.Fatal(err)
	}
	eventually("the other node's change", func() bool { return isGroup(a, "did:g") })
	if !blocks(a, "did:o2", "did:s") || !blocks(a, "did:o", "did:s") || routes(a, "did:r") != 1 {
		t.Fatal("a kept answers from before the notification")
	}
	if isGroup(a, "did:g2") {
		t.Fatal("did:g2 is not a group yet")
	}
	if err := b.SetGroupSubscribers(ctx, "did:g2", []string{"did:m"}, "", 3); err != nil {
		t.Fatal(err)
	}
	eventually("a group created through the other node", func() bool { return isGroup(a, "did:g2") })
	// Membership is remembered too (a stream asks on every read of the
	// group's box), and a member removed through b loses it on a.
	subscribes := func(s *postgres.Store, group, did string) bool {
		t.Helper()
		ok, err := s.IsSubscriber(ctx, group, did)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !subscribes(a, "did:g2", "did:m") {
		t.Fatal("did:m does not subscribe to did:g2 on a")
	}
	behind("DELETE FROM group_subscribers WHERE group_did = 'did:g2'")
	if !subscribes(a, "did:g2", "did:m") {
		t.Fatal("a listening node asked the database again for membership: it remembers nothing")
	}
	if err := b.SetGroupSubscribers(ctx, "did:g2", []string{"did:m2"}, "", 4); err != nil {
		t.Fatal(err)
	}
	eventually("a member removed through the other node", func() bool { return !subscribes(a, "did:g2", "did:m") })
	if !subscribes(a, "did:g2", "did:m2") {
		t.Fatal("the member added through the other node is not seen")
	}
	if err := b.SetRoutes(ctx, "did:r", nil, 1); err != nil {
		t.Fatal(err)
	}
	eventually("routes removed through the other node", func() bool { return routes(a, "did:r") == 0 })
	// A group deleted through b is no group on a, and its member no member.
	if !isGroup(a, "did:g2") || !subscribes(a, "did:g2", "did:m2") { // remembered from here on
		t.Fatal("did:g2 and its member are not seen on a")
	}
	if err := b.DeleteGroup(ctx, "did:g2", 5); err != nil {
		t.Fatal(err)
	}
	eventually("a group deleted through the other node", func() bool { return !isGroup(a, "did:g2") })
	if subscribes(a, "did:g2", "did:m2") {
		t.Fatal("the deleted group's member is still one on a")
	}
	// And one deleted through a itself, at once.
	if err := a.SetGroupSubscribers(ctx, "did:g3", []string{"did:m3"}, "", 6); err != nil {
		t.Fatal(err)
	}
	if !isGroup(a, "did:g3") || !subscribes(a, "did:g3", "did:m3") {
		t.Fatal("a group set through the node itself is not seen at once")
	}
	if err := a.DeleteGroup(ctx, "did:g3", 7); err != nil {
		t.Fatal(err)
	}
	if isGroup(a, "did:g3") || subscribes(a, "did:g3", "did:m3") {
		t.Fatal("a group deleted through the node itself is still one on it")
	}

	// Through a itself: seen at once, not when the notification comes.
	if err := a.SetBlock(ctx, "did:o", "did:s", false, 4); err != nil {
		t.Fatal(err)
	}
	if blocks(a, "did:o", "did:s") {
		t.Fatal("an unblock through the node itself is not seen at once")
	}
	if err := a.SetRoutes(ctx, "did:r", []model.ContactRoute{{TunnelDID: "did:t2"}}, 1); err != nil {
		t.Fatal(err)
	}
	if routes(a, "did:r") != 1 {
		t.Fatal("routes set through the node itself are not seen at once")
	}

	// Once a stops listening it remembers nothing.
	stopA()
	behind("DELETE FROM groups WHERE group_did = 'did:g'")
	if isGroup(a, "did:g") {
		t.Fatal("a node that stopped listening answered from memory")
	}
}

// An edit by hand notifies no one: a listening node sees it once its
// answer is 5 s old.
func TestContactsExpire(t *testing.T) {
	schema := newSchema(t)
	a := openStore(t, schema)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	postgres.SetContactsClock(a, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	listen(t, a)
	ctx := t.Context()
	if d, err := a.GroupDelivery(ctx, "did:g"); err != nil || d != "" {
		t.Fatalf("GroupDelivery on an empty database: %q, %v", d, err)
	}
	if _, err := adminPool(t).Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "groups"}.Sanitize()+
		" (group_did, updated_at_ms) VALUES ('did:g', 1)"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after time.Duration
		want  bool
	}{{4 * time.Second, false}, {time.Second, true}} {
		advance(c.after)
		if d, err := a.GroupDelivery(ctx, "did:g"); err != nil || (d != "") != c.want {
			t.Fatalf("GroupDelivery after %s more: %q, %v; want a group: %v", c.after, d, err, c.want)
		}
	}
}

// listen runs s's Listen until the returned stop is called (or t ends), and
// returns once the LISTEN is in effect.
func listen(t *testing.T, s store.Notifier) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, func() { close(ready) }, func(store.Change) {})
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatal("Listen ended before it was ready")
	}
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}
