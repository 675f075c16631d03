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
// node is forgotten here at once. Unknown tokens are never remembered, so a new
// token works on every node at once, and guessing tokens cannot fill the
// cache.
const (
	tokenTTL = 5 * time.Second
	// tokenCacheMax bounds the memory: past it, the cache starts over.
	tokenCacheMax = 10_000
)

type tokenEntry struct {
	id      model.Identity
	expires int64 // unix ms
}

type tokenCache struct {
	mu sync.Mutex
	m  map[string]tokenEntry
}

func newTokenCache() *tokenCache { return &tokenCache{m: map[string]tokenEntry{}} }

// get returns the identity remembered for hash, if it has not expired.
func (c *tokenCache) get(hash string, nowMS int64) (model.Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[hash]
	if !ok || nowMS >= e.expires {
		return model.Identity{}, false
	}
	return e.id, true
}

// put remembers id for hash until nowMS + tokenTTL.
func (c *tokenCache) put(hash string, id model.Identity, nowMS int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= tokenCacheMax {
		c.m = map[string]tokenEntry{}
	}
	c.m[hash] = tokenEntry{id: id, expires: nowMS + tokenTTL.Milliseconds()}
}

// forget drops what is remembered for hash.
func (c *tokenCache) forget(hash string) {
	c.mu.Lock()
	delete(c.m, hash)
	c.mu.Unlock()
}
