package postgres

import (
	"sync/atomic"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

// A node's memory of the lookups that almost never change: whether a DID
// is a group, a DID's routes, who blocks whom (three round trips per send,
// outside the group transaction; without them a send went through in
// 25–30% less server CPU), and who subscribes to a group (asked on every
// read of a group's box, by each stream on it).
//
// The SQLite store keeps such answers until its own writes forget them;
// a PostgreSQL node cannot see other nodes' writes, so it remembers only
// while it hears about them. Every write of groups, routes or blocks
// notifies contactsPayload on the schema's channel inside its transaction
// (so the notification arrives once the write is visible), and each node
// forgets all it remembers when one arrives, and when its own write ends.
// While no Listen session is up (before the node's first one, and whenever
// its LISTEN connection is lost) it remembers nothing and asks the database
// every time. So a change made through another node reaches this node's
// sends as soon as its notification does. An answer is also kept for
// contactsTTL at most, so that an edit made by hand in the database, which
// notifies no one, is seen within that time too.
type contacts struct {
	listening atomic.Int32                       // Listen sessions up
	groups    lookup.Cache[model.GroupDelivery]  // DID: its delivery, "" if not a group
	routes    lookup.Cache[[]model.ContactRoute] // DID
	blocked   lookup.Cache[bool]                 // lookup.BlockKey(owner, sender)
	// lookup.PairKey(group, did): every read of a group's box by a
	// subscriber asks, and a stream on the box reads it after each change.
	subscribed lookup.Cache[bool]
}

// contactsTTL bounds how long an answer is kept, notification or not.
const contactsTTL = 5 * time.Second

// setClock sets the caches' TTL and clock (nil: time.Now).
func (c *contacts) setClock(now func() time.Time) {
	c.groups.TTL, c.routes.TTL, c.blocked.TTL, c.subscribed.TTL = contactsTTL, contactsTTL, contactsTTL, contactsTTL
	c.groups.Now, c.routes.Now, c.blocked.Now, c.subscribed.Now = now, now, now, now
}

// contactsPayload is the notification of a change to groups, routes or
// blocks.
const contactsPayload = "\x1fcontacts"

// remembering reports whether answers may be kept and used now.
func (c *contacts) remembering() bool { return c.listening.Load() > 0 }

// forget drops every answer, and every fill under way.
func (c *contacts) forget() {
	c.groups.Clear()
	c.routes.Clear()
	c.blocked.Clear()
	c.subscribed.Clear()
}
