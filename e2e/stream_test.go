package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Stream resume tests (issue 4, point 6) against the real binary: a
// WebSocket client and an SSE client (the SDK's StreamBox, which resumes by
// itself) follow one box while producers post to it; both are cut off at
// random points, the server may be restarted mid-stream, and each must end
// with every message exactly once, in seq order.

const streamRcpt = "did:stream:rcpt"

// TestStreamChaos5000: 5,000 messages from 8 producers; each client is cut
// off 100 times at random points and resumes from its cursor.
func TestStreamChaos5000(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	runStreamScenario(t, streamScenario{base: srv.URL, token: srv.Token,
		producers: []*client.Client{poolClient(srv, srv.Token)}, total: 5000, cuts: 100})
}

// TestStreamServerRestart: the server is stopped (SIGTERM, which open
// streams must not hold up) and started again on the same data directory
// and address while 1,500 messages flow; the clients resume across it.
func TestStreamServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir)
	token := srv.Token
	runStreamScenario(t, streamScenario{base: srv.URL, token: token,
		producers: []*client.Client{poolClient(srv, token)}, total: 1500, cuts: 20,
		midway: func() {
			start := time.Now()
			srv.Signal(syscall.SIGTERM)
			if err := srv.wait(5 * time.Second); err != nil {
				t.Errorf("SIGTERM with open streams: %v", err)
				return
			}
			t.Logf("server stopped %s after SIGTERM with streams open", time.Since(start).Round(time.Millisecond))
			srv = startServer(t, dir, "--listen", srv.Addr)
		}})
}

// TestStreamMultiNode: on PostgreSQL, the clients stream from node A while
// the messages are posted through node B (wake-ups cross nodes over
// LISTEN/NOTIFY), with cuts.
func TestStreamMultiNode(t *testing.T) {
	t.Parallel()
	c := startPGCluster(t, 2)
	runStreamScenario(t, streamScenario{base: c.Nodes[0].URL, token: c.Nodes[0].Token,
		producers: []*client.Client{c.Client(1)}, total: 1500, cuts: 50})
}

type streamScenario struct {
	base, token string
	producers   []*client.Client
	total, cuts int
	// midway, when set, runs once a third of the messages are posted.
	midway func()
}

// tally checks one client's frames: each the next seq, each text once.
type tally struct {
	name   string
	cursor atomic.Int64
	texts  map[string]bool
}

func (tl *tally) add(f wire.StreamFrame) error {
	if cur := tl.cursor.Load(); f.Seq != cur+1 {
		return fmt.Errorf("%s: frame seq %d after cursor %d: a gap or a duplicate", tl.name, f.Seq, cur)
	}
	m, err := client.DecodeMessage(f.Msg)
	if err != nil {
		return fmt.Errorf("%s: seq %d: %v", tl.name, f.Seq, err)
	}
	if tl.texts[m.Content.Content] {
		return fmt.Errorf("%s: %q received twice", tl.name, m.Content.Content)
	}
	tl.texts[m.Content.Content] = true
	tl.cursor.Store(f.Seq)
	return nil
}

