package sqlite

import (
	"maps"
	"slices"
	"sync"

	"github.com/msgcenter/msgcenter/model"
)

// The overlay answers GetRecord for records that writes acknowledged from
// the apply log have changed and no commit covers yet. Any other record is
// as the last commit left it, so it is read from the pool without waiting
// for a commit: an ack reads the record it acknowledges right after the
// claim that took it, and would otherwise commit every claim (settle).
// Only logged writes change records without committing at once, and each
// puts what it left here before it is answered; a commit empties it.
//
// It holds the bodies those writes stored as well, for GetMessage: the
// body cache may have dropped one before its commit (a burst of large
// bodies), and a body not here is then committed or was never
// acknowledged. Without them a reader missing the cache had to commit
// first, and a consumer working through a backlog larger than the cache
// forced a commit per claim.
type overlay struct {
	mu     sync.RWMutex
	m      map[string]model.Record
	bodies map[string][]byte
}

// put records the latest state of recs. Writer goroutine only, in the
// order the writes ran.
func (o *overlay) put(recs []model.Record) {
	if len(recs) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]model.Record, len(recs))
	}
	for _, r := range recs {
		o.m[r.RecordID] = copyRecord(r)
	}
}

// putBody records a body a logged write stored. Writer goroutine only;
// the caller must not modify body.
func (o *overlay) putBody(msgID string, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bodies == nil {
		o.bodies = make(map[string][]byte)
	}
	o.bodies[msgID] = body
}

// body returns a body stored since the last commit. The caller must not
// modify it.
func (o *overlay) body(msgID string) ([]byte, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	b, ok := o.bodies[msgID]
	return b, ok
}

func (o *overlay) get(id string) (model.Record, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	r, ok := o.m[id]
	if !ok {
		return r, false
	}
	return copyRecord(r), true
}

func (o *overlay) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.m)
	clear(o.bodies)
}

// copyRecord copies what a record refers to, so that neither the writer's
// callers nor GetRecord's can change what the overlay holds, shaped as a
// read from the database returns it (no tags and no ext ids are nil).
func copyRecord(r model.Record) model.Record {
	tags := r.Tags
	r.Tags = nil
	if len(tags) > 0 {
		r.Tags = slices.Clone(tags)
	}
	if r.Route != nil {
		rt := *r.Route
		rt.ExtIDs = nil
		if len(r.Route.ExtIDs) > 0 {
			rt.ExtIDs = maps.Clone(r.Route.ExtIDs)
		}
		r.Route = &rt
	}
	if r.Lease != nil {
		l := *r.Lease
		r.Lease = &l
	}
	return r
}
