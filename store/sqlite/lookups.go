package sqlite

import (
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

// The embedded store is the only writer of its file: the server locks the
// data directory, and every write goes through this Store. So the small
// lookups that every request or send makes and that almost never change
// (a token's identity, whether a DID is a group, a DID's routes, who blocks
// whom, who subscribes to a group) are answered from memory
// (store/internal/lookup) until the writes that change them forget them.
// Measured under msgload's enqueue, the first four were 11.5% of the
// server's CPU, each a read transaction on the pool; the last was 7.5%
// of a group box's stream push.

// lookups are the Store's caches, one per kind of answer.
type lookups struct {
	tokens  lookup.Cache[model.Identity]       // token hash
	holders lookup.Cache[bool]                 // DID: whether a token is bound to it
	groups  lookup.Cache[model.GroupDelivery]  // DID: its delivery, "" if not a group
	routes  lookup.Cache[[]model.ContactRoute] // DID
	blocked lookup.Cache[bool]                 // owner + "\x00" + sender
	// lookup.PairKey(group, DID): every read of a group's box by a subscriber
	// asks, and a stream on the box reads it after each change.
	subscribed lookup.Cache[bool]
}
