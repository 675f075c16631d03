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
//
// The bodies a store wrote and those it read back are kept apart, because
// a queue reads its bodies in the order they were written, each once or
// twice. A single LRU over both (what this was: two generations, a hit
// moving a body to the newer one) turned a backlog of half its budget or
// more into a miss for nearly every claim: each hit and each body read
// back pushed out the unread bodies the consumers needed next. With 16 MiB
// and 1.3 KB bodies, draining 10,000 messages missed 42% of the claims and
// 20,000 missed all of them; now they miss none and 44%
// (TestBodyCacheDrainsABacklog; docs/benchmarks.md, eighteenth round).
package bodies

import "sync"

// Cache keeps recently stored and read message bodies in memory, in two
// parts:
//
//   - written: the bodies the store wrote, first in first out. A hit does
//     not move a body, so a backlog drains through it in order and every
//     body that still fits is there when its consumer comes.
//   - read: bodies read from the database (another node wrote them, or they
//     left the written part), in two generations, a cheap approximation of
//     LRU: hits in the old map move to the new one, and when the new one
//     holds half of this part's budget the old one is dropped. A body read
//     twice (a claim, then its ack) or by many (a group's members) is read
//     from the database once, and reading an old backlog cannot flush the
//     written part.
//
// Callers must not modify returned bodies.
type Cache struct {
	mu sync.Mutex

	written      map[string][]byte
	queue        []string // written's ids, oldest first from head
	head         int
	writtenBytes int
	writtenLimit int

	cur, old  map[string][]byte // the read part
	curBytes  int
	readLimit int // bytes over both generations

	gen uint64 // bumped by ForgetAll; see package lookup for why
}

// DefaultBytes is the default budget over both parts (of body bytes; an
// entry's id and map slot add about 150 bytes): 14 MiB of bodies
// written (the last ~11,000 messages of 1.3 KB) and 2 MiB read back.
// Bodies are most of the cache's memory, and at GOGC=100 every byte kept
// live raises the heap's peak by about two: a budget of 20 MiB put the
// server's peak RSS during msgload's fan-out to 10,000 at 286-288 MiB,
// against 257 MiB at 16 (the bound is 300).
const DefaultBytes = 16 << 20

// New returns a cache holding at most limit bytes of bodies: seven eighths
// for those written, an eighth for those read back.
func New(limit int) *Cache {
	return &Cache{written: map[string][]byte{}, writtenLimit: limit - limit/8,
		cur: map[string][]byte{}, old: map[string][]byte{}, readLimit: limit / 8}
}

// Get returns the cached body of id, and the generation for PutIfCurrent.
func (c *Cache) Get(id string) ([]byte, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.get(id)
	return b, c.gen, ok
}

// GetMany looks up several ids under one lock: the bodies it holds, the
// ids it does not (in order), and the generation for PutIfCurrent.
func (c *Cache) GetMany(ids []string) (found map[string][]byte, missing []string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	found = make(map[string][]byte, len(ids))
	for _, id := range ids {
		if b, ok := c.get(id); ok {
			found[id] = b
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing, c.gen
}

func (c *Cache) get(id string) ([]byte, bool) {
	if b, ok := c.written[id]; ok {
		return b, true
	}
	if b, ok := c.cur[id]; ok {
		return b, true
	}
	b, ok := c.old[id]
	if ok {
		delete(c.old, id)
		c.addRead(id, b)
	}
	return b, ok
}

// Put caches a body just written by this store.
func (c *Cache) Put(id string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(body) == 0 || len(body) > c.writtenLimit/8 { // one huge body must not flush everything else
		return
	}
	if _, ok := c.written[id]; ok {
		return
	}
	for c.writtenBytes+len(body) > c.writtenLimit && c.head < len(c.queue) {
		c.writtenBytes -= len(c.written[c.queue[c.head]])
		delete(c.written, c.queue[c.head])
		c.queue[c.head] = ""
		c.head++
	}
	if c.head > len(c.queue)/2 { // reuse the slice's front once half of it is spent
		n := copy(c.queue, c.queue[c.head:])
		clear(c.queue[n:])
		c.queue, c.head = c.queue[:n], 0
	}
	c.written[id] = body
	c.queue = append(c.queue, id)
	c.writtenBytes += len(body)
}

// PutIfCurrent caches a body read from the database, unless retention
// deleted bodies since the reader took gen.
func (c *Cache) PutIfCurrent(gen uint64, id string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen {
		c.addRead(id, body)
	}
}

func (c *Cache) addRead(id string, body []byte) {
	// Up to half of the part, alone in its generation: a message of the
	// default size limit (1 MiB) that a group's members read on a node
	// that did not write it is read from the database once.
	if len(body) == 0 || len(body) > c.readLimit/2 {
		return
	}
	if _, ok := c.cur[id]; ok {
		return
	}
	if c.curBytes+len(body) > c.readLimit/2 {
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
	// New maps rather than clear: a map keeps the buckets of its peak.
	c.written, c.queue, c.head, c.writtenBytes = map[string][]byte{}, nil, 0, 0
	c.cur, c.old, c.curBytes = map[string][]byte{}, map[string][]byte{}, 0
}
