package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// runIdle opens -conns WebSocket streams on -boxes empty INBOXes (stream i
// on box i % boxes) and reads the server's VmRSS before, once all are open
// and -settle has passed, and after they are closed again. The streams stay
// idle: nothing is posted, only the server's heartbeat pings flow (answered
// by CloseRead's reader).
func runIdle(ctx context.Context, c *config) error {
	if c.pid == 0 {
		return fmt.Errorf("idle: -pid (the server's process id) is required")
	}
	raiseFileLimit(uint64(c.conns) + 1024)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	rss := func(what string) int64 {
		v, err := procStatus(c.pid, "VmRSS")
		if err != nil {
			log.Fatal(err)
		}
		th, _ := procStatus(c.pid, "Threads")
		fmt.Printf("%-34s server VmRSS %8d KiB, threads %d, stream gauge %s\n", what, v, th,
			metric(c, `msgcenter_stream_connections{kind="box"} `))
		return v
	}
	before := rss("before:")

	// One transport for all dials, without keep-alive pooling (each
	// WebSocket takes its connection over).
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	hdr := http.Header{"Authorization": {"Bearer " + c.token}}
	conns := make([]*websocket.Conn, c.conns)
	var next, failed atomic.Int64
	var firstErr sync.Once
	start := time.Now()
	var dialers sync.WaitGroup
	for range c.dialers {
		dialers.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= c.conns {
					return
				}
				owner := fmt.Sprintf("did:bench:%s:idle%d", run, i%c.boxes)
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				conn, _, err := websocket.Dial(dctx, wsURL(c, owner, 0), &websocket.DialOptions{HTTPClient: hc, HTTPHeader: hdr})
				cancel()
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { log.Printf("dial %d: %v", i, err) })
					continue
				}
				conn.CloseRead(ctx) // answers pings; the stream sends no data
				conns[i] = conn
			}
		})
	}
	dialers.Wait()
	fmt.Printf("opened %d of %d WebSocket streams on %d boxes in %s (%d failed)\n",
		int64(c.conns)-failed.Load(), c.conns, c.boxes, time.Since(start).Round(time.Millisecond), failed.Load())
	rss("all open:")
	time.Sleep(c.settle)
	after := rss(fmt.Sprintf("all open, after %s:", c.settle))
	open := int64(c.conns) - failed.Load()
	if open > 0 {
		fmt.Printf("per idle stream: (%d - %d) KiB / %d = %.1f KiB\n", after, before, open, float64(after-before)/float64(open))
	}
	for _, conn := range conns {
		if conn != nil {
			_ = conn.CloseNow()
		}
	}
	time.Sleep(c.settle)
	rss(fmt.Sprintf("closed, after %s:", c.settle))
	return nil
}
