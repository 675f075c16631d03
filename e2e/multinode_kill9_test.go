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

// TestMultiNodeKill9 (issue 3, point 6): three nodes under a mixed load
// (producers and consumers on every node); one node is killed with
// SIGKILL midway. The two others keep answering every request; the records
// the dead node had leased (2 s leases) come back once their lease expired
// and are consumed elsewhere; at the end every acknowledged post_send is in
// the box exactly once and every record was acked exactly once.
func TestMultiNodeKill9(t *testing.T) {
	t.Parallel()
	const (
		total        = 1200
		producersPer = 4
		consumersPer = 2
		killAfter    = 400 // acknowledged post_sends before the kill
		held         = 5   // records the victim claims right before dying
		leaseMS      = 2000
		sender       = "did:k9:sender"
		rcpt         = "did:k9:rcpt"
	)
	c := startPGCluster(t, 3)
	const victim = 2
	victimNode := c.Nodes[victim]
	ctx := testCtx(t, 90*time.Second)
	run := time.Now().UnixNano()

	type claimInfo struct {
		node     int
		leaseID  string
		leaseEnd int64 // lease expiry (server clock, ms)
		atMS     int64 // when the claim was answered (client clock, ms)
		attempts int   // the record's attempts when claimed
	}
	var (
		mu         sync.Mutex
		ackedPost  = map[int]string{}         // message number -> msg id
		claims     = map[string][]claimInfo{} // record id -> claims in order
		acks       = map[string]int{}         // record id -> successful ack answers
		killIssued atomic.Bool
		killedAtMS atomic.Int64
		postCount  atomic.Int64
		afterKill  atomic.Int64 // successful survivor requests after the kill
		reached    = make(chan struct{})
		reachOnce  sync.Once
	)
	// survivorErr reports a failed request: a test error on a survivor (or
	// on the victim before the kill); true means "stop, the node is gone".
	survivorErr := func(node int, what string, err error) bool {
		if node == victim && killIssued.Load() {
			return true
		}
		t.Errorf("node %d (%s): %s: %v", node, c.Nodes[node].Addr, what, err)
		return node == victim
	}
	ok := func(node int) {
		if node != victim && killIssued.Load() {
			afterKill.Add(1)
		}
	}

	// Producers: 4 per node, one shared feed of message numbers.
	jobs := make(chan int)
	var prodWG sync.WaitGroup
	for n := range c.Nodes {
		for range producersPer {
			cl := c.Client(n)
			prodWG.Go(func() {
				for i := range jobs {
					m := &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
						Content: message.Content{Format: "text/plain", Content: fmt.Sprintf("kill9 %d #%d", run, i)}}
					res, err := cl.PostSend(ctx, &wire.PostSendRequest{Msg: m})
					if err != nil {
						if survivorErr(n, fmt.Sprintf("post_send %d", i), err) {
							// Not acknowledged; hand the message to a survivor.
							go func() {
								select {
								case jobs <- i:
								case <-ctx.Done():
								}
							}()
							return
						}
						continue
					}
					ok(n)
					mu.Lock()
					ackedPost[i] = res.MsgID
					mu.Unlock()
					if postCount.Add(1) >= killAfter {
						reachOnce.Do(func() { close(reached) })
					}
				}
			})
		}
	}
	go func() {
		for i := range total {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	// Consumers: 2 per node, claim (2 s lease) and ack until told to stop.
	stop := make(chan struct{})
	var consWG sync.WaitGroup
	for n := range c.Nodes {
		for k := range consumersPer {
			cl := c.Client(n)
			holder := fmt.Sprintf("node%d-consumer%d", n, k)
			consWG.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					got, err := cl.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{LeaseMS: leaseMS, WaitMS: 300, Holder: holder, WithObject: ptr(false)})
					if err != nil {
						if survivorErr(n, holder+": next", err) {
							return
						}
						time.Sleep(50 * time.Millisecond)
						continue
					}
					ok(n)
					if got == nil {
						continue
					}
					r := got.Record
					if r.Lease == nil {
						t.Errorf("%s: claimed record %s has no lease", holder, r.RecordID)
						continue
					}
					mu.Lock()
					claims[r.RecordID] = append(claims[r.RecordID], claimInfo{n, r.Lease.ID, r.Lease.ExpiresAtMS, time.Now().UnixMilli(), r.Delivery.Attempts})
					mu.Unlock()
					if n == victim {
						time.Sleep(20 * time.Millisecond) // hold leases, so some die with the node
					}
					if _, err := cl.Ack(ctx, r.RecordID, r.Lease.ID, ""); err != nil {
						if survivorErr(n, fmt.Sprintf("%s: ack %s", holder, r.RecordID), err) {
							return
						}
						continue
					}
					ok(n)
					mu.Lock()
					acks[r.RecordID]++
					mu.Unlock()
				}
			})
		}
	}

	// Kill the victim mid-load, right after it claimed a few records that
	// it will never ack.
	select {
	case <-reached:
	case <-time.After(45 * time.Second):
		t.Fatalf("only %d post_sends acknowledged after 45s", postCount.Load())
	}
	vc := c.Client(victim)
	heldIDs := map[string]bool{}
	for range held {
		got, err := vc.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{LeaseMS: leaseMS, WaitMS: 10000, Holder: "dies-with-node", WithObject: ptr(false)})
		if err != nil {
			t.Fatalf("claim through the victim before the kill: %v", err)
		}
		if got == nil {
			t.Fatalf("claim through the victim before the kill: nothing to claim within 10s while producers are running")
		}
		mu.Lock()
		claims[got.Record.RecordID] = append(claims[got.Record.RecordID], claimInfo{victim, got.Record.Lease.ID, got.Record.Lease.ExpiresAtMS, time.Now().UnixMilli(), got.Record.Delivery.Attempts})
		mu.Unlock()
		heldIDs[got.Record.RecordID] = true
	}
	killIssued.Store(true)
	killedAtMS.Store(time.Now().UnixMilli())
	victimNode.Kill()
	t.Logf("kill -9 of node %d (%s) after %d acknowledged post_sends, holding %d records claimed for the test", victim, victimNode.Addr, postCount.Load(), len(heldIDs))

	// The producers finish on the survivors.
	prodDone := make(chan struct{})
	go func() {
		for postCount.Load() < total && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		close(jobs)
		prodWG.Wait()
		close(prodDone)
	}()
	select {
	case <-prodDone:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d of %d post_sends acknowledged 60s after the kill", postCount.Load(), total)
	}

	// Drain: the survivors' consumers take everything, including the
	// records whose lease died with the victim.
	check := c.Client(0)
	drainDeadline := time.Now().Add(30 * time.Second)
	for {
		left := listAll(ctx, t, check, rcpt, model.Inbox, model.Unread, model.Reading)
		if len(left) == 0 {
			break
		}
		if time.Now().After(drainDeadline) {
			close(stop)
			consWG.Wait()
			t.Fatalf("%d records still UNREAD or READING 30s after the producers finished; first: %s %s lease %+v",
				len(left), left[0].Record.RecordID, left[0].Record.State, left[0].Record.Lease)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	consWG.Wait()
	if afterKill.Load() == 0 {
		t.Errorf("no request to the surviving nodes succeeded after the kill")
	}
	t.Logf("%d successful requests to the survivors after the kill", afterKill.Load())

	// Every acknowledged post_send exactly once; seqs without gaps.
	all := syncAll(ctx, t, check, rcpt, model.Inbox)
	checkSeqs(t, "INBOX of "+rcpt, all)
	perMsg := map[string]int{}
	for _, r := range all {
		perMsg[r.Record.MsgID]++
	}
	for i, id := range ackedPost {
		if perMsg[id] != 1 {
			t.Errorf("acknowledged post_send %d (%s): %d INBOX records, want exactly 1", i, id, perMsg[id])
		}
	}
	for id, n := range perMsg {
		if n != 1 {
			t.Errorf("message %s has %d INBOX records", id, n)
		}
	}
	if len(ackedPost) != total {
		t.Errorf("%d of %d post_sends acknowledged, want all (failed ones are re-sent through a survivor)", len(ackedPost), total)
	}

	// Every record acked exactly once: READED, at most one successful ack
	// answer, and exactly one record.delivered event.
	evs := eventsOf(ctx, t, check, rcpt)
	delivered := countEvents(evs, model.EventRecordDelivered)
	expired := map[string][]model.Event{}
	for _, e := range evs {
		if e.Type == model.EventLeaseExpired {
			expired[e.RecordID] = append(expired[e.RecordID], e)
		}
	}
	bad := 0
	for _, r := range all {
		id := r.Record.RecordID
		if r.Record.State != model.Readed || acks[id] > 1 || delivered[id] != 1 {
			if bad++; bad <= 10 {
				t.Errorf("record %s: state %s, %d successful ack answers, %d record.delivered events; want READED, acked once (claims: %+v)",
					id, r.Record.State, acks[id], delivered[id], claims[id])
			}
		}
	}

	// The records the victim held came back after their lease and were
	// consumed by a survivor.
	returned := 0
	for id, cs := range claims {
		last := cs[len(cs)-1]
		if acks[id] > 0 && !heldIDs[id] {
			continue // acked by the claimer it was handed to last
		}
		// Claimed last by the victim without an ack answer: its ack may have
		// committed just before the kill; otherwise the lease must have
		// expired and the record been re-claimed elsewhere.
		if last.node == victim && !heldIDs[id] && delivered[id] == 1 && len(expired[id]) == 0 {
			continue
		}
		var dead *claimInfo
		for i := range cs {
			if cs[i].node == victim {
				dead = &cs[i]
			}
		}
		if dead == nil {
			t.Errorf("record %s: never acked successfully and never claimed through the victim (claims %+v)", id, cs)
			continue
		}
		if len(expired[id]) != 1 {
			t.Errorf("record %s, leased by the killed node: %d lease_expired events, want exactly 1", id, len(expired[id]))
		} else if e := expired[id][0]; e.AtMS < dead.leaseEnd {
			t.Errorf("record %s: lease returned at %d, %d ms before it expired", id, e.AtMS, dead.leaseEnd-e.AtMS)
		}
		if last.node == victim {
			t.Errorf("record %s, leased by the killed node, was never claimed again (claims %+v)", id, cs)
			continue
		}
		if last.attempts != 1 || last.atMS < dead.leaseEnd {
			t.Errorf("record %s: re-claimed through node %d at %d with %d attempts; want after the dead lease's end %d, with 1 attempt",
				id, last.node, last.atMS, last.attempts, dead.leaseEnd)
		}
		returned++
	}
	if returned < len(heldIDs) {
		t.Errorf("%d records leased by the killed node came back, want at least the %d it held on purpose", returned, len(heldIDs))
	}
	t.Logf("%d records, %d leased by the killed node came back after their lease and were acked elsewhere", len(all), returned)
	if victimNode.ExitCode() != -1 {
		t.Errorf("victim exit code %d, want -1 (killed by a signal)", victimNode.ExitCode())
	}
}
