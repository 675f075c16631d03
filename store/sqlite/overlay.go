package sqlite

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

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
	m      map[string]overlaid
	bodies map[string][]byte
	// byState indexes m by (owner, box, state), for Claimable and
	// NextVisible: a waiting claimer asks them on every change to its box,
	// and settling there committed the writer's transaction once per send.
	byState map[stateKey]map[string]struct{}
	inBox   map[boxKey]int // how many records of each box m holds
	// resets counts resets: a reader that saw the committed state before
	// a commit and the overlay after it saw neither (Claimable).
	resets atomic.Uint64
}

// overlaid is a record as a logged write left it, with its visible_at_ms
// (which model.Record does not carry).
type overlaid struct {
	rec       model.Record
	visibleAt int64
}

type stateKey struct {
	owner string
	box   model.BoxKind
	state model.State
}

func keyOf(r *model.Record) stateKey { return stateKey{r.Owner, r.BoxKind, r.State} }

// put records the latest state of recs; visible gives each one's
// visible_at_ms (nil: unchanged, which for a record not held yet is taken
// as 0). Writer goroutine only, in the order the writes ran.
func (o *overlay) put(recs []model.Record, visible func(*model.Record) int64) {
	if len(recs) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]overlaid, len(recs))
		o.byState = make(map[stateKey]map[string]struct{})
		o.inBox = make(map[boxKey]int)
	}
	for i := range recs {
		r := &recs[i]
		if old, ok := o.m[r.RecordID]; ok {
			delete(o.byState[keyOf(&old.rec)], r.RecordID)
		} else {
			o.inBox[boxKey{r.Owner, r.BoxKind}]++
		}
		var vis int64
		if visible != nil {
			vis = visible(r)
		} else if old, ok := o.m[r.RecordID]; ok {
			vis = old.visibleAt // a claim leaves visible_at_ms as it was
		}
		o.m[r.RecordID] = overlaid{copyRecord(*r), vis}
		k := keyOf(r)
		ids := o.byState[k]
		if ids == nil {
			ids = make(map[string]struct{})
			o.byState[k] = ids
		}
		ids[r.RecordID] = struct{}{}
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
		return model.Record{}, false
	}
	return copyRecord(r.rec), true
}

// claimable reports whether a record logged writes left in (owner, box,
// state) is visible at nowMS.
func (o *overlay) claimable(k stateKey, nowMS int64) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for id := range o.byState[k] {
		if o.m[id].visibleAt <= nowMS {
			return true
		}
	}
	return false
}

// count is how many records of (owner, box) logged writes changed.
func (o *overlay) count(owner string, box model.BoxKind) int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.inBox[boxKey{owner, box}]
}

// holds reports whether logged writes changed record id, and if so
// whether they left it in k and visible at nowMS.
func (o *overlay) holds(id string, k stateKey, nowMS int64) (changed, claimable bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	r, ok := o.m[id]
	if !ok {
		return false, false
	}
	return true, keyOf(&r.rec) == k && r.visibleAt <= nowMS
}

// nextVisible returns the earliest visible_at_ms > afterMS of a record
// logged writes left in k.
func (o *overlay) nextVisible(k stateKey, afterMS int64) (at int64, ok bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for id := range o.byState[k] {
		if v := o.m[id].visibleAt; v > afterMS && (!ok || v < at) {
			at, ok = v, true
		}
	}
	return at, ok
}

func (o *overlay) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resets.Add(1)
	if len(o.m) > overlayKeep {
		// clear keeps a map's buckets: let those of a big fan-out go.
		o.m, o.bodies, o.byState, o.inBox = nil, nil, nil, nil
		return
	}
	clear(o.m)
	clear(o.bodies)
	clear(o.byState)
	clear(o.inBox)
}

// overlayKeep is the most records a reset overlay keeps room for.
const overlayKeep = 4096

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
	if r.Ended != nil {
		e := *r.Ended
		r.Ended = &e
	}
	return r
}
