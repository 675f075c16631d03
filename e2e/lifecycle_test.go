package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestSecondServerOnSameDataDirExits: a second serve on a data directory in
// use fails fast, says so and names the first server's pid, and leaves the
// first one working.
func TestSecondServerOnSameDataDirExits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir)
	wantPid := fmt.Sprintf("pid %d", first.Pid())

	for attempt := 1; attempt <= 2; attempt++ {
		start := time.Now()
		res := runCLI(t, "", "serve", "--data", dir, "--listen", "127.0.0.1:0")
		took := time.Since(start)
		if res.Code == 0 {
			t.Fatalf("attempt %d: second serve on %s exited 0, want a failure; stderr:\n%s", attempt, dir, res.Stderr)
		}
		if took > 10*time.Second {
			t.Errorf("attempt %d: second serve took %s to give up, want quickly", attempt, took)
		}
		if !strings.Contains(res.Stderr, "in use") || !strings.Contains(res.Stderr, wantPid) {
			t.Errorf("attempt %d: second serve's error does not say the directory is in use by %s:\n%s", attempt, wantPid, res.Stderr)
		}
		if strings.Contains(res.Stderr, "msgcenter listening") {
			t.Errorf("attempt %d: second serve started listening on a locked data directory:\n%s", attempt, res.Stderr)
		}
		t.Logf("attempt %d: exit code %d after %s: %s", attempt, res.Code, took.Round(time.Millisecond), strings.TrimSpace(res.Stderr))
	}

	ctx := testCtx(t, 30*time.Second)
	if err := first.Client().Health(ctx); err != nil {
		t.Fatalf("first server unhealthy after the second one was refused: %v", err)
	}
	if _, err := first.Client().PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:a", To: []string{"did:b"},
		Content: message.Content{Content: "still here"}}}); err != nil {
		t.Fatalf("first server cannot write after the second one was refused: %v", err)
	}
	if first.exited() {
		t.Fatalf("first server exited: %v", first.waitErr)
	}
}

// TestSIGTERMDrainsAndStops: SIGTERM ends a long poll with 204, lets
// requests in flight finish, and the process exits 0 within seconds after
// logging "stopped"; whatever it acknowledged is there after a restart.
func TestSIGTERMDrainsAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, dir)
	// Every request on a fresh connection: a keep-alive pool can leave a
	// dialed connection that never carries a request, which holds up
	// net/http's Shutdown for 5 s (a known bug, see
	// TestSIGTERMWithUnusedConnection) and is not what this test is about.
	c := client.New(srv.URL, srv.Token, client.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	ctx := testCtx(t, 60*time.Second)

	// The long poll, on an empty box. httptrace tells when its request is
	// on the wire, so the SIGTERM cannot overtake it.
	type pollResult struct {
		rec  *wire.RecordWithMsg
		err  error
		took time.Duration
	}
	pollDone := make(chan pollResult, 1)
	wrote := make(chan struct{})
	var wroteOnce sync.Once
	pollCtx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wroteOnce.Do(func() { close(wrote) }) },
	})
	go func() {
		start := time.Now()
		rec, err := c.Next(pollCtx, "did:idle", model.Inbox, &wire.NextRequest{WaitMS: 30000})
		pollDone <- pollResult{rec, err, time.Since(start)}
	}()

	// A few normal requests, all answered before the signal.
	var sent []string
	for i := range 5 {
		res, err := c.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:term", To: []string{"did:drain"},
			Nonce: fmt.Sprintf("before-%d", i), Content: message.Content{Content: fmt.Sprintf("before SIGTERM %d", i)}}})
		if err != nil {
			t.Fatalf("post_send %d before SIGTERM: %v", i, err)
		}
		sent = append(sent, res.MsgID)
	}
	if recs := syncAll(ctx, t, c, "did:drain", model.Inbox); len(recs) != len(sent) {
		t.Fatalf("sync before SIGTERM: %d records, want %d", len(recs), len(sent))
	}
	select {
	case <-wrote:
	case r := <-pollDone:
		t.Fatalf("long poll ended before SIGTERM: record %v err %v", r.rec, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("long poll request not written within 10 s")
	}
	time.Sleep(200 * time.Millisecond) // let the server pick it up

	// Requests racing the signal: each either fails (not acknowledged) or
	// is acknowledged and then must survive.
	var (
		raceMu    sync.Mutex
		raceAcked []string
		wg        sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := c.PostSend(rctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:term", To: []string{"did:drain"},
					Nonce: fmt.Sprintf("race-%d-%d", w, i), Content: message.Content{Content: "racing SIGTERM"}}})
				cancel()
				if err != nil {
					return
				}
				raceMu.Lock()
				raceAcked = append(raceAcked, res.MsgID)
				raceMu.Unlock()
			}
		})
	}
	time.Sleep(50 * time.Millisecond)

	termAt := time.Now()
	srv.Signal(syscall.SIGTERM)
	if err := srv.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	exitTook := time.Since(termAt)
	wg.Wait()
	if code := srv.ExitCode(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if exitTook > 5*time.Second {
		t.Errorf("exit took %s after SIGTERM, want a few seconds at most (the 30 s long poll must not hold it up)", exitTook)
	}
	var poll pollResult
	select {
	case poll = <-pollDone:
	case <-time.After(5 * time.Second):
		t.Fatal("long poll still pending 5 s after the server exited")
	}
	if poll.err != nil || poll.rec != nil {
		t.Errorf("long poll at SIGTERM: record %v err %v, want 204 (no record, no error)", poll.rec, poll.err)
	}
	if poll.took > 10*time.Second {
		t.Errorf("long poll took %s, want it ended by the shutdown, not by its 30 s wait", poll.took)
	}
	log := srv.Log()
	if !strings.Contains(log, "shutting down") || !strings.Contains(log, "msg=stopped") {
		t.Errorf("log after SIGTERM does not say it drained and stopped:\n%s", log)
	}
	t.Logf("exited %s after SIGTERM; long poll answered after %s; %d requests acknowledged while racing the signal",
		exitTook.Round(time.Millisecond), poll.took.Round(time.Millisecond), len(raceAcked))

	// Everything acknowledged is there after a restart.
	srv2 := startServer(t, dir)
	recs := syncAll(ctx, t, srv2.Client(), "did:drain", model.Inbox)
	have := make(map[string]int)
	for _, r := range recs {
		have[r.Record.MsgID]++
	}
	for _, id := range append(sent, raceAcked...) {
		if have[id] != 1 {
			t.Errorf("acknowledged message %s: %d records after SIGTERM and restart, want 1", id, have[id])
		}
	}
	checkSeqs(t, "INBOX of did:drain after SIGTERM and restart", recs)
}

