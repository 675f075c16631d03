package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/model"
)

// mcpAgent runs `msgcenter mcp` as an agent runtime does (a subprocess
// speaking MCP on stdin/stdout) with token, and connects to it.
type mcpAgent struct {
	cs     *mcp.ClientSession
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

func startMCP(ctx context.Context, t *testing.T, srv *server, token string, args ...string) *mcpAgent {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"mcp"}, args...)...)
	cmd.Env = append(childEnv(), "MSGCENTER_SERVER="+srv.URL, "MSGCENTER_TOKEN="+token)
	a := &mcpAgent{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = a.stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to msgcenter mcp: %v\n%s", err, a.stderr)
	}
	a.cs = cs
	t.Cleanup(func() { a.close(t) })
	return a
}

// close ends the session as a runtime does, by closing stdin; the process
// must then exit by itself, cleanly.
func (a *mcpAgent) close(t *testing.T) {
	if a.cs == nil {
		return
	}
	_ = a.cs.Close()
	a.cs = nil
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("msgcenter mcp exited %d after its client left\n%s", code, a.stderr)
	}
}

func (a *mcpAgent) call(ctx context.Context, t *testing.T, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, a.stderr)
	}
	if res.IsError {
		t.Fatalf("%s failed: %+v", tool, res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %s: %v", tool, b, err)
	}
}

// Two agents, each through its own `msgcenter mcp` process, against a real
// server: one sends, the other claims and acks.
func TestMCPAgentsTalk(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	ann := startMCP(ctx, t, srv, mustToken(ctx, t, admin, "did:agent:ann", model.RoleAgent))
	bob := startMCP(ctx, t, srv, mustToken(ctx, t, admin, "did:agent:bob", model.RoleAgent))

	var sent mcpserver.SendOutput
	ann.call(ctx, t, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "can you review #42?"}, &sent)
	if !sent.Sent || len(sent.DeliveredTo) != 1 {
		t.Fatalf("send_message = %+v", sent)
	}
	var got mcpserver.ClaimOutput
	bob.call(ctx, t, "claim", map[string]any{"wait_ms": 5000}, &got)
	if !got.Claimed || got.Message.From != "did:agent:ann" || got.Message.Text != "can you review #42?" {
		t.Fatalf("claim = %+v", got)
	}
	var done mcpserver.Outcome
	bob.call(ctx, t, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID}, &done)
	if done.State != string(model.Readed) {
		t.Fatalf("ack = %+v", done)
	}
	rec, err := admin.GetRecord(ctx, got.Message.RecordID, false)
	if err != nil || rec.Record.State != model.Readed || rec.Record.Owner != "did:agent:bob" {
		t.Fatalf("the acked record: %+v, %v", rec, err)
	}
	ann.close(t)
	bob.close(t)
}

// msgcenter mcp refuses at start a token it cannot act with, saying what
// to use instead, before any MCP traffic.
func TestMCPChecksItsTokenAtStart(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	tunnel := mustToken(ctx, t, admin, "did:tunnel:x", model.RoleTunnel)
	agent := mustToken(ctx, t, admin, "did:agent:ann", model.RoleAgent)
	for _, tc := range []struct {
		token string
		args  []string
		want  string
	}{
		{tunnel, nil, "need an agent's token"},
		{srv.Token, nil, "--did is required"},
		{agent, []string{"--did", "did:agent:bob"}, "the token speaks for did:agent:ann"},
	} {
		cmd := exec.CommandContext(ctx, binPath, append([]string{"mcp"}, tc.args...)...)
		cmd.Env = append(childEnv(), "MSGCENTER_SERVER="+srv.URL, "MSGCENTER_TOKEN="+tc.token)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("mcp %v: err %v, stderr %q, stdout %q; want a refusal saying %q", tc.args, err, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// bearerTransport adds a token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// An agent that is no subprocess reaches the same tools over HTTP at
// `msgcenter serve`'s /mcp, with its own token.
func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	connect := func(did string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: bearerTransport{mustToken(ctx, t, admin, did, model.RoleAgent)}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, tr, nil)
		if err != nil {
			t.Fatalf("connect to %s/mcp as %s: %v", srv.URL, did, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	ann, bob := &mcpAgent{cs: connect("did:agent:ann")}, &mcpAgent{cs: connect("did:agent:bob")}
	var sent mcpserver.SendOutput
	ann.call(ctx, t, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "from afar"}, &sent)
	var got mcpserver.ClaimOutput
	bob.call(ctx, t, "claim", map[string]any{"wait_ms": 5000}, &got)
	if !got.Claimed || got.Message.MsgID != sent.MsgID || got.Message.From != "did:agent:ann" {
		t.Fatalf("claim over HTTP = %+v", got)
	}
	var done mcpserver.Outcome
	bob.call(ctx, t, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID}, &done)
	if done.State != string(model.Readed) {
		t.Fatalf("ack over HTTP = %+v", done)
	}
}
