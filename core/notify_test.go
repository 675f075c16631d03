package core

import (
	"testing"

	"github.com/msgcenter/msgcenter/model"
)

// The event stream waits on the global watch: any box's change must close
// it, and a box's own watchers must still be woken.
func TestWatchAnyBox(t *testing.T) {
	n := newNotifier()
	all, box := n.Watch(anyBox.owner, anyBox.box), n.Watch("did:a", model.Inbox)
	other := n.Watch("did:b", model.Inbox)
	n.Changed("did:a", model.Inbox)
	for name, ch := range map[string]<-chan struct{}{"global": all, "did:a INBOX": box} {
		select {
		case <-ch:
		default:
			t.Errorf("%s watch not closed by a change of did:a INBOX", name)
		}
	}
	select {
	case <-other:
		t.Error("did:b INBOX watch closed by a change of did:a INBOX")
	default:
	}
	if again := n.Watch(anyBox.owner, anyBox.box); again == all {
		t.Error("the global watch was not renewed after it fired")
	}
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Updated (an ack) wakes a box's watchers and the global watch but not its
// claimers; Changed wakes all three.
func TestWatchClaims(t *testing.T) {
	n := newNotifier()
	all, box, claims := n.Watch(anyBox.owner, anyBox.box), n.Watch("did:a", model.Inbox), n.WatchClaims("did:a", model.Inbox)
	n.Updated("did:a", model.Inbox)
	if !closed(all) || !closed(box) {
		t.Fatal("Updated did not wake the box's watchers and the global watch")
	}
	if closed(claims) {
		t.Fatal("Updated woke the box's claimers")
	}
	box = n.Watch("did:a", model.Inbox)
	n.Changed("did:a", model.Inbox)
	if !closed(box) || !closed(claims) {
		t.Fatal("Changed did not wake the box's watchers and claimers")
	}
	if again := n.WatchClaims("did:a", model.Inbox); again == claims {
		t.Fatal("the claim watch was not renewed after it fired")
	}
}

// A box found empty stays known empty to the holders of the same claim
// channel until the next Changed, or until the delayed record it knows of
// comes due; a finding made on an older channel says nothing.
func TestKnownEmpty(t *testing.T) {
	n := newNotifier()
	old := n.WatchClaims("did:a", model.Inbox)
	n.Changed("did:a", model.Inbox)
	cur := n.WatchClaims("did:a", model.Inbox)

	n.foundEmpty("did:a", model.Inbox, old, 0) // looked before the change: stale
	if _, ok := n.knownEmpty("did:a", model.Inbox, cur, 100); ok {
		t.Fatal("a finding on the channel before the last change was taken as current")
	}
	n.foundEmpty("did:a", model.Inbox, cur, 500)
	for _, tc := range []struct {
		ch     <-chan struct{}
		now    int64
		ok     bool
		reason string
	}{
		{cur, 100, true, "found empty, delayed record not yet due"},
		{cur, 499, true, "one ms before the delayed record"},
		{cur, 500, false, "the delayed record is due"},
		{old, 100, false, "a holder of the older channel"},
	} {
		at, ok := n.knownEmpty("did:a", model.Inbox, tc.ch, tc.now)
		if ok != tc.ok || (ok && at != 500) {
			t.Errorf("%s: knownEmpty = %d, %v; want 500, %v", tc.reason, at, ok, tc.ok)
		}
	}
	if _, ok := n.knownEmpty("did:b", model.Inbox, cur, 100); ok {
		t.Error("another box is known empty")
	}
	n.Updated("did:a", model.Inbox) // an ack leaves it empty
	if _, ok := n.knownEmpty("did:a", model.Inbox, cur, 100); !ok {
		t.Error("an ack cleared the finding")
	}
	n.Changed("did:a", model.Inbox)
	if _, ok := n.knownEmpty("did:a", model.Inbox, n.WatchClaims("did:a", model.Inbox), 100); ok {
		t.Error("the finding survived a change that may leave something to claim")
	}
}

// A record claimed from a box known empty contradicts the finding, which
// is then forgotten; one whose delayed record came due is only forgotten.
func TestContradicted(t *testing.T) {
	n := newNotifier()
	ch := n.WatchClaims("did:a", model.Inbox)
	if n.contradicted("did:a", model.Inbox, 100) {
		t.Fatal("a box never found empty was contradicted")
	}
	n.foundEmpty("did:a", model.Inbox, ch, 500)
	if !n.contradicted("did:a", model.Inbox, 100) {
		t.Fatal("a claim from a box known empty did not contradict the finding")
	}
	if _, ok := n.knownEmpty("did:a", model.Inbox, ch, 100); ok || n.contradicted("did:a", model.Inbox, 100) {
		t.Fatal("the contradicted finding was kept")
	}
	n.foundEmpty("did:a", model.Inbox, ch, 500)
	if n.contradicted("did:a", model.Inbox, 500) {
		t.Fatal("a claim of the delayed record the finding knew of contradicted it")
	}
	if _, ok := n.knownEmpty("did:a", model.Inbox, ch, 100); ok {
		t.Fatal("the out-of-date finding was kept")
	}
}
