package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// runLatency: -streams recipients each followed by one stream (-sse of them
// over the SDK's SSE StreamBox, the rest over raw WebSocket), and -workers
// producers that post_send -rate messages per second for -duration, message
// k to recipient k % streams. The content carries a marker "<run>#<k>;".
// The producer stores t0[k] when post_send's 200 is in; the stream stores
// t1[k] when the frame is decoded. Both are read from one monotonic clock in
// this process. Latency is t1 - t0; it can be negative, when the push beats
// the HTTP answer to the producer.
func runLatency(ctx context.Context, c *config) error {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	n := c.streams
	total := int(float64(c.rate) * c.duration.Seconds())
	warm := n // messages 0..n-1 warm each stream up; n..n+total-1 are measured
	t0 := make([]atomic.Int64, warm+total)
	t1 := make([]atomic.Int64, warm+total)
	isSSE := func(i int) bool { return i < c.sse }
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	rcpt := func(i int) string { return fmt.Sprintf("did:bench:%s:r%d", run, i) }
	marker := []byte(run + "#")

	// got decodes a frame's marker and records its arrival.
	got := func(f *wire.StreamFrame, at int64) {
		if k := frameIndex(f.Msg, marker); k >= 0 && k < len(t1) {
			t1[k].CompareAndSwap(0, at)
		}
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var streams sync.WaitGroup
	streamErrs := make(chan error, n)
	sseClient := client.New(c.url, c.token, client.WithHTTPClient(&http.Client{Transport: &http.Transport{}}))
	for i := range n {
		streams.Go(func() {
			var err error
			if isSSE(i) {
				err = sseClient.StreamBox(sctx, rcpt(i), model.Inbox, 0, func(f wire.StreamFrame) error {
					got(&f, now())
					return nil
				})
			} else {
				err = followWS(sctx, c, rcpt(i), func(f *wire.StreamFrame) { got(f, now()) })
			}
			if err != nil && sctx.Err() == nil {
				streamErrs <- fmt.Errorf("stream %d: %w", i, err)
			}
		})
	}

	prod := producerClient(c, c.workers)
	post := func(k int) error {
		m := &message.Message{From: "did:bench:sender", To: []string{rcpt(k % n)}, Kind: message.KindChat,
			Content: message.Content{Content: pad(run+"#"+strconv.Itoa(k)+";", c.body)}}
		_, err := prod.PostSend(ctx, &wire.PostSendRequest{Msg: m})
		if err == nil {
			t0[k].Store(now())
		}
		return err
	}

	// Warm-up: one message per stream, until every stream has had its
	// frame (so all are connected and past their replay).
	for k := range warm {
		if err := post(k); err != nil {
			return fmt.Errorf("warm-up post_send: %w", err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for k := 0; k < warm; {
		if t1[k].Load() != 0 {
			k++
			continue
		}
		select {
		case err := <-streamErrs:
			return err
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up: stream %d did not get its message within 30s", k)
		}
		time.Sleep(5 * time.Millisecond)
	}
	log.Printf("%d streams connected (%d SSE, %d WebSocket); offering %d msgs/s for %s (%d messages, %d-byte content, %d producers)",
		n, c.sse, n-c.sse, c.rate, c.duration, total, c.body, c.workers)

	// Producers at a steady rate: message k is due at start + k/rate. The
	// pacer hands due messages to the workers; if they fall behind, the
	// queue grows and the achieved rate below shows it.
	jobs := make(chan int, total)
	sched := make([]int64, warm+total)
	var errCount atomic.Int64
	var workers sync.WaitGroup
	for range c.workers {
		workers.Go(func() {
			for k := range jobs {
				if err := post(k); err != nil {
					if errCount.Add(1) <= 5 {
						log.Printf("post_send %d: %v", k, err)
					}
				}
			}
		})
	}
	cpu0, self0 := cpuTime(c.pid), cpuTime(os.Getpid())
	start := time.Now()
	for i := range total {
		due := start.Add(time.Duration(float64(i) / float64(c.rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sched[warm+i] = int64(due.Sub(base))
		jobs <- warm + i
	}
	close(jobs)
	workers.Wait()
	elapsed := time.Since(start)
	cpu1, self1 := cpuTime(c.pid), cpuTime(os.Getpid())

	// Let the last pushes arrive.
	wait := time.Now().Add(10 * time.Second)
	for time.Now().Before(wait) {
		missing := 0
		for k := warm; k < len(t0); k++ {
			if t0[k].Load() != 0 && t1[k].Load() == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	streams.Wait()

	var lat [2][]time.Duration // [0] WebSocket, [1] SSE
	var postLat, e2e []time.Duration
	var early [2]int
	var missing, failed int
	for k := warm; k < len(t0); k++ {
		a, b := t0[k].Load(), t1[k].Load()
		switch {
		case a == 0:
			failed++
			continue
		case b == 0:
			missing++
			continue
		}
		postLat = append(postLat, time.Duration(a-sched[k]))
		e2e = append(e2e, time.Duration(b-sched[k]))
		tr := 0
		if isSSE(k % n) {
			tr = 1
		}
		if b < a {
			early[tr]++
		}
		lat[tr] = append(lat[tr], time.Duration(b-a))
	}
	fmt.Printf("offered %d msgs in %s: achieved %.0f msgs/s; post_send errors %d; pushed frames never received %d\n",
		total, elapsed.Round(time.Millisecond), float64(total-failed)/elapsed.Seconds(), failed, missing)
	if c.pid != 0 {
		fmt.Printf("server CPU during the load: %.0f%% of one core\n", 100*float64(cpu1-cpu0)/float64(elapsed))
	}
	fmt.Printf("this load program's CPU: %.0f%% of one core\n", 100*float64(self1-self0)/float64(elapsed))
	fmt.Printf("post_send (due -> 200):          %s\n", percentiles(postLat))
	fmt.Printf("push WebSocket (200 -> frame):   %s; frame before 200: %d\n", percentiles(lat[0]), early[0])
	fmt.Printf("push SSE/SDK (200 -> frame):     %s; frame before 200: %d\n", percentiles(lat[1]), early[1])
	all := append(append([]time.Duration(nil), lat[0]...), lat[1]...)
	fmt.Printf("push both:                       %s\n", percentiles(all))
	fmt.Printf("end to end (due -> frame):       %s\n", percentiles(e2e))
	return nil
}

// followWS reads owner's INBOX over a WebSocket from seq 0 and hands every
// decoded frame to fn, until ctx ends.
func followWS(ctx context.Context, c *config, owner string, fn func(*wire.StreamFrame)) error {
	conn, _, err := websocket.Dial(ctx, wsURL(c, owner, 0), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.token}}})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(4 << 20)
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return err
		}
		var f wire.StreamFrame
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		fn(&f)
	}
}
