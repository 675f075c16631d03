package sqlite

import (
	"sync"

	"github.com/msgcenter/msgcenter/model"
)

// The embedded store is the only writer of its file: the server locks the
// data directory, and every write goes through this Store. So the small
// lookups that every request or send makes and that almost never change
// (a token's identity, whether a DID is a group, a DID's routes, who blocks
// whom) can be answered from memory, and forgotten by the writes that
// change them. Measured under msgload's enqueue: those four reads were
// 11.5% of the server's CPU, each a read transaction on the pool.
//
// A fill races with an invalidation: a read that began before a write
// committed may finish after the write forgot the key, and must not put
// the old answer back. Each lookup therefore carries a generation that
// forget bumps; put stores only if the generation the reader started with
// is still current.

// lookupMax bounds each lookup's entries. Reaching it clears the lookup:
// simpler than an LRU, and the working set of a server (its tokens, its
// groups, the DIDs it routes) is far smaller.
const lookupMax = 1 << 16

type lookup[V any] struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]V
}

// get returns the cached value of k, and the generation to pass to put
// after a miss.
func (l *lookup[V]) get(k string) (v V, gen uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok = l.m[k]
	return v, l.gen, ok
}

// getMany is get for several keys under one lock (a group fan-out asks
// about thousands): vals[i] is the answer for keys[i], missing lists the
// indexes it has none for.
func (l *lookup[V]) getMany(keys []string) (vals []V, missing []int, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	vals = make([]V, len(keys))
	for i, k := range keys {
		v, ok := l.m[k]
		if !ok {
			missing = append(missing, i)
		}
		vals[i] = v
	}
	return vals, missing, l.gen
}

// put caches v under k unless a forget happened since gen was read.
func (l *lookup[V]) put(gen uint64, k string, v V) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.gen {
		return
	}
	if l.m == nil || len(l.m) >= lookupMax {
		l.m = make(map[string]V)
	}
	l.m[k] = v
}

// forget drops keys and fails every fill that started before it. Writers
// call it after their transaction, committed or not (a failed write may
// still have been committed by a retried group).
func (l *lookup[V]) forget(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	for _, k := range keys {
		delete(l.m, k)
	}
}

// remember returns l's answer for k, or else fill's, which it keeps.
func remember[V any](l *lookup[V], k string, fill func() (V, error)) (V, error) {
	v, gen, ok := l.get(k)
	if ok {
		return v, nil
	}
	v, err := fill()
	if err == nil {
		l.put(gen, k, v)
	}
	return v, err
}

// lookups are the Store's caches, one per kind of answer.
type lookups struct {
	tokens  lookup[model.Identity]       // token hash
	groups  lookup[bool]                 // DID: is it a group
	routes  lookup[[]model.ContactRoute] // DID
	blocked lookup[bool]                 // owner + "\x00" + sender
}

// blockKey is the key of "does owner block sender".
func blockKey(owner, sender string) string { return owner + "\x00" + sender }
