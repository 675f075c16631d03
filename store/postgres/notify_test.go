package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestNotifyAcrossNodes: a write on one node reaches a listener on another
// (after the commit), and a store of another schema hears nothing.
func TestNotifyAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := openNodes(t, 2)
	other := openNodes(t, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan store.Change, 16)
	foreign := make(chan store.Change, 16)
	listening := make(chan struct{}, 2)
	for _, l := range []struct {
		n  store.Store
		ch chan store.Change
	}{{nodes[1], got}, {other, foreign}} {
		go func() {
			_ = l.n.(store.Notifier).Listen(ctx, func() { listening <- struct{}{} }, func(c store.Change) { l.ch <- c })
		}()
	}
	<-listening // both LISTENs are in effect: nothing sent from here on is missed
	<-listening

	if _, err := nodes[0].Apply(ctx, plan("n1", "did:notified", model.Inbox, 1000)); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-got:
		if c.Owner != "did:notified" || c.Box != model.Inbox || c.Scheduled {
			t.Fatalf("change %+v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification on the other node")
	}
	_, created, err := nodes[0].Schedule(ctx, &store.ScheduleEntry{Op: "dispatch", MsgID: "cymsg:sched", MsgBody: []byte(`{}`),
		Recipients: []string{"did:r"}, DueAtMS: 5000, CreatedAtMS: 1000}, nil)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	select {
	case c := <-got:
		if !c.Scheduled {
			t.Fatalf("change %+v, want scheduled", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no scheduled notification on the other node")
	}
	select {
	case c := <-foreign:
		t.Fatalf("a store of another schema heard %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
}
