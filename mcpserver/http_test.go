package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// remote connects to the node's /mcp with token (and query, if any).
func remote(t *testing.T, srv *testserver.Server, token, query string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + mcpserver.HTTPPath + query,
		HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "remote"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect to %s%s: %v", mcpserver.HTTPPath, query, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// An agent reaches its tools over HTTP at the node with its own token, and
// with that token's rights only.
func TestToolsOverHTTP(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	annTok := token(t, srv, "did:agent:ann", model.RoleAgent)
	ann := remote(t, srv, annTok, "")
	var sent mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "over http"}, &sent)
	if !sent.Sent {
		t.Fatalf("send over HTTP = %+v", sent)
	}
	// An admin's token acts for the DID it names.
	bob := remote(t, srv, token(t, srv, "did:admin:ops", model.RoleAdmin), "?did=did:agent:bob")
	var got mcpserver.ClaimOutput
	call(t, bob, "claim", nil, &got)
	if !got.Claimed || got.Message.Text != "over http" || got.Message.From != "did:agent:ann" {
		t.Fatalf("claim over HTTP = %+v", got)
	}
	// ann's token reads ann's inbox, whatever the request asks.
	if msg := callErr(t, ann, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID}); !strings.Contains(msg, "not found") {
		t.Fatalf("ann acking bob's message: %q", msg)
	}
}

// Requests the endpoint cannot serve are refused before any MCP, each with
// a JSON error that says what to fix.
func TestHTTPRefusals(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := token(t, srv, "did:agent:ann", model.RoleAgent)
	for _, tc := range []struct {
		name, token, query string
		status             int
		code, says         string
	}{
		{"no token", "", "", 401, wire.CodeUnauthorized, "Authorization: Bearer"},
		{"unknown token", "not-a-token", "", 401, wire.CodeUnauthorized, "unknown or revoked"},
		{"a tunnel's token", token(t, srv, "did:tunnel:x", model.RoleTunnel), "", 403, wire.CodeForbidden, "need an agent's token"},
		{"another DID", ann, "?did=did:agent:bob", 403, wire.CodeForbidden, "speaks for did:agent:ann"},
		{"an admin without a DID", token(t, srv, "did:admin:ops", model.RoleAdmin), "", 400, wire.CodeInvalid, "?did="},
		{"a bad DID", ann, "?did=not%20a%20did", 400, wire.CodeInvalid, "did"},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+mcpserver.HTTPPath+tc.query,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body wire.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || body.Error.Code != tc.code || !strings.Contains(body.Error.Message, tc.says) {
			t.Errorf("%s: %d %+v (%v); want %d %s saying %q", tc.name, resp.StatusCode, body, err, tc.status, tc.code, tc.says)
		}
	}
}

func token(t *testing.T, srv *testserver.Server, did string, role model.Role) string {
	t.Helper()
	res, err := srv.Admin.CreateToken(context.Background(), &wire.TokenRequest{DID: did, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return res.Token
}

// A token revoked after its tools served a request is refused at the next
// one, though the node keeps the server it built for it.
func TestRevokedTokenIsRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ctx := context.Background()
	tok, err := srv.Admin.CreateToken(ctx, &wire.TokenRequest{DID: "did:agent:ann", Role: model.RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	var inbox mcpserver.InboxOutput
	call(t, remote(t, srv, tok.Token, ""), "check_inbox", nil, &inbox)
	if err := srv.Admin.RevokeToken(ctx, tok.TokenID); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+mcpserver.HTTPPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a revoked token: %d, want 401", resp.StatusCode)
	}
}

// A claim whose HTTP client went away stops waiting: a message that comes
// later stays in the inbox for the next claim instead of being taken for
// nobody. And a request through a proxy (another Host) is served.
func TestAbandonedHTTPClaimTakesNothing(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	bob := token(t, srv, "did:agent:bob", model.RoleAgent)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"claim","arguments":{"wait_ms":20000}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+mcpserver.HTTPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Host = "mc.example.com" // as a TLS proxy in front of the node sends it
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err == nil {
		// The answer started (headers): read until the client gives up.
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a claim through a proxy: %d", resp.StatusCode)
		}
	}
	if err == nil {
		t.Fatal("the claim answered before the client gave up; want it waiting")
	}
	time.Sleep(300 * time.Millisecond) // the abandoned claim's cancellation reaches the node
	if _, err := srv.Admin.PostSend(context.Background(), &wire.PostSendRequest{Msg: &message.Message{From: "did:agent:ann",
		To: []string{"did:agent:bob"}, Content: message.Content{Content: "after the client left"}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: "did:agent:bob", Box: model.Inbox})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 1 || res.Items[0].Record.State != model.Unread {
		t.Fatalf("bob's inbox after the abandoned claim: %+v; want the message UNREAD", res.Items)
	}
}

// The scheme of the Authorization header is read in any letter case, and
// the answer is plain JSON.
func TestHTTPBearerAnyCaseAndJSONAnswers(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := token(t, srv, "did:agent:ann", model.RoleAgent)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+mcpserver.HTTPPath,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"check_inbox","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "bearer "+ann)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Result struct {
			StructuredContent mcpserver.InboxOutput `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || body.Result.StructuredContent.Messages == nil {
		t.Fatalf("%d %s: %+v, %v", resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
	}
}
