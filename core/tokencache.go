package core

import (
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

// Every request names its token, and looking the token up was a store
// read per request: on PostgreSQL a round trip, one of the two to four a
// send or an ack costs. So identities are remembered for tokenTTL after a
// lookup found them.
//
// What that costs: a token changed in the store by something other than
// this node (another node re-binding it, or a row deleted by hand) keeps
// its old identity here for up to tokenTTL. A token changed through this
// node is forgotten here at once, and a lookup that was under way while
// it changed does not put the old identity back (gen). Unknown tokens are
// never remembered, so a new token works on every node at once, and
// guessing tokens cannot fill the cache.
const (
	tokenTTL = 5 * time.Second
	// tokenCacheMax bounds the memory: past it, the cache starts over.
	tokenCacheMax = 10_000
)

type tokenEntry struct {
	id     model.Identity
	stored int64 // unix ms
}

type tokenCache struct {
	mu sync.Mutex
	m  map[string]tokenEntry
	// gen counts forgets: a lookup remembers its answer only if no token
	// was forgotten while it read the store.
	gen uint64
}

func newTokenCache() *tokenCache { return &tokenCache{m: map[string]tokenEntry{}} }

// get returns the identity remembered for hash, if it is younger than
// tokenTTL. An entry from the future (the clock stepped back) counts as
// expired, so a clock step cannot stretch its life.
func (c *tokenCache) get(hash string, nowMS int64) (model.Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || nowMS < e.stored || nowMS-e.stored >= tokenTTL.Milliseconds() {
		return model.Identity{}, false
	}
	return e.id, true
}

// generation is what a lookup passes to put once it has read the store.
func (c *tokenCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put remembers id for hash, unless a token was forgotten since gen.
func (c *tokenCache) put(hash string, id model.Identity, nowMS int64, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.m) >= tokenCacheMax {
		c.m = map[string]tokenEntry{}
	}
	c.m[hash] = tokenEntry{id: id, stored: nowMS}
}

// forget drops what is remembered for hash, and keeps lookups under way
// from remembering what they read before.
func (c *tokenCache) forget(hash string) {
	c.mu.Lock()
	delete(c.m, hash)
	c.gen++
	c.mu.Unlock()
}