// TestSIGTERMWithUnusedConnection: a client connection that was opened but
// never carried a request (Go transports and browsers pre-dial such
// connections) must not hold up a graceful stop. net/http's Shutdown treats
// such a connection as busy for 5 s (golang/go#22682); server.Run closes
// those connections after a short grace.
func TestSIGTERMWithUnusedConnection(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	conn, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatalf("dial %s: %v", srv.Addr, err)
	}
	defer conn.Close()
	time.Sleep(200 * time.Millisecond) // let the server accept it
	termAt := time.Now()
	srv.Signal(syscall.SIGTERM)
	if err := srv.wait(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	took := time.Since(termAt)
	if code := srv.ExitCode(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if took > 2*time.Second {
		t.Errorf("serve took %s to exit after SIGTERM with one open connection that sent no request, want under 2 s", took.Round(time.Millisecond))
	}
}

// TestAdminTokenFile: serve writes <data>/admin.token with mode 0600 on first
// start and keeps it across restarts (graceful and kill -9); the CLI uses it
// without --token, and a wrong token fails with exit code 1 and
// "unauthorized".
func TestAdminTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "admin.token")
	srv := startServer(t, dir)
	ctx := testCtx(t, 60*time.Second)

	checkMode := func(when string) {
		t.Helper()
		fi, err := os.Stat(tokenPath)
		if err != nil {
			t.Fatalf("%s: stat %s: %v", when, tokenPath, err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s: %s has mode %04o, want 0600", when, tokenPath, perm)
		}
	}
	checkMode("first start")
	token := srv.Token
	if len(token) < 16 {
		t.Errorf("admin token %q looks too short to be a secret", token)
	}

	res, err := srv.Client().PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:y", To: []string{"did:x"},
		Content: message.Content{Content: "for the CLI"}}})
	if err != nil {
		t.Fatalf("post_send: %v", err)
	}

	cli := func(s *server, when string) {
		t.Helper()
		h := runCLI(t, "", "--server", s.URL, "--data", dir, "health")
		if h.Code != 0 || !strings.Contains(h.Stdout, "ok") {
			t.Errorf("%s: msgcenter health: exit %d, stdout %q, stderr %q; want 0 and ok", when, h.Code, h.Stdout, h.Stderr)
		}
		l := runCLI(t, "", "--server", s.URL, "--data", dir, "box", "list", "did:x", "inbox", "--json")
		if l.Code != 0 {
			t.Fatalf("%s: msgcenter box list without --token: exit %d, stderr:\n%s", when, l.Code, l.Stderr)
		}
		var page wire.ListResult
		if err := json.Unmarshal([]byte(l.Stdout), &page); err != nil {
			t.Fatalf("%s: box list --json printed invalid JSON (%v):\n%s", when, err, l.Stdout)
		}
		if len(page.Items) != 1 || page.Items[0].Record.MsgID != res.MsgID {
			t.Errorf("%s: box list did:x inbox: %d items, want the one message %s", when, len(page.Items), res.MsgID)
		}
		w := runCLI(t, "", "--server", s.URL, "--data", dir, "--token", "not-the-token", "box", "list", "did:x", "inbox")
		if w.Code != 1 || !strings.Contains(w.Stderr, "unauthorized") {
			t.Errorf("%s: box list with a wrong token: exit %d, stderr %q; want exit 1 and \"unauthorized\"", when, w.Code, w.Stderr)
		}
	}
	cli(srv, "first start")

	// No token anywhere: a clear message, exit 1.
	nt := runCLI(t, "", "--server", srv.URL, "--data", t.TempDir(), "box", "list", "did:x", "inbox")
	if nt.Code != 1 || !strings.Contains(nt.Stderr, "no API token") {
		t.Errorf("box list with no token available: exit %d, stderr %q; want exit 1 and \"no API token\"", nt.Code, nt.Stderr)
	}

	// Graceful restart, then a kill -9 restart: same token, still 0600,
	// still accepted.
	srv.Signal(syscall.SIGTERM)
	if err := srv.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"SIGTERM", "kill -9"} {
		next := startServer(t, dir)
		when := "restart after " + how
		if next.Token != token {
			t.Errorf("%s: admin token changed from %q to %q", when, token, next.Token)
		}
		checkMode(when)
		if _, err := client.New(next.URL, token).Sync(ctx, wire.SyncQuery{Owner: "did:x", Box: model.Inbox}); err != nil {
			t.Errorf("%s: the original admin token is not accepted: %v", when, err)
		}
		cli(next, when)
		if how == "SIGTERM" {
			next.Kill()
		}
	}
}

