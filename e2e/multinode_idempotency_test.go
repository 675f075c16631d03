package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestMultiNodeIdempotency (issue 3, point 7): the same message sent
// concurrently through two nodes (two callers per node, released together)
// yields one set of records: every caller gets the same msg_id, the inbox
// holds one record per message, and each record was created once.
// Rounds 0-9 use dispatch, rounds 10-19 post_send (which also writes the
// author's outbox); odd rounds add an idempotency key.
func TestMultiNodeIdempotency(t *testing.T) {
	t.Parallel()
	const (
		rounds    = 20
		perNode   = 2
		dispatchN = 10
		sender    = "did:idem:sender"
		rcpt      = "did:idem:rcpt"
	)
	c := startPGCluster(t, 2)
	ctx := testCtx(t, 60*time.Second)
	run := time.Now().UnixNano()

	wantIDs := make([]string, rounds)
	for r := range rounds {
		m := &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
			Content: message.Content{Format: "text/plain", Content: fmt.Sprintf("idempotency %d round %d", run, r)}}
		id, err := m.ID()
		if err != nil {
			t.Fatalf("round %d: message id: %v", r, err)
		}
		wantIDs[r] = id
		key := ""
		if r%2 == 1 {
			key = fmt.Sprintf("idem-%d-%d", run, r)
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var got []string
		for n := range len(c.Nodes) {
			cl, node := c.Client(n), c.Nodes[n].Addr
			for range perNode {
				wg.Go(func() {
					<-release
					var id string
					var err error
					if r < dispatchN {
						var res *wire.DispatchResult
						if res, err = cl.Dispatch(ctx, &wire.DispatchRequest{Msg: m, IdempotencyKey: key}); err == nil {
							id = res.MsgID
						}
					} else {
						var res *wire.PostSendResult
						if res, err = cl.PostSend(ctx, &wire.PostSendRequest{Msg: m, IdempotencyKey: key}); err == nil {
							id = res.MsgID
						}
					}
					if err != nil {
						t.Errorf("round %d: send through node %s: %v", r, node, err)
						return
					}
					mu.Lock()
					got = append(got, id)
					mu.Unlock()
				})
			}
		}
		close(release)
		wg.Wait()
		for _, id := range got {
			if id != wantIDs[r] {
				t.Errorf("round %d: a node answered msg_id %s, want %s (answers: %v)", r, id, wantIDs[r], got)
				break
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	cl := c.Client(0)
	inbox := syncAll(ctx, t, cl, rcpt, model.Inbox)
	checkSeqs(t, "INBOX of "+rcpt, inbox)
	perMsg := map[string]int{}
	for _, r := range inbox {
		perMsg[r.Record.MsgID]++
	}
	for r, id := range wantIDs {
		if perMsg[id] != 1 {
			t.Errorf("round %d: %d INBOX records of %s, want exactly 1", r, perMsg[id], id)
		}
	}
	if len(inbox) != rounds {
		t.Errorf("INBOX of %s has %d records, want %d", rcpt, len(inbox), rounds)
	}
	outbox := syncAll(ctx, t, cl, sender, model.Outbox)
	outPerMsg := map[string]int{}
	for _, r := range outbox {
		outPerMsg[r.Record.MsgID]++
	}
	for r := dispatchN; r < rounds; r++ {
		if outPerMsg[wantIDs[r]] != 1 {
			t.Errorf("round %d (post_send): %d OUTBOX records of %s, want exactly 1", r, outPerMsg[wantIDs[r]], wantIDs[r])
		}
	}
	if len(outbox) != rounds-dispatchN {
		t.Errorf("OUTBOX of %s has %d records, want %d (one per post_send round)", sender, len(outbox), rounds-dispatchN)
	}
	// The event log agrees: each record was created once.
	for _, owner := range []string{rcpt, sender} {
		for id, n := range countEvents(eventsOf(ctx, t, cl, owner), model.EventRecordCreated) {
			if n != 1 {
				t.Errorf("record %s of %s: %d record.created events, want 1", id, owner, n)
			}
		}
	}
}