func runStreamScenario(t *testing.T, sc streamScenario) {
	t.Helper()
	ctx := testCtx(t, 90*time.Second)
	run := time.Now().UnixNano()
	start := time.Now()

	// Producers: post_send, retried until acknowledged (a message's id is
	// its content's hash, so a retry of one that did land adds nothing).
	var posted atomic.Int64
	var wsCuts, sseCuts atomic.Int64
	// The producers keep pace with the cuts: while the clients have been
	// cut fewer times than the messages posted so far call for (the last
	// cut is due before the last message), each producer waits a little
	// before its next post. Without it a fast server had both clients read
	// everything before their last few cuts. Slowed, not stopped: a cut
	// comes only to a client that has read something since its last.
	behind := func() bool {
		c := min(wsCuts.Load(), sseCuts.Load())
		return c < int64(sc.cuts) && posted.Load()*int64(sc.cuts+1) >= (c+1)*int64(sc.total)
	}
	var prod sync.WaitGroup
	const workers = 8
	for w := range workers {
		cl := sc.producers[w%len(sc.producers)]
		prod.Go(func() {
			for i := w; i < sc.total; i += workers {
				if behind() {
					time.Sleep(5 * time.Millisecond)
				}
				m := &message.Message{From: "did:stream:sender", To: []string{streamRcpt}, Kind: message.KindChat,
					Content: message.Content{Content: fmt.Sprintf("%d #%d", run, i)}}
				for {
					if _, err := cl.PostSend(ctx, &wire.PostSendRequest{Msg: m}); err == nil {
						break
					} else if ctx.Err() != nil {
						t.Errorf("post_send %d: %v", i, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				posted.Add(1)
			}
		})
	}

	ws := &tally{name: "WebSocket", texts: map[string]bool{}}
	sse := &tally{name: "SSE (SDK)", texts: map[string]bool{}}
	var cons sync.WaitGroup
	cons.Go(func() { followWS(ctx, t, sc, ws, &wsCuts) })
	cons.Go(func() { followSDK(ctx, t, sc, sse, &sseCuts) })

	if sc.midway != nil {
		for posted.Load() < int64(sc.total/3) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		sc.midway()
	}
	prod.Wait()
	cons.Wait()
	for _, tl := range []*tally{ws, sse} {
		if n := tl.cursor.Load(); n != int64(sc.total) || len(tl.texts) != sc.total {
			t.Errorf("%s: cursor %d, %d distinct messages; want %d of each", tl.name, n, len(tl.texts), sc.total)
		}
	}
	if wsCuts.Load() < int64(sc.cuts) || sseCuts.Load() < int64(sc.cuts) {
		t.Errorf("the clients were cut %d (WebSocket) and %d (SSE) times while the messages flowed, want %d each",
			wsCuts.Load(), sseCuts.Load(), sc.cuts)
	}
	t.Logf("%d messages; WebSocket cut %d times, SSE cut %d times; every message once, in order: %s",
		sc.total, wsCuts.Load(), sseCuts.Load(), time.Since(start).Round(time.Millisecond))
}

// followWS reads the box over raw WebSockets, cutting the connection at a
// random point sc.cuts times and reconnecting after its cursor (retrying
// while the server is away).
func followWS(ctx context.Context, t *testing.T, sc streamScenario, tl *tally, cuts *atomic.Int64) {
	rng := rand.New(rand.NewPCG(7, 8))
	hdr := http.Header{"Authorization": {"Bearer " + sc.token}}
	wsBase := "ws" + strings.TrimPrefix(sc.base, "http")
	for tl.cursor.Load() < int64(sc.total) {
		if ctx.Err() != nil {
			t.Errorf("%s: gave up at cursor %d", tl.name, tl.cursor.Load())
			return
		}
		u := fmt.Sprintf("%s/v1/boxes/%s/INBOX/stream?after_seq=%d", wsBase, streamRcpt, tl.cursor.Load())
		c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the server is restarting
			continue
		}
		c.SetReadLimit(1 << 20)
		cut := cuts.Load() < int64(sc.cuts)
		limit, rctx, rcancel := 1<<30, ctx, context.CancelFunc(func() {})
		if cut {
			if rng.IntN(2) == 0 {
				limit = 1 + rng.IntN(50)
			} else {
				rctx, rcancel = context.WithTimeout(ctx, time.Duration(rng.IntN(30_000))*time.Microsecond)
			}
		}
		for i := 0; i < limit && tl.cursor.Load() < int64(sc.total); i++ {
			_, b, err := c.Read(rctx)
			if err != nil {
				break // cut by time, or the server went away
			}
			var f wire.StreamFrame
			if err := json.Unmarshal(b, &f); err != nil {
				t.Errorf("%s: %v", tl.name, err)
				rcancel()
				_ = c.CloseNow()
				return
			}
			if err := tl.add(f); err != nil {
				t.Error(err)
				rcancel()
				_ = c.CloseNow()
				return
			}
		}
		rcancel()
		if cut {
			cuts.Add(1)
		}
		_ = c.CloseNow()
	}
}

// followSDK reads the box with client.StreamBox over a transport whose
// connections a cutter closes at random moments; the SDK reconnects by
// itself after the last seq it delivered.
func followSDK(ctx context.Context, t *testing.T, sc streamScenario, tl *tally, cuts *atomic.Int64) {
	var mu sync.Mutex
	var conns []net.Conn
	dialer := &net.Dialer{}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()
	cl := client.New(sc.base, sc.token, client.WithHTTPClient(&http.Client{Transport: tr}))
	sctx, stop := context.WithCancel(ctx)
	defer stop()

	go func() {
		rng := rand.New(rand.NewPCG(9, 10))
		last := int64(-1)
		for cuts.Load() < int64(sc.cuts) && sctx.Err() == nil {
			time.Sleep(time.Duration(rng.IntN(20_000)) * time.Microsecond)
			// Cut only a connection that got somewhere: a cut before the
			// first frame only makes the SDK back off.
			if cur := tl.cursor.Load(); cur == last {
				continue
			} else {
				last = cur
			}
			mu.Lock()
			if n := len(conns); n > 0 {
				_ = conns[n-1].Close()
				conns = nil
				cuts.Add(1)
			}
			mu.Unlock()
		}
	}()

	errDone := errors.New("all received")
	err := cl.StreamBox(sctx, streamRcpt, model.Inbox, 0, func(f wire.StreamFrame) error {
		if err := tl.add(f); err != nil {
			return err
		}
		if f.Seq == int64(sc.total) {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Errorf("%s: StreamBox ended at cursor %d: %v", tl.name, tl.cursor.Load(), err)
	}
}

// TestStreamCLI: `msgcenter box stream --json` prints one frame per line,
// replay then live, and Ctrl-C ends it normally.
func TestStreamCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir)
	ctx := testCtx(t, 30*time.Second)
	cl := srv.Client()
	post := func(text string) {
		t.Helper()
		m := &message.Message{From: "did:stream:sender", To: []string{"did:stream:cli"}, Kind: message.KindChat,
			Content: message.Content{Content: text}}
		if _, err := cl.PostSend(ctx, &wire.PostSendRequest{Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	post("one")
	post("two")
	cmd := exec.CommandContext(ctx, binPath, "box", "stream", "did:stream:cli", "INBOX", "--after", "1", "--json",
		"--server", srv.URL, "--data", dir)
	cmd.Env = childEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr logBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	read := func(wantSeq int64, wantText string) {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("box stream ended early (%v); stderr: %s", sc.Err(), stderr.String())
		}
		var f wire.StreamFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("box stream --json printed %q: %v", sc.Text(), err)
		}
		m, err := client.DecodeMessage(f.Msg)
		if err != nil || f.Seq != wantSeq || m.Content.Content != wantText {
			t.Fatalf("frame seq %d %q (%v), want seq %d %q", f.Seq, m.Content.Content, err, wantSeq, wantText)
		}
	}
	read(2, "two")
	post("three")
	read(3, "three")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("box stream after Ctrl-C: %v; stderr: %s", err, stderr.String())
	}
}
