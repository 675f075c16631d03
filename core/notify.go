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

// notifier wakes goroutines waiting for a box to change. A waiter takes the
// box's channel before it looks at the store, so a write that lands between
// the look and the wait still closes the channel it holds: no lost wake-up.
type notifier struct {
	mu sync.Mutex
	m  map[boxKey]chan struct{}
}

func newNotifier() *notifier { return &notifier{m: make(map[boxKey]chan struct{})} }

// Watch returns a channel closed at the next change of (owner, box).
func (n *notifier) Watch(owner string, box model.BoxKind) <-chan struct{} {
	k := boxKey{owner, box}
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.m[k]
	if !ok {
		ch = make(chan struct{})
		n.m[k] = ch
	}
	return ch
}

// anyBox is the key of the global watch: every box change closes it too, so
// a watcher of "something changed anywhere" (the event stream) needs no list
// of boxes. No real box has an empty owner.
var anyBox = boxKey{}

// Changed wakes everyone watching (owner, box) and everyone watching any box.
func (n *notifier) Changed(owner string, box model.BoxKind) {
	k := boxKey{owner, box}
	n.mu.Lock()
	ch, ok := n.m[k]
	if ok {
		delete(n.m, k)
	}
	all, allOK := n.m[anyBox]
	if allOK {
		delete(n.m, anyBox)
	}
	n.mu.Unlock()
	if ok {
		close(ch)
	}
	if allOK {
		close(all)
	}
}

// ChangedAny wakes only the watchers of "any box" (the event stream): for
// changes that make nothing new to claim, such as a claim itself.
func (n *notifier) ChangedAny() {
	n.mu.Lock()
	all, ok := n.m[anyBox]
	if ok {
		delete(n.m, anyBox)
	}
	n.mu.Unlock()
	if ok {
		close(all)
	}
}

// ChangedAll wakes every waiter, for when changes may have been missed.
func (n *notifier) ChangedAll() {
	n.mu.Lock()
	m := n.m
	n.m = make(map[boxKey]chan struct{})
	n.mu.Unlock()
	for _, ch := range m {
		close(ch)
	}
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
