package core

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// flakyNotifier loses its first connection at once; its second is ready
// only when the test says, and stays until the end.
type flakyNotifier struct {
	calls   atomic.Int32
	second  chan struct{} // the second Listen started
	proceed chan struct{} // let it be ready
}

func (f *flakyNotifier) Listen(ctx context.Context, ready func(), _ func(store.Change)) error {
	if f.calls.Add(1) == 1 {
		ready()
		return errors.New("connection lost")
	}
	close(f.second)
	<-f.proceed
	ready()
	<-ctx.Done()
	return ctx.Err()
}

// TestListenWakesWhenBack: a waiter that began watching after the wake at
// a lost notification connection (a stream that read again and found
// nothing yet) is woken again once listening is back: writes made while
// it was down were notified to no one.
func TestListenWakesWhenBack(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	f := &flakyNotifier{second: make(chan struct{}), proceed: make(chan struct{})}
	done := make(chan struct{})
	go func() { defer close(done); s.listen(ctx, f) }()
	defer func() { cancel(); <-done }()

	select {
	case <-f.second:
	case <-time.After(10 * time.Second):
		t.Fatal("listen did not try again after losing its connection")
	}
	w := s.notify.Watch("did:x", model.Inbox)
	close(f.proceed)
	select {
	case <-w:
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter that began while listening was down was not woken when it came back")
	}
}
