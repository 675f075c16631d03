package e2e

import (
	"context"
	"fmt"
	"net/http/httptrace"
	"slices"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestMultiNodeWakeup (issue 3, point 4): a long-polling get_next on node A
// returns within 100 ms of the 200 of a post_send made through node B. The
// lag is measured from B's answer to A's answer, and asserted on each of 5
// rounds (not on a median).
//
// Not parallel: it is the one test here that bounds a latency from above,
// and on two cores the package's parallel tests (servers started, killed
// and replayed) delay a woken claimer's goroutines by more than the bound
// (a CI run with other tests beside it: median 15 ms, max 136 ms, against
// 2-6 ms alone). Run before the parallel ones, it measures the wake-up, not the
// scheduler's queue.
func TestMultiNodeWakeup(t *testing.T) {
	const (
		rounds  = 5
		maxLag  = 100 * time.Millisecond
		giveUp  = 3 * time.Second // far above maxLag, far below wait_ms
		waitMS  = 10000
		sender  = "did:wake:sender"
		rcptFmt = "did:wake:rcpt-%d"
	)
	c := startPGCluster(t, 2)
	a, b := c.Client(0), c.Client(1)
	ctx := testCtx(t, 60*time.Second)
	run := time.Now().UnixNano()

	var lags []time.Duration
	for r := range rounds {
		rcpt := fmt.Sprintf(rcptFmt, r) // a fresh, empty box per round
		type answer struct {
			rec *wire.RecordWithMsg
			err error
			at  time.Time
		}
		got := make(chan answer, 1)
		sent := make(chan struct{})
		pctx, cancel := context.WithCancel(ctx)
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
		go func() {
			rec, err := a.Next(httptrace.WithClientTrace(pctx, trace), rcpt, model.Inbox,
				&wire.NextRequest{WaitMS: waitMS, LeaseMS: 30000})
			got <- answer{rec, err, time.Now()}
		}()
		select {
		case <-sent:
		case ans := <-got:
			cancel()
			t.Fatalf("round %d: long poll on node A answered before anything was sent: %+v, %v", r, ans.rec, ans.err)
		case <-time.After(10 * time.Second):
			cancel()
			t.Fatalf("round %d: long poll request to node A not written within 10s", r)
		}
		// Let node A run its first (empty) claim and start waiting.
		time.Sleep(300 * time.Millisecond)

		m := &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
			Content: message.Content{Format: "text/plain", Content: fmt.Sprintf("wake-up %d round %d", run, r)}}
		res, err := b.PostSend(ctx, &wire.PostSendRequest{Msg: m})
		sentAt := time.Now()
		if err != nil {
			cancel()
			t.Fatalf("round %d: post_send through node B: %v", r, err)
		}
		var ans answer
		select {
		case ans = <-got:
		case <-time.After(giveUp):
			cancel()
			<-got
			t.Fatalf("round %d: the long poll on node A was not woken within %s of the post_send's 200 through node B "+
				"(wait_ms %d): no cross-node wake-up (LISTEN/NOTIFY)", r, giveUp, waitMS)
		}
		cancel()
		if ans.err != nil {
			t.Fatalf("round %d: long poll on node A: %v", r, ans.err)
		}
		if ans.rec == nil {
			t.Fatalf("round %d: long poll on node A answered 204 after the post_send through node B", r)
		}
		if ans.rec.Record.MsgID != res.MsgID {
			t.Fatalf("round %d: node A handed out %s, want the message just sent through node B (%s)", r, ans.rec.Record.MsgID, res.MsgID)
		}
		lag := max(ans.at.Sub(sentAt), 0)
		lags = append(lags, lag)
		if lag > maxLag {
			t.Errorf("round %d: node A answered %s after node B's 200, want within %s", r, lag.Round(time.Millisecond), maxLag)
		}
	}
	slices.Sort(lags)
	t.Logf("cross-node wake-up lag over %d rounds: min %s, median %s, max %s", rounds, lags[0], lags[len(lags)/2], lags[len(lags)-1])
}
