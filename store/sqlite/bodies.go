package sqlite

import "sync"

// bodyCache keeps recently stored and read message bodies in memory. A
// body never changes under its id (the id is a hash of it), so the only
// invalidation is retention deleting bodies. Measured under msgload's
// claim+ack, reading the body back (once for the claim, once more for the
// acknowledged record) was 15% of the server's CPU, a read transaction
// each, for a body the same process had written milliseconds before.
//
// It is two maps used as generations, a cheap approximation of LRU: hits
// in the old map move to the new one, and when the new one holds half the
// budget the old one is dropped. Callers must not modify returned bodies.
type bodyCache struct {
	mu       sync.Mutex
	cur, old map[string][]byte
	curBytes int
	limit    int    // bytes over both maps
	gen      uint64 // bumped by forgetAll; see lookup for why
}

// bodyCacheBytes is the default budget: the bodies of the last ~16,000
// 1 KiB messages, a small share of the server's memory bound.
const bodyCacheBytes = 16 << 20

func newBodyCache(limit int) *bodyCache {
	return &bodyCache{cur: map[string][]byte{}, old: map[string][]byte{}, limit: limit}
}

// get returns the cached body of id, and the generation for putIfCurrent.
func (c *bodyCache) get(id string) ([]byte, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.cur[id]; ok {
		return b, c.gen, true
	}
	b, ok := c.old[id]
	if ok {
		delete(c.old, id)
		c.add(id, b)
	}
	return b, c.gen, ok
}

// put caches a body just committed by this store.
func (c *bodyCache) put(id string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(id, body)
}

// putIfCurrent caches a body read from the database, unless retention
// deleted bodies since the reader took gen.
func (c *bodyCache) putIfCurrent(gen uint64, id string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen {
		c.add(id, body)
	}
}

func (c *bodyCache) add(id string, body []byte) {
	if len(body) > c.limit/8 {
		return // one huge body must not flush everything else
	}
	if _, ok := c.cur[id]; ok {
		return
	}
	if c.curBytes+len(body) > c.limit/2 {
		c.old, c.cur, c.curBytes = c.cur, make(map[string][]byte, len(c.cur)), 0
	}
	c.cur[id] = body
	c.curBytes += len(body)
}

// forgetAll empties the cache. A write that deletes bodies calls it twice:
// inside its transaction, so that a reader that took the generation before
// cannot put a body back, and after the commit, so that one that took it in
// between (and read the old snapshot) is dropped too.
func (c *bodyCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.cur)
	clear(c.old)
	c.curBytes = 0
}
