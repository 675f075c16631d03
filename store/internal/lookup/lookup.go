// Package lookup is the stores' memory of small answers that every request
// or send asks for and that almost never change: a token's identity,
// whether a DID is a group, a DID's routes, who blocks whom.
//
// A fill races with an invalidation: a read that began before a write
// committed may finish after the write forgot the key, and must not put
// the old answer back. Each lookup therefore carries a generation that
// Forget bumps; Put stores only if the generation the reader started with
// is still current.
//
// A store that is its database's only writer (SQLite) forgets in its
// writes and keeps answers until then; one that shares its database with
// other nodes (PostgreSQL) cannot hear their writes, so it keeps answers
// for a TTL only.
package lookup

import (
	"sync"
	"time"
)

// Max bounds each cache's entries. Reaching it clears the cache: simpler
// than an LRU, and the working set of a server (its tokens, its groups,
// the DIDs it routes) is far smaller.
const Max = 1 << 16

// Cache is one kind of answer, by key. The zero value keeps answers until
// they are forgotten.
type Cache[V any] struct {
	// TTL, when set, is how long an answer is kept. Ages are taken from
	// Go's monotonic clock, so a step of the wall clock cannot stretch
	// them.
	TTL time.Duration
	// Now replaces time.Now (tests).
	Now func() time.Time

	mu  sync.Mutex
	gen uint64
	m   map[string]entry[V]
}

type entry[V any] struct {
	v  V
	at time.Time
}

// now is the time an answer's age is measured against; without a TTL no
// age is kept, and the clock is not read on the hot path.
func (c *Cache[V]) now() time.Time {
	switch {
	case c.TTL <= 0:
		return time.Time{}
	case c.Now != nil:
		return c.Now()
	}
	return time.Now()
}

// fresh reports whether e may still be used; c.mu is held.
func (c *Cache[V]) fresh(e entry[V], now time.Time) bool {
	if c.TTL <= 0 {
		return true
	}
	age := now.Sub(e.at)
	return age >= 0 && age < c.TTL
}

// Get returns the cached value of k, and the generation to pass to Put
// after a miss.
func (c *Cache[V]) Get(k string) (v V, gen uint64, ok bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if ok && !c.fresh(e, now) {
		return v, c.gen, false
	}
	return e.v, c.gen, ok
}

// GetMany is Get for several keys under one lock (a group fan-out asks
// about thousands): vals[i] is the answer for keys[i], missing lists the
// indexes it has none for.
func (c *Cache[V]) GetMany(keys []string) (vals []V, missing []int, gen uint64) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	vals = make([]V, len(keys))
	for i, k := range keys {
		e, ok := c.m[k]
		if !ok || !c.fresh(e, now) {
			missing = append(missing, i)
			continue
		}
		vals[i] = e.v
	}
	return vals, missing, c.gen
}

// Put caches v under k unless a Forget happened since gen was read.
func (c *Cache[V]) Put(gen uint64, k string, v V) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= Max {
		c.m = make(map[string]entry[V])
	}
	c.m[k] = entry[V]{v: v, at: now}
}

// Forget drops keys and fails every fill that started before it. Writers
// call it after their transaction, committed or not (a failed write may
// still have been committed by a retried group).
func (c *Cache[V]) Forget(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, k := range keys {
		delete(c.m, k)
	}
}

// Remember returns c's answer for k, or else fill's, which it keeps. An
// error (not found included) is not kept.
func Remember[V any](c *Cache[V], k string, fill func() (V, error)) (V, error) {
	v, gen, ok := c.Get(k)
	if ok {
		return v, nil
	}
	v, err := fill()
	if err == nil {
		c.Put(gen, k, v)
	}
	return v, err
}

// Clear forgets every answer and fails every fill that started before it.
func (c *Cache[V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}

// BlockKey is the key of "does owner block sender" in a Cache[bool].
func BlockKey(owner, sender string) string { return PairKey(owner, sender) }

// PairKey is the key of a question about two DIDs ("does did subscribe to
// group"). NUL cannot occur in a DID, so no two pairs share a key.
func PairKey(a, b string) string { return a + "\x00" + b }

// RememberMany is Remember for several keys at once (a group fan-out asks
// about each member): vals[i] is the answer for keys[i], c's or else
// ask's, which it keeps. ask is called once, for the indexes c has no
// answer for, and answers them in that order.
func RememberMany[V any](c *Cache[V], keys []string, ask func(missing []int) ([]V, error)) ([]V, error) {
	vals, missing, gen := c.GetMany(keys)
	if len(missing) == 0 {
		return vals, nil
	}
	found, err := ask(missing)
	if err != nil {
		return nil, err
	}
	for j, i := range missing {
		vals[i] = found[j]
		c.Put(gen, keys[i], found[j])
	}
	return vals, nil
}

// BlockedBy answers which of owners block sender from c, asking ask only
// about the owners c has no answer for, and remembering what it says
// (a no as well as a yes).
func BlockedBy(c *Cache[bool], sender string, owners []string, ask func(owners []string) (map[string]bool, error)) (map[string]bool, error) {
	keys := make([]string, len(owners))
	for i, o := range owners {
		keys[i] = BlockKey(o, sender)
	}
	vals, err := RememberMany(c, keys, func(missing []int) ([]bool, error) {
		asked := make([]string, len(missing))
		for j, i := range missing {
			asked[j] = owners[i]
		}
		found, err := ask(asked)
		if err != nil {
			return nil, err
		}
		out := make([]bool, len(asked))
		for j, o := range asked {
			out[j] = found[o]
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for i, o := range owners {
		if vals[i] {
			out[o] = true
		}
	}
	return out, nil
}
