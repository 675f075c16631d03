// Package e2e holds process-level tests: they build the real `msgcenter`
// binary once, start `msgcenter serve` as a child process on a temporary data
// directory, talk to it over HTTP (Go SDK) and through the CLI, and kill it
// (SIGKILL or SIGTERM) to check what survives.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// binPath is the msgcenter binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if os.Getenv("MSGCENTER_TEST_POSTGRES_URL") == "" {
		// go test prints a passing package's skips only with -v: say it here.
		fmt.Fprintln(os.Stderr, "MSGCENTER_TEST_POSTGRES_URL not set: skipping multi-node PostgreSQL tests")
	}
	dir, err := os.MkdirTemp("", "msgcenter-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: create temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "msgcenter")
	build := exec.Command("go", "build", "-o", binPath, "github.com/msgcenter/msgcenter/cmd/msgcenter")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build of cmd/msgcenter failed:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: built %s in %s\n", binPath, time.Since(start).Round(time.Millisecond))
	}
	return m.Run()
}

// childEnv is the environment of child processes: ours without the
// MSGCENTER_* variables, so that a developer's settings cannot steer a test.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MSGCENTER_") {
			env = append(env, kv)
		}
	}
	return env
}

// logBuffer collects a child's output; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// server is one running `msgcenter serve` process.
type server struct {
	t       *testing.T
	cmd     *exec.Cmd
	DataDir string
	Addr    string // host:port it listens on
	URL     string // http://Addr
	Token   string // admin token from <data>/admin.token
	log     *logBuffer

	done    chan struct{} // closed when the process has exited and been waited for
	waitErr error         // cmd.Wait's result, valid after done
}

var listenRE = regexp.MustCompile(`msg="msgcenter listening" addr=(\S+)`)

// startServer starts `msgcenter serve --data dataDir --listen 127.0.0.1:0`
// plus extra arguments, waits for its "listening" line and reads the admin
// token. The process is killed (if still running) and waited for when the
// test ends.
func startServer(t *testing.T, dataDir string, extra ...string) *server {
	t.Helper()
	args := append([]string{"serve", "--data", dataDir, "--listen", "127.0.0.1:0"}, extra...)
	s := launchServer(t, "", args...)
	s.DataDir = dataDir
	s.readToken()
	return s
}

// launchServer starts the binary with args in dir (the test's working
// directory when empty) and waits until it logs its listening address.
func launchServer(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	s, err := tryLaunchServer(t, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryLaunchServer is launchServer returning, rather than failing on, a
// server that exits or stays silent instead of listening.
func tryLaunchServer(t *testing.T, dir string, args ...string) (*server, error) {
	t.Helper()
	s := &server{t: t, log: &logBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binPath, args...)
	s.cmd.Dir = dir
	s.cmd.Env = childEnv()
	s.cmd.Stdout = s.log
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatalf("stderr pipe: %v", err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s %s: %v", binPath, strings.Join(args, " "), err)
	}
	t.Cleanup(s.stop)

	addrCh := make(chan string, 1)
	go func() {
		// Read all of stderr before Wait, as os/exec requires for a pipe.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.log, line)
			if !found {
				if m := listenRE.FindStringSubmatch(line); m != nil {
					found = true
					addrCh <- m[1]
				}
			}
		}
		_, _ = io.Copy(s.log, stderr) // a line too long for the scanner
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()

	select {
	case s.Addr = <-addrCh:
	case <-s.done:
		return nil, fmt.Errorf("msgcenter %s exited before listening (%v); output:\n%s", strings.Join(args, " "), s.waitErr, s.log.String())
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("msgcenter %s did not log its listening address within 30s; output:\n%s", strings.Join(args, " "), s.log.String())
	}
	s.URL = "http://" + s.Addr
	return s, nil
}

func (s *server) readToken() {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "admin.token"))
	if err != nil {
		s.t.Fatalf("read admin token: %v", err)
	}
	s.Token = strings.TrimSpace(string(b))
	if s.Token == "" {
		s.t.Fatalf("admin token file %s is empty", filepath.Join(s.DataDir, "admin.token"))
	}
}

// Pid is the server's process id.
func (s *server) Pid() int { return s.cmd.Process.Pid }

// Log returns everything the server wrote so far.
func (s *server) Log() string { return s.log.String() }

// Client returns an admin SDK client for the server.
func (s *server) Client() *client.Client { return client.New(s.URL, s.Token) }

// exited reports whether the process has exited.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (s *server) Kill() {
	s.t.Helper()
	if s.exited() {
		s.t.Fatalf("Kill: server pid %d had already exited (%v); output:\n%s", s.Pid(), s.waitErr, s.Log())
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.t.Fatalf("kill -9 pid %d: %v", s.Pid(), err)
	}
	if err := s.wait(10 * time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// Signal sends sig to the server.
func (s *server) Signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to pid %d: %v", sig, s.Pid(), err)
	}
}

// wait waits up to d for the process to exit.
func (s *server) wait(d time.Duration) error {
	select {
	case <-s.done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("server pid %d did not exit within %s; output:\n%s", s.Pid(), d, s.Log())
	}
}

// ExitCode is the process's exit code after it exited (-1 when killed by a
// signal).
func (s *server) ExitCode() int { return s.cmd.ProcessState.ExitCode() }

// stop is the cleanup: kill the process if it still runs, and wait for it.
func (s *server) stop() {
	if !s.exited() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("server pid %d still running 10s after SIGKILL", s.Pid())
	}
	if s.t.Failed() {
		s.t.Logf("output of server pid %d:\n%s", s.Pid(), s.Log())
	}
}

// cliResult is the outcome of one CLI run.
type cliResult struct {
	Code           int
	Stdout, Stderr string
}

// runCLI runs the binary with args in dir (the test's working directory when
// empty) and returns its exit code and output. It fails the test only when
// the process cannot be run at all or hangs.
func runCLI(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("msgcenter %s: did not finish within 30s", strings.Join(args, " "))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run msgcenter %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// testCtx is a context bounded by d and by the end of the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// syncAll reads a whole box by seq, with message bodies.
func syncAll(ctx context.Context, t *testing.T, c *client.Client, owner string, box model.BoxKind) []wire.RecordWithMsg {
	t.Helper()
	var all []wire.RecordWithMsg
	after := int64(0)
	for {
		res, err := c.Sync(ctx, wire.SyncQuery{Owner: owner, Box: box, AfterSeq: after, Limit: wire.MaxLimit, WithObject: true})
		if err != nil {
			t.Fatalf("sync %s %s after %d: %v", owner, box, after, err)
		}
		all = append(all, res.Items...)
		if len(res.Items) == 0 {
			return all
		}
		if res.LastSeq <= after {
			t.Fatalf("sync %s %s: last_seq %d did not advance past %d", owner, box, res.LastSeq, after)
		}
		after = res.LastSeq
	}
}

// checkSeqs asserts that a box's records carry seqs 1..N in order, with no
// gap and no duplicate.
func checkSeqs(t *testing.T, what string, recs []wire.RecordWithMsg) {
	t.Helper()
	for i, r := range recs {
		if want := int64(i + 1); r.Record.Seq != want {
			t.Errorf("%s: record %d (msg %s) has seq %d, want %d: seqs must be 1..%d without gap or duplicate",
				what, i, r.Record.MsgID, r.Record.Seq, want, len(recs))
			return
		}
	}
}

func ptr[T any](v T) *T { return &v }
