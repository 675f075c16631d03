package e2e

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestCrashDuringAckNextKeepsEveryAnswer: workers go through a box with
// acks that claim the next record in the same call (the store runs both
// in one write), and the server is killed -9 mid-stream. After the
// restart every ack that was answered is READED, every claim that was
// answered and not acked since is still held under the lease it was
// answered with (or READED, if its ack landed unanswered), and nothing no
// answer handed out is READED.
func TestCrashDuringAckNextKeepsEveryAnswer(t *testing.T) {
	t.Parallel()
	const (
		owner     = "did:acknext"
		total     = 400
		workers   = 4
		killAfter = 120 // acks answered
	)
	dir := t.TempDir()
	srv := startServer(t, dir)
	c := srv.Client()
	ctx := testCtx(t, 90*time.Second)
	run := time.Now().UnixNano()
	var sendWG sync.WaitGroup
	sendErr := make(chan error, workers)
	for w := range workers {
		sendWG.Go(func() {
			for i := w; i < total; i += workers {
				m := &message.Message{From: "did:boss", To: []string{owner}, Nonce: fmt.Sprintf("acknext-%d-%d", run, i),
					Content: message.Content{Content: fmt.Sprintf("job %d", i)}}
				if _, err := c.PostSend(ctx, &wire.PostSendRequest{Msg: m}); err != nil {
					sendErr <- fmt.Errorf("post_send %d: %w", i, err)
					return
				}
			}
		})
	}
	sendWG.Wait()
	close(sendErr)
	for err := range sendErr {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		acked   = map[string]bool{}   // record id -> its ack was answered
		claimed = map[string]string{} // record id -> lease of an answered claim
		count   atomic.Int64
		killed  atomic.Bool
		reached = make(chan struct{})
		once    sync.Once
		wg      sync.WaitGroup
		errs    = make(chan error, workers)
	)
	noBody := false
	for w := range workers {
		wg.Go(func() {
			held, err := c.Next(ctx, owner, model.Inbox, &wire.NextRequest{LeaseMS: 600_000, Holder: fmt.Sprint("w", w)})
			if err != nil || held == nil {
				errs <- fmt.Errorf("worker %d: first claim: %v, %v", w, held, err)
				return
			}
			mu.Lock()
			claimed[held.Record.RecordID] = held.Record.Lease.ID
			mu.Unlock()
			for held != nil {
				res, err := c.SetState(ctx, held.Record.RecordID, &wire.StateRequest{NewState: model.Readed,
					LeaseID: held.Record.Lease.ID, WithObject: &noBody,
					Next: &wire.NextRequest{LeaseMS: 600_000, Holder: fmt.Sprint("w", w)}})
				if err != nil {
					if !killed.Load() {
						errs <- fmt.Errorf("worker %d: ack+next before the kill: %w", w, err)
					}
					return
				}
				mu.Lock()
				acked[held.Record.RecordID] = true
				if res.Next != nil {
					claimed[res.Next.Record.RecordID] = res.Next.Record.Lease.ID
				}
				mu.Unlock()
				if count.Add(1) >= killAfter {
					once.Do(func() { close(reached) })
				}
				held = res.Next
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d acks answered in 60 s; server output:\n%s", count.Load(), srv.Log())
	}
	killed.Store(true)
	srv.Kill()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(acked) >= total {
		t.Fatalf("every record was acked before the kill took effect: nothing crashed mid-stream")
	}
	t.Logf("kill -9 after %d answered acks; %d answered in all, %d claims answered", killAfter, len(acked), len(claimed))

	srv2 := startServer(t, dir)
	logReplay(t, srv2)
	c2 := srv2.Client()
	states := map[model.State]int{}
	var after int64
	for {
		page, err := c2.Sync(ctx, wire.SyncQuery{Owner: owner, Box: model.Inbox, AfterSeq: after, Limit: 500})
		if err != nil {
			t.Fatalf("sync after the restart: %v", err)
		}
		for _, r := range page.Items {
			states[r.Record.State]++
			id, lease := r.Record.RecordID, claimed[r.Record.RecordID]
			switch {
			case acked[id] && r.Record.State != model.Readed:
				t.Errorf("record %s: ack answered before the kill, yet %s after it", id, r.Record.State)
			case acked[id]:
			case lease != "" && r.Record.State == model.Readed:
				// its ack was in flight at the kill and landed
			case lease != "" && (r.Record.State != model.Reading || r.Record.Lease == nil || r.Record.Lease.ID != lease):
				t.Errorf("record %s: claim answered under %s before the kill, now %s with lease %+v", id, lease, r.Record.State, r.Record.Lease)
			case lease == "" && r.Record.State == model.Readed:
				t.Errorf("record %s is READED, but no answer ever handed it out", id)
			}
		}
		if len(page.Items) == 0 {
			break
		}
		after = page.LastSeq
	}
	if n := states[model.Unread] + states[model.Reading] + states[model.Readed]; n != total {
		t.Fatalf("after the restart the box holds %d records (%v), want %d", n, states, total)
	}
	t.Logf("after the restart: %v", states)
}
