package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// produce dispatches n messages to alice's INBOX from workers goroutines,
// texts prefix-0 … prefix-(n-1), each with pad bytes of padding.
func (e *env) produce(t *testing.T, prefix string, n, workers, pad int) *sync.WaitGroup {
	var wg sync.WaitGroup
	padding := strings.Repeat("x", pad)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				m := chat(didExt, []string{didAlice}, fmt.Sprintf("%s-%d", prefix, i))
				m.Content.Title = padding
				r, err := e.try("POST", "/v1/dispatch", e.tunnel, wire.DispatchRequest{Msg: m})
				if err != nil || r.status != http.StatusOK {
					t.Errorf("dispatch %d: %v %v", i, err, r)
					return
				}
			}
		})
	}
	return &wg
}

// streamTally checks frames arriving over several connections: each must
// carry the next seq after the cursor, and every text must come once.
type streamTally struct {
	t      *testing.T
	name   string
	cursor int64
	texts  map[string]bool
}

func (s *streamTally) add(f wire.StreamFrame) {
	if f.Seq != s.cursor+1 {
		s.t.Fatalf("%s: frame seq %d after cursor %d: a gap or a duplicate", s.name, f.Seq, s.cursor)
	}
	s.cursor = f.Seq
	text := contentOf(s.t, f.Msg)
	if s.texts[text] {
		s.t.Fatalf("%s: %q received twice", s.name, text)
	}
	s.texts[text] = true
}

// TestStreamChaosResume: 1,200 messages flow from 8 producers while a
// WebSocket client and an SSE client are each cut off 100 times at random
// points (after a random number of frames, or after a random time, which
// may fall mid-frame or mid-wait) and resume from their cursor. Both must
// end with every message exactly once, in seq order. (The 5,000-message run
// is in e2e, against the real binary: under -race here, the in-process
// SQLite alone would take most of a minute to write them.)
func TestStreamChaosResume(t *testing.T) {
	t.Parallel()
	const total, cuts = 1200, 100
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	prod := e.produce(t, "c", total, 8, 0)
	path := boxPath(didAlice, model.Inbox, "stream") + "?after_seq="

	var wg sync.WaitGroup
	wg.Go(func() {
		tally := &streamTally{t: t, name: "WebSocket", texts: map[string]bool{}}
		rng := rand.New(rand.NewPCG(1, 2))
		for n := 0; tally.cursor < total; n++ {
			c, _, err := websocket.Dial(ctx, e.wsURL(path+fmt.Sprint(tally.cursor)),
				&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.alice}}})
			if err != nil {
				t.Errorf("WebSocket dial %d: %v", n, err)
				return
			}
			c.SetReadLimit(1 << 20)
			limit, rctx, rcancel := 1<<30, ctx, context.CancelFunc(func() {})
			if n < cuts {
				if rng.IntN(2) == 0 {
					limit = 1 + rng.IntN(16)
				} else {
					rctx, rcancel = context.WithTimeout(ctx, time.Duration(rng.IntN(20_000))*time.Microsecond)
				}
			}
			for i := 0; i < limit && tally.cursor < total; i++ {
				_, b, err := c.Read(rctx)
				if err != nil {
					if n >= cuts {
						t.Errorf("WebSocket read after the cuts: %v", err)
						rcancel()
						return
					}
					break // cut by time
				}
				var f wire.StreamFrame
				if err := json.Unmarshal(b, &f); err != nil {
					t.Errorf("WebSocket frame: %v", err)
					rcancel()
					return
				}
				tally.add(f)
			}
			rcancel()
			_ = c.CloseNow()
		}
	})
	wg.Go(func() {
		tally := &streamTally{t: t, name: "SSE", texts: map[string]bool{}}
		rng := rand.New(rand.NewPCG(3, 4))
		for n := 0; tally.cursor < total; n++ {
			cctx, ccancel := context.WithCancel(ctx)
			s, r, err := openSSE(cctx, e, path+fmt.Sprint(tally.cursor), e.alice, nil)
			if err != nil || s == nil {
				t.Errorf("SSE open %d: %v %v", n, err, r)
				ccancel()
				return
			}
			limit := 1 << 30
			if n < cuts {
				if rng.IntN(2) == 0 {
					limit = 1 + rng.IntN(16)
				} else {
					time.AfterFunc(time.Duration(rng.IntN(20_000))*time.Microsecond, ccancel)
				}
			}
			for i := 0; i < limit && tally.cursor < total; {
				ev, err := s.next()
				if err != nil {
					if n >= cuts {
						t.Errorf("SSE read after the cuts: %v", err)
						ccancel()
						return
					}
					break
				}
				if ev.comment != "" {
					continue
				}
				var f wire.StreamFrame
				if err := json.Unmarshal([]byte(ev.data), &f); err != nil {
					t.Errorf("SSE frame: %v", err)
					ccancel()
					return
				}
				tally.add(f)
				i++
			}
			ccancel()
			s.close()
		}
	})
	prod.Wait()
	wg.Wait()
	t.Logf("%d messages from 8 producers, two clients cut %d times each: %s", total, cuts, time.Since(start).Round(time.Millisecond))
}

