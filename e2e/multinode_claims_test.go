package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// seedInbox post_sends total distinct messages from sender to rcpt with
// workers concurrent senders spread round-robin over the cluster's nodes,
// and returns the msg ids in message order. Any failure fails the test.
func seedInbox(ctx context.Context, t *testing.T, c *pgCluster, run, sender, rcpt string, total, workers int) []string {
	t.Helper()
	ids := make([]string, total)
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		cl := c.Client(w % len(c.Nodes))
		node := c.Nodes[w%len(c.Nodes)].Addr
		wg.Go(func() {
			for i := range jobs {
				m := &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
					Content: message.Content{Format: "text/plain", Content: msgText(run, i)}}
				res, err := cl.PostSend(ctx, &wire.PostSendRequest{Msg: m})
				if err != nil {
					errs <- fmt.Errorf("seed: post_send of message %d through node %s: %w", i, node, err)
					return
				}
				ids[i] = res.MsgID
			}
		})
	}
	go func() {
		defer close(jobs)
		for i := range total {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("seeding %d messages did not finish in time", total)
	}
	return ids
}

// TestMultiNodeClaimsExactlyOnce (issue 3, point 3): three nodes on one
// database, one box of 5,000 records, 12 consumers spread over the nodes
// claiming (lease 30 s) and acking until the box answers 204: every record
// is claimed exactly once, and none is left UNREAD or READING.
func TestMultiNodeClaimsExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		total     = 5000
		consumers = 12
		sender    = "did:claims:sender"
		rcpt      = "did:claims:rcpt"
	)
	// Commits without waiting for the WAL flush: the seed is not what this
	// test is about, and with synchronous commits the writes to one box are
	// bounded by the flush latency (each waits for the previous one's
	// commit; a few hundred per second here). Visibility and locking, which
	// the test is about, are the same either way.
	c := startPGClusterParams(t, 3, map[string]string{"synchronous_commit": "off"})
	ctx := testCtx(t, 90*time.Second)
	run := fmt.Sprintf("claims-%d", time.Now().UnixNano())

	start := time.Now()
	ids := seedInbox(ctx, t, c, run, sender, rcpt, total, 24)
	t.Logf("seeded %d records through 3 nodes in %s", total, time.Since(start).Round(time.Millisecond))
	want := make(map[string]bool, total)
	for _, id := range ids {
		want[id] = true
	}
	if len(want) != total {
		t.Fatalf("seed: %d distinct msg ids for %d distinct messages", len(want), total)
	}

	type claim struct {
		consumer int
		node     string
		leaseID  string
	}
	var (
		mu       sync.Mutex
		claims   = make(map[string][]claim) // record id -> every claim of it
		byMsg    = make(map[string]string)  // msg id -> record id
		acked    atomic.Int64
		wg       sync.WaitGroup
		failures = make(chan error, consumers)
	)
	start = time.Now()
	for k := range consumers {
		i := k % len(c.Nodes)
		cl, node := c.Client(i), c.Nodes[i].Addr
		wg.Go(func() {
			for {
				got, err := cl.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{LeaseMS: 30000, Holder: fmt.Sprintf("consumer-%d", k), WithObject: ptr(false)})
				if err != nil {
					failures <- fmt.Errorf("consumer %d on node %s: next: %w", k, node, err)
					return
				}
				if got == nil {
					return // 204: nothing left to claim
				}
				r := got.Record
				if r.State != model.Reading || r.Lease == nil {
					failures <- fmt.Errorf("consumer %d on node %s: claimed record %s is %s with lease %+v, want READING with a lease", k, node, r.RecordID, r.State, r.Lease)
					return
				}
				mu.Lock()
				claims[r.RecordID] = append(claims[r.RecordID], claim{k, node, r.Lease.ID})
				byMsg[r.MsgID] = r.RecordID
				mu.Unlock()
				if _, err := cl.Ack(ctx, r.RecordID, r.Lease.ID, ""); err != nil {
					failures <- fmt.Errorf("consumer %d on node %s: ack of %s (lease %s): %w", k, node, r.RecordID, r.Lease.ID, err)
					return
				}
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	t.Logf("12 consumers on 3 nodes claimed and acked %d records in %s", acked.Load(), time.Since(start).Round(time.Millisecond))

	dup := 0
	for id, cs := range claims {
		if len(cs) > 1 {
			if dup++; dup <= 10 {
				t.Errorf("record %s was claimed %d times: %+v", id, len(cs), cs)
			}
		}
	}
	if dup > 0 {
		t.Errorf("%d records were handed to more than one consumer", dup)
	}
	missing := 0
	for id := range want {
		if _, ok := byMsg[id]; !ok {
			if missing++; missing <= 10 {
				t.Errorf("message %s was never claimed", id)
			}
		}
	}
	if missing > 0 || len(claims) != total {
		t.Errorf("%d distinct records claimed, %d messages never claimed; want all %d claimed exactly once", len(claims), missing, total)
	}

	// The database agrees: nothing waiting or held, all READED, each with
	// the single attempt of its ack.
	cl := c.Client(0)
	if left := listAll(ctx, t, cl, rcpt, model.Inbox, model.Unread, model.Reading); len(left) > 0 {
		t.Errorf("%d records left UNREAD or READING after the consumers got 204; first: %s is %s", len(left), left[0].Record.RecordID, left[0].Record.State)
	}
	all := syncAll(ctx, t, cl, rcpt, model.Inbox)
	if len(all) != total {
		t.Errorf("INBOX of %s has %d records, want %d", rcpt, len(all), total)
	}
	checkSeqs(t, "INBOX of "+rcpt, all)
	bad := 0
	for _, r := range all {
		if r.Record.State != model.Readed || r.Record.Delivery.Attempts != 1 {
			if bad++; bad <= 10 {
				t.Errorf("record %s is %s with %d attempts, want READED with 1", r.Record.RecordID, r.Record.State, r.Record.Delivery.Attempts)
			}
		}
	}
}
