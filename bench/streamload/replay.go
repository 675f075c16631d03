package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// runReplay fills -owner's INBOX with -records messages of -body bytes
// (unless it already holds that many), then catches up on all of them from
// after_seq=0, -repeat times per transport, and reports records/s and MB/s
// (MB = 10^6 bytes of what came over the wire: SSE event text, or
// WebSocket message payloads).
func runReplay(ctx context.Context, c *config) error {
	cl := producerClient(c, c.fillWorkers)
	res, err := cl.Sync(ctx, wire.SyncQuery{Owner: c.owner, Box: model.Inbox, AfterSeq: int64(c.records - 1), Limit: 1})
	if err != nil {
		return err
	}
	if len(res.Items) == 0 {
		if err := fill(ctx, c, cl); err != nil {
			return err
		}
	} else {
		log.Printf("%s INBOX already holds %d records: not filling", c.owner, c.records)
	}
	for _, tr := range strings.Split(c.transports, ",") {
		for range c.repeat {
			cpu0 := cpuTime(c.pid)
			start := time.Now()
			var n, bytes int64
			var err error
			switch tr {
			case "sse":
				n, bytes, err = replaySSE(ctx, c)
			case "ws":
				n, bytes, err = replayWS(ctx, c)
			default:
				return fmt.Errorf("unknown transport %q", tr)
			}
			if err != nil {
				return fmt.Errorf("%s replay: %w", tr, err)
			}
			d := time.Since(start)
			line := fmt.Sprintf("replay %-3s %d records in %s: %.0f records/s, %.1f MB/s (%.0f bytes/record)",
				tr, n, d.Round(time.Millisecond), float64(n)/d.Seconds(), float64(bytes)/1e6/d.Seconds(), float64(bytes)/float64(n))
			if c.pid != 0 {
				line += fmt.Sprintf("; server CPU %.0f%% of one core", 100*float64(cpuTime(c.pid)-cpu0)/float64(d))
			}
			fmt.Println(line)
		}
	}
	return nil
}

// fill posts messages 0..records-1 to the box from -fill-workers callers.
// Contents are deterministic, so a re-run adds nothing (same msg ids).
func fill(ctx context.Context, c *config, cl *client.Client) error {
	log.Printf("filling %s INBOX with %d messages of %d bytes", c.owner, c.records, c.body)
	start := time.Now()
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	for range c.fillWorkers {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= int64(c.records) {
					return
				}
				m := &message.Message{From: "did:bench:sender", To: []string{c.owner}, Kind: message.KindChat,
					Content: message.Content{Content: pad("replay "+strconv.FormatInt(k, 10)+" ", c.body)}}
				for try := 0; ; try++ {
					_, err := cl.PostSend(ctx, &wire.PostSendRequest{Msg: m})
					if err == nil {
						break
					}
					if errs.Add(1) <= 5 || try > 10 {
						log.Printf("post_send %d: %v", k, err)
					}
					if try > 10 {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	log.Printf("filled in %s (%.0f post_sends/s, %d errors retried)", d.Round(time.Millisecond), float64(c.records)/d.Seconds(), errs.Load())
	return nil
}

// countingBody counts the bytes read through it.
type countingBody struct {
	io.ReadCloser
	n *int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	*b.n += int64(n)
	return n, err
}

type countingTransport struct {
	http.RoundTripper
	n int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &t.n}
	}
	return resp, err
}

var errDone = errors.New("caught up")

// replaySSE catches up with the SDK's StreamBox (frames decoded).
func replaySSE(ctx context.Context, c *config) (int64, int64, error) {
	tr := &countingTransport{RoundTripper: &http.Transport{}}
	cl := client.New(c.url, c.token, client.WithHTTPClient(&http.Client{Transport: tr}))
	var n int64
	want := int64(c.records)
	err := cl.StreamBox(ctx, c.owner, model.Inbox, 0, func(f wire.StreamFrame) error {
		n++
		if f.Seq >= want {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		return n, tr.n, err
	}
	return n, tr.n, nil
}

// replayWS catches up over a raw WebSocket, decoding each frame as the SDK
// would.
func replayWS(ctx context.Context, c *config) (int64, int64, error) {
	conn, _, err := websocket.Dial(ctx, wsURL(c, c.owner, 0), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.token}}})
	if err != nil {
		return 0, 0, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4 << 20)
	var n, bytes int64
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return n, bytes, err
		}
		bytes += int64(len(b))
		var f wire.StreamFrame
		if err := json.Unmarshal(b, &f); err != nil {
			return n, bytes, err
		}
		n++
		if f.Seq >= int64(c.records) {
			return n, bytes, nil
		}
	}
}
