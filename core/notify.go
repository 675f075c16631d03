package core

import (
	"sync"
	"sync/atomic"

	"github.com/msgcenter/msgcenter/model"
)

type boxKey struct {
	owner string
	box   model.BoxKind
}

// watchKey is what a watcher waits for: any change of a box (streams, a
// peek), or only the changes that can leave something in it to claim (a
// claimer). An ack changes a box but leaves nothing new to take; waking
// every waiting claimer for it cost each of them a look at the store for
// nothing (docs/benchmarks.md, fourteenth round).
type watchKey struct {
	boxKey
	claims bool
}

// watch is one box's current channel. A claimer woken by a change that
// looked and found nothing to claim marks it (foundEmpty), so the others
// that change woke need not look again until the next change or until a
// delayed record's time comes.
type watch struct {
	ch     chan struct{}
	empty  bool
	nextAt int64 // with empty: when a record becomes visible without a write (0: none known)
}

// notifier wakes goroutines waiting for a box to change. A waiter takes the
// box's channel before it looks at the store, so a write that lands between
// the look and the wait still closes the channel it holds: no lost wake-up.
type notifier struct {
	mu sync.Mutex
	m  map[watchKey]*watch
}

func newNotifier() *notifier { return &notifier{m: make(map[watchKey]*watch)} }

func (n *notifier) watch(k watchKey) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.m[k]
	if !ok {
		w = &watch{ch: make(chan struct{})}
		n.m[k] = w
	}
	return w.ch
}

// Watch returns a channel closed at the next change of (owner, box).
func (n *notifier) Watch(owner string, box model.BoxKind) <-chan struct{} {
	return n.watch(watchKey{boxKey{owner, box}, false})
}

// WatchClaims returns a channel closed at the next change of (owner, box)
// that can leave a record to claim there (Changed, not Updated).
func (n *notifier) WatchClaims(owner string, box model.BoxKind) <-chan struct{} {
	return n.watch(watchKey{boxKey{owner, box}, true})
}

// anyBox is the key of the global watch: every box change closes it too, so
// a watcher of "something changed anywhere" (the event stream) needs no list
// of boxes. No real box has an empty owner.
var anyBox = boxKey{}

// Changed wakes everyone watching (owner, box), its claimers included, and
// everyone watching any box: for changes that may leave a record to claim
// (new records, a record claimable again).
func (n *notifier) Changed(owner string, box model.BoxKind) {
	n.close(boxKey{owner, box}, true)
}

// Updated wakes the watchers of (owner, box) and of any box but not its
// claimers: for changes that leave nothing new to claim, such as an ack.
func (n *notifier) Updated(owner string, box model.BoxKind) {
	n.close(boxKey{owner, box}, false)
}

func (n *notifier) close(k boxKey, claims bool) {
	keys := [3]watchKey{{anyBox, false}, {k, false}, {k, true}}
	nk := 2
	if claims {
		nk = 3
	}
	var chs [3]chan struct{}
	n.mu.Lock()
	for i, wk := range keys[:nk] {
		if w, ok := n.m[wk]; ok {
			delete(n.m, wk)
			chs[i] = w.ch
		}
	}
	n.mu.Unlock()
	for _, ch := range chs {
		if ch != nil {
			close(ch)
		}
	}
}

// ChangedAny wakes only the watchers of "any box" (the event stream): for
// changes that make nothing new to claim, such as a claim itself.
func (n *notifier) ChangedAny() {
	n.mu.Lock()
	w, ok := n.m[watchKey{anyBox, false}]
	if ok {
		delete(n.m, watchKey{anyBox, false})
	}
	n.mu.Unlock()
	if ok {
		close(w.ch)
	}
}

// ChangedAll wakes every waiter, for when changes may have been missed.
func (n *notifier) ChangedAll() {
	n.mu.Lock()
	m := n.m
	n.m = make(map[watchKey]*watch)
	n.mu.Unlock()
	for _, w := range m {
		close(w.ch)
	}
}

// foundEmpty records that a claimer holding ch, the box's claim channel,
// looked after taking it and found nothing to claim before nextAt (0:
// nothing delayed either). It is forgotten at the box's next Changed; a
// claimer holding an older channel learns nothing from it.
func (n *notifier) foundEmpty(owner string, box model.BoxKind, ch <-chan struct{}, nextAt int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.m[watchKey{boxKey{owner, box}, true}]; ok && w.ch == ch {
		w.empty, w.nextAt = true, nextAt
	}
}

// knownEmpty reports whether a claimer holding ch may skip its look at
// nowMS: another claimer looked since the last change that could leave
// something to claim and found nothing, and no delayed record has come
// due since. It returns when the next delayed record does (0: none).
func (n *notifier) knownEmpty(owner string, box model.BoxKind, ch <-chan struct{}, nowMS int64) (nextAt int64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, found := n.m[watchKey{boxKey{owner, box}, true}]
	if !found || w.ch != ch || !w.empty || (w.nextAt != 0 && w.nextAt <= nowMS) {
		return 0, false
	}
	return w.nextAt, true
}

// contradicted reports whether the box is known empty at nowMS, which a
// record just claimed from it shows to be wrong, and forgets the finding
// (also one whose delayed record has come due, which is merely out of
// date).
func (n *notifier) contradicted(owner string, box model.BoxKind, nowMS int64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.m[watchKey{boxKey{owner, box}, true}]
	if !ok || !w.empty {
		return false
	}
	w.empty = false
	return w.nextAt == 0 || nowMS < w.nextAt
}

// Watch exposes box change notifications to other packages in-process
// (streams).
func (s *Service) Watch(owner string, box model.BoxKind) <-chan struct{} {
	return s.notify.Watch(owner, box)
}

// WatchEvents returns a channel closed at the next record write of any box
// on this node (or relayed from another node's notifications). The event
// stream waits on it; like Watch, take it before reading the store.
func (s *Service) WatchEvents() <-chan struct{} {
	return s.notify.Watch(anyBox.owner, anyBox.box)
}

func (s *Service) changedRecords(recs []model.Record) {
	seen := make(map[boxKey]bool, 1)
	for _, r := range recs {
		k := boxKey{r.Owner, r.BoxKind}
		if !seen[k] {
			seen[k] = true
			s.notify.Changed(r.Owner, r.BoxKind)
		}
	}
}

// wakeTime is the time a background loop plans to wake, so others can kick
// it only when they need it sooner.
type wakeTime struct{ v atomic.Int64 }

func (w *wakeTime) set(ms int64) { w.v.Store(ms) }
func (w *wakeTime) get() int64   { return w.v.Load() }

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
