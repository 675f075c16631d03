package e2e

import (
	"bufio"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

// tunnelProc is a `msgcenter tunnel …` process a test runs.
type tunnelProc struct {
	cmd    *exec.Cmd
	logs   *logBuffer
	exited chan error
}

// startTunnel runs the binary with args and env (added to the child's),
// and waits for a line of its output that says where it listens; it
// returns the address the first group of ready matched ("" when ready is
// nil: it does not wait). The process is killed when the test ends.
func startTunnel(t *testing.T, env []string, ready *regexp.Regexp, args ...string) (*tunnelProc, string) {
	t.Helper()
	p := &tunnelProc{cmd: exec.Command(binPath, args...), logs: &logBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append(childEnv(), env...)
	p.cmd.Stderr = p.logs
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() }) // a no-op once it has exited
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.logs.Write([]byte(sc.Text() + "\n"))
			if ready != nil {
				if m := ready.FindStringSubmatch(sc.Text()); m != nil {
					addr <- m[1]
				}
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	if ready == nil {
		return p, ""
	}
	select {
	case a := <-addr:
		return p, a
	case err := <-p.exited:
		t.Fatalf("tunnel exited before listening: %v\n%s", err, p.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("tunnel did not say where it listens\n%s", p.logs.String())
	}
	return nil, ""
}

// stop sends the process SIGTERM and expects a clean exit.
func (p *tunnelProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("tunnel exited with %v after SIGTERM\n%s", err, p.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("tunnel still running 15s after SIGTERM\n%s", p.logs.String())
	}
}

// A tunnel started with another tunnel's token, or with a --to that is no
// DID, says so at once instead of refusing every message later.
func TestTunnelChecksItsSetupAtStart(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	other := mustToken(ctx, t, srv.Client(), "did:tunnel:other", model.RoleTunnel)
	agentWithTheDID := mustToken(ctx, t, srv.Client(), "did:tunnel:hook", model.RoleAgent)
	for _, c := range []struct {
		token string
		args  []string
		want  string
	}{
		{other, []string{"--did", "did:tunnel:hook"}, "needs its own tunnel token"},
		{agentWithTheDID, []string{"--did", "did:tunnel:hook"}, "(role agent)"},
		{other, []string{"--did", "did:tunnel:other", "--to", "notadid"}, "is not a DID"},
	} {
		cmd := exec.CommandContext(ctx, binPath, append([]string{"tunnel", "webhook", "--listen", "127.0.0.1:0", "--no-outbound"}, c.args...)...)
		cmd.Env = append(childEnv(), "MSGCENTER_SERVER="+srv.URL, "MSGCENTER_TOKEN="+c.token, "MSGCENTER_WEBHOOK_SECRET=0123456789abcdef0123")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("tunnel webhook %v: %v\n%s\nwant an error saying %q", c.args, err, out, c.want)
		}
	}
}
