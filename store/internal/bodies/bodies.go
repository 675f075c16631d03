// Package bodies is the stores' memory of message bodies: those a store
// just wrote and those it read recently. A body never changes under its id
// (the id is a hash of it), so the only invalidation is retention deleting
// bodies, and a body remembered by one node while another deletes it is
// still the right body: callers reach a body through a record or a
// permission check that reads the database.
//
// Measured under msgload's claim+ack on SQLite, reading the body back (once
// for the claim, once more for the acknowledged record) was 15% of the
// server's CPU, a read transaction each, for a body the same process had
// written milliseconds before; on PostgreSQL each such read is a round
// trip.
package bodies

import "sync"

// Cache keeps recently stored and read message bodies in memory.
//
// It is two maps used as generations, a cheap approximation of LRU: hits
// in the old map move to the new one, and when the new one holds half the
// budget the old one is dropped. Callers must not modify returned bodies.
type Cache struct {
	mu       sync.Mutex
	cur, old map[string][]byte
	curBytes int
	limit    int    // bytes over both maps
	gen      uint64 // bumped by ForgetAll; see package lookup for why
}

// DefaultBytes is the default budget: the bodies of the last ~16,000
// 1 KiB messages, a small share of the server's memory bound.
const DefaultBytes = 16 << 20

// New returns a cache holding at most limit bytes of bodies.
func New(limit int) *Cache {
	return &Cache{cur: map[string][]byte{}, old: map[string][]byte{}, limit: limit}
}

// Get returns the cached body of id, and the generation for PutIfCurrent.
func (c *Cache) Get(id string) ([]byte, uint64, bool) {
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

// GetMany looks up several ids under one lock: the bodies it holds, the
// ids it does not (in order), and the generation for PutIfCurrent.
func (c *Cache) GetMany(ids []string) (found map[string][]byte, missing []string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	found = make(map[string][]byte, len(ids))
	for _, id := range ids {
		if b, ok := c.cur[id]; ok {
			found[id] = b
		} else if b, ok := c.old[id]; ok {
			delete(c.old, id)
			c.add(id, b)
			found[id] = b
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing, c.gen
}

// Put caches a body just written by this store.
func (c *Cache) Put(id string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(id, body)
}

// PutIfCurrent caches a body read from the database, unless retention
// deleted bodies since the reader took gen.
func (c *Cache) PutIfCurrent(gen uint64, id string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen {
		c.add(id, body)
	}
}

func (c *Cache) add(id string, body []byte) {
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

// ForgetAll empties the cache. A write that deletes bodies calls it twice:
// inside its transaction, so that a reader that took the generation before
// cannot put a body back, and after the commit, so that one that took it in
// between (and read the old snapshot) is dropped too. It reaches this
// node's cache only: see the package comment for why that is enough.
func (c *Cache) ForgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.cur)
	clear(c.old)
	c.curBytes = 0
}
