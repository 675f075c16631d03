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