// TestDefaultsNoFlags: `msgcenter serve` with no flags creates
// ./msgcenter-data and listens on 127.0.0.1:7420, and the CLI with no flags
// finds it and its token.
func TestDefaultsNoFlags(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:7420")
	if err != nil {
		t.Skipf("skipping: the default address 127.0.0.1:7420 is busy on this machine (%v), so serve with no flags cannot be tested here", err)
	}
	ln.Close()
	wd := t.TempDir()
	srv, err := tryLaunchServer(t, wd, "serve")
	if err != nil && strings.Contains(err.Error(), "address already in use") {
		t.Skipf("skipping: 127.0.0.1:7420 was taken between the check and the start: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr != "127.0.0.1:7420" {
		t.Errorf("serve with no flags listens on %s, want 127.0.0.1:7420", srv.Addr)
	}
	dataDir := filepath.Join(wd, "msgcenter-data")
	fi, err := os.Stat(dataDir)
	if err != nil || !fi.IsDir() {
		t.Fatalf("serve with no flags did not create ./msgcenter-data in its working directory: %v", err)
	}
	for _, f := range []string{"admin.token", "msgcenter.db"} {
		if _, err := os.Stat(filepath.Join(dataDir, f)); err != nil {
			t.Errorf("./msgcenter-data/%s: %v", f, err)
		}
	}

	h := runCLI(t, wd, "health")
	if h.Code != 0 || !strings.Contains(h.Stdout, "ok") {
		t.Errorf("msgcenter health with no flags: exit %d, stdout %q, stderr %q; want 0 and ok", h.Code, h.Stdout, h.Stderr)
	}
	l := runCLI(t, wd, "box", "list", "did:x", "INBOX", "--json")
	if l.Code != 0 {
		t.Errorf("msgcenter box list with no flags (token from ./msgcenter-data/admin.token): exit %d, stderr:\n%s", l.Code, l.Stderr)
	} else if err := json.Unmarshal([]byte(l.Stdout), new(wire.ListResult)); err != nil {
		t.Errorf("box list --json printed invalid JSON (%v):\n%s", err, l.Stdout)
	}

	srv.Signal(syscall.SIGTERM)
	if err := srv.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code := srv.ExitCode(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}