// TestStreamSlowClientCutOff: a WebSocket client that stops reading is
// disconnected with 1008 "client too slow" once a frame has waited for it
// longer than the write timeout, and counted once as such, while a normal
// WebSocket client and a normal SSE client of the same box receive
// everything.
func TestStreamSlowClientCutOff(t *testing.T) {
	t.Parallel()
	const total = 200
	// The timeout is what the readers that keep up must never reach: at
	// 300 ms the fast WebSocket was cut off once, its reader starved of
	// CPU under -race on a loaded host. The slow client is cut off
	// whatever the timeout, since it never reads.
	e := newEnvWith(t, api.Options{StreamWriteTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := boxPath(didAlice, model.Inbox, "stream")

	// The slow client's socket takes little, so the server's writes block
	// soon: 200 frames of 32 KiB are more than the kernel buffers hold.
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	slowHTTP := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	slow := dialWS(t, ctx, e, path, e.alice, &websocket.DialOptions{HTTPClient: slowHTTP})
	fast := dialWS(t, ctx, e, path, e.alice, nil)
	sse := mustSSE(t, ctx, e, path, e.alice, nil)

	var wg sync.WaitGroup
	fastTally := &streamTally{t: t, name: "fast WebSocket", texts: map[string]bool{}}
	sseTally := &streamTally{t: t, name: "SSE", texts: map[string]bool{}}
	wg.Go(func() {
		for fastTally.cursor < total {
			_, b, err := fast.Read(ctx)
			if err != nil {
				t.Errorf("fast WebSocket: %v after seq %d", err, fastTally.cursor)
				return
			}
			var f wire.StreamFrame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Error(err)
				return
			}
			fastTally.add(f)
		}
	})
	wg.Go(func() {
		for sseTally.cursor < total {
			ev, err := sse.next()
			if err != nil {
				t.Errorf("SSE: %v after seq %d", err, sseTally.cursor)
				return
			}
			if ev.comment == "" {
				var f wire.StreamFrame
				if err := json.Unmarshal([]byte(ev.data), &f); err != nil {
					t.Error(err)
					return
				}
				sseTally.add(f)
			}
		}
	})
	prod := e.produce(t, "s", total, 4, 32<<10)

	// Wait for the server to give up on the slow client, then read what it
	// managed to send: frames in order, then the close reason.
	for !strings.Contains(string(e.do(t, "GET", "/metrics", "", nil).body), `msgcenter_stream_slow_disconnects_total{kind="box"} 1`) {
		if ctx.Err() != nil {
			t.Fatal("the server never cut off the client that does not read")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var last int64
	var err error
	for {
		var b []byte
		if _, b, err = slow.Read(ctx); err != nil {
			break
		}
		var f wire.StreamFrame
		if jerr := json.Unmarshal(b, &f); jerr != nil || f.Seq != last+1 {
			t.Fatalf("slow client: frame seq %d after %d (%v)", f.Seq, last, jerr)
		}
		last = f.Seq
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != "client too slow" {
		t.Errorf("slow client ended with %v, want close 1008 \"client too slow\"", err)
	}
	if last >= total {
		t.Errorf("slow client received all %d frames: it was not slow enough to test anything", last)
	}
	prod.Wait()
	wg.Wait()
	if m := string(e.do(t, "GET", "/metrics", "", nil).body); !strings.Contains(m, `msgcenter_stream_slow_disconnects_total{kind="box"} 1`+"\n") {
		t.Errorf("after the close the slow-disconnect counter should still be 1:\n%s", grepLines(m, "slow_disconnects"))
	}
	t.Logf("slow client cut off after %d of %d frames; the others received all", last, total)
}

// TestStreamDeadClientDropped: a WebSocket client that stops reading
// altogether, so that not even the close frame gets through, is dropped
// once the frame in flight is past its grace (the write timeout plus twice
// it, at least 5 s): its stream ends and the owner shows offline, while
// the client's socket is still open.
func TestStreamDeadClientDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 5 s grace of a frame in flight")
	}
	t.Parallel()
	e := newEnvWith(t, api.Options{StreamWriteTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	dead := dialWS(t, ctx, e, boxPath(didAlice, model.Inbox, "stream"), e.alice,
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	defer dead.CloseNow()
	presence := func() wire.PresenceResult {
		return ok[wire.PresenceResult](t, e.do(t, "GET", "/v1/owners/"+esc(didAlice)+"/presence", e.alice, nil))
	}
	for presence().Streams == 0 {
		if ctx.Err() != nil {
			t.Fatal("the stream never showed in alice's presence")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// More than the kernel buffers of both ends hold, so a write blocks.
	e.produce(t, "d", 200, 4, 32<<10).Wait()
	sent := time.Now()
	// Expected about 5.3 s after the write blocked; nothing but that
	// frame's deadline ends the writer's wait, so without it the stream
	// would stay up for good.
	for presence().Online {
		if time.Since(sent) > 15*time.Second {
			t.Fatal("the server kept the stream of a client that reads nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("dropped %s after the last send", time.Since(sent).Round(time.Millisecond))
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
