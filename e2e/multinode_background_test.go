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

// TestMultiNodeBackgroundExactlyOnce (issue 3, point 5): the delay
// scheduler and the lease reaper run on all three nodes at once, and still
// a delayed message is materialized exactly once (never early), and an
// expired lease is returned exactly once.
func TestMultiNodeBackgroundExactlyOnce(t *testing.T) {
	t.Parallel()
	c := startPGCluster(t, 3)
	// The two halves share nothing but the nodes (stopped after both
	// finished), and both mostly wait: run them side by side.
	t.Run("delayed", func(t *testing.T) { t.Parallel(); checkDelayedOnce(t, c) })
	t.Run("lease", func(t *testing.T) { t.Parallel(); checkLeaseReturnedOnce(t, c) })
}

// checkDelayedOnce sends 50 messages with delays of 500-1500 ms through the
// three nodes and checks that each appears exactly once, not before it is
// due, with seqs 1..50.
func checkDelayedOnce(t *testing.T, c *pgCluster) {
	const (
		total  = 50
		sender = "did:bg:sender"
		rcpt   = "did:bg:delayed"
	)
	ctx := testCtx(t, 60*time.Second)
	run := time.Now().UnixNano()
	earliest := make(map[string]int64, total) // msg id -> earliest allowed created_at_ms
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range total {
		cl, node := c.Client(i%len(c.Nodes)), c.Nodes[i%len(c.Nodes)].Addr
		delay := int64(500 + i*1000/(total-1)) // 500..1500 ms
		wg.Go(func() {
			m := &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
				Content: message.Content{Format: "text/plain", Content: fmt.Sprintf("delayed %d #%d", run, i)}}
			before := time.Now().UnixMilli()
			res, err := cl.PostSend(ctx, &wire.PostSendRequest{Msg: m, DelayMS: ptr(delay)})
			if err != nil {
				t.Errorf("delayed post_send %d (delay %d ms) through node %s: %v", i, delay, node, err)
				return
			}
			mu.Lock()
			earliest[res.MsgID] = before + delay
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(earliest) != total {
		t.Errorf("%d distinct msg ids for %d distinct delayed messages", len(earliest), total)
		return
	}

	// Wait for all to materialize (due within 1.5 s; allow generous slack
	// for a node that only learns of another node's entry by polling).
	cl := c.Client(0)
	deadline := time.Now().Add(15 * time.Second)
	var inbox []wire.RecordWithMsg
	for {
		inbox = syncAll(ctx, t, cl, rcpt, model.Inbox)
		if len(inbox) >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Give a duplicate materialization a chance to show up.
	time.Sleep(700 * time.Millisecond)
	inbox = syncAll(ctx, t, cl, rcpt, model.Inbox)
	checkSeqs(t, "INBOX of "+rcpt+" (delayed)", inbox)
	if len(inbox) != total {
		t.Errorf("INBOX of %s has %d records 15s after the last delayed message was due, want exactly %d", rcpt, len(inbox), total)
	}
	seen := map[string]int{}
	for _, r := range inbox {
		seen[r.Record.MsgID]++
		if at, ok := earliest[r.Record.MsgID]; !ok {
			t.Errorf("INBOX record %s holds unexpected message %s", r.Record.RecordID, r.Record.MsgID)
		} else if r.Record.CreatedAtMS < at {
			t.Errorf("delayed message %s appeared at %d, %d ms before it was due", r.Record.MsgID, r.Record.CreatedAtMS, at-r.Record.CreatedAtMS)
		}
	}
	for id := range earliest {
		if seen[id] != 1 {
			t.Errorf("delayed message %s: %d INBOX records, want exactly 1", id, seen[id])
		}
	}
	if sc, err := cl.Scheduled(ctx, wire.ScheduledQuery{Limit: 10}); err != nil {
		t.Errorf("list scheduled: %v", err)
	} else if sc.Count != 0 {
		t.Errorf("%d delayed messages still pending after all were materialized: %+v", sc.Count, sc.Items)
	}
}

// checkLeaseReturnedOnce claims 30 records with a 1 s lease through the
// three nodes, never acks them, and checks that each comes back exactly
// once: UNREAD with attempts 1 and a single lease_expired event, not before
// its lease ended.
func checkLeaseReturnedOnce(t *testing.T, c *pgCluster) {
	const (
		total  = 30
		sender = "did:bg:sender2"
		rcpt   = "did:bg:leased"
	)
	ctx := testCtx(t, 60*time.Second)
	run := time.Now().UnixNano()
	for i := range total {
		m := &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
			Content: message.Content{Format: "text/plain", Content: fmt.Sprintf("leased %d #%d", run, i)}}
		if _, err := c.Client(i%len(c.Nodes)).PostSend(ctx, &wire.PostSendRequest{Msg: m}); err != nil {
			t.Errorf("post_send %d: %v", i, err)
			return
		}
	}
	leaseEnd := map[string]int64{} // record id -> lease expiry
	for i := range total {
		got, err := c.Client(i%len(c.Nodes)).Next(ctx, rcpt, model.Inbox, &wire.NextRequest{LeaseMS: 1000, Holder: fmt.Sprintf("never-acks-%d", i)})
		if err != nil || got == nil {
			t.Errorf("claim %d through node %s: record %v, err %v", i, c.Nodes[i%len(c.Nodes)].Addr, got, err)
			return
		}
		if got.Record.Lease == nil {
			t.Errorf("claim %d: record %s has no lease", i, got.Record.RecordID)
			return
		}
		leaseEnd[got.Record.RecordID] = got.Record.Lease.ExpiresAtMS
	}
	if len(leaseEnd) != total {
		t.Errorf("%d claims got %d distinct records", total, len(leaseEnd))
		return
	}

	cl := c.Client(1)
	deadline := time.Now().Add(15 * time.Second)
	for {
		back := len(listAll(ctx, t, cl, rcpt, model.Inbox, model.Unread))
		if back == total {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("only %d of %d records with an expired 1 s lease are back UNREAD after 15s", back, total)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A second return would show as a second attempt and event: give the
	// reapers of all nodes time to (wrongly) act again.
	time.Sleep(1500 * time.Millisecond)
	for id := range leaseEnd {
		r, err := cl.GetRecord(ctx, id, false)
		if err != nil {
			t.Errorf("get record %s: %v", id, err)
			continue
		}
		if r.Record.State != model.Unread || r.Record.Delivery.Attempts != 1 || r.Record.Lease != nil {
			t.Errorf("record %s after its lease expired: state %s, attempts %d, lease %+v; want UNREAD, 1 attempt, no lease",
				id, r.Record.State, r.Record.Delivery.Attempts, r.Record.Lease)
		}
	}
	evs := eventsOf(ctx, t, cl, rcpt)
	expired := countEvents(evs, model.EventLeaseExpired)
	for id := range leaseEnd {
		if expired[id] != 1 {
			t.Errorf("record %s: %d %s events, want exactly 1", id, expired[id], model.EventLeaseExpired)
		}
	}
	if len(expired) != total {
		t.Errorf("%s events for %d records, want %d", model.EventLeaseExpired, len(expired), total)
	}
	for _, e := range evs {
		if e.Type == model.EventLeaseExpired && e.AtMS < leaseEnd[e.RecordID] {
			t.Errorf("record %s: lease returned at %d, %d ms before it expired", e.RecordID, e.AtMS, leaseEnd[e.RecordID]-e.AtMS)
		}
	}
}
