package mcpserver_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A client that writes its requests and closes stdin (a script, a runtime
// shutting down) gets every answer, and what it asked for is done.
func TestStdinEndAnswersWhatWasAsked(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	out, took := serveLines(t, srv,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_message","arguments":{"to":["did:agent:bob"],"text":"piped"}}}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"claim","arguments":{"wait_ms":300}}}`)
	if took > 10*time.Second {
		t.Fatalf("serving took %v", took)
	}
	for _, want := range []string{`"id":1,"result"`, `"id":2,"result"`, `"id":"three","result"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output lacks %s:\n%s", want, out)
		}
	}
	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: "did:agent:bob", Box: model.Inbox})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("bob's inbox after the piped send: %+v, %v", res, err)
	}
}

// A line the SDK cannot take (not JSON, a batch, an id that is an object, no
// jsonrpc version) is answered with its JSON-RPC error and the session goes
// on: the calls around it are answered. An id written 5.0 is answered as 5
// and counts as answered, so the end of stdin waits for nothing more.
func TestStdinBadLinesAreAnswered(t *testing.T) {
	t.Parallel()
	out, took := serveLines(t, testserver.Start(t, core.Config{}),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"claim","arguments":{"wait_ms":300}}}`,
		`garbage`,
		`{"foo":1}`,
		`[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":5.0,"method":"tools/list"}`)
	if took > 10*time.Second {
		t.Fatalf("serving took %v: the end of stdin waited for an answer it had", took)
	}
	for _, want := range []string{`"id":2,"result"`, `"id":5,"result"`, `"code":-32700`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `"code":-32600`); n != 3 {
		t.Fatalf("%d invalid-request answers, want 3 (an object without jsonrpc, a batch, an object id):\n%s", n, out)
	}
}

// serveLines serves lines, then the end of stdin, to ann's MCP server over
// stdio, after initializing the session; it returns what was written and
// how long serving took.
func serveLines(t *testing.T, srv *testserver.Server, lines ...string) (string, time.Duration) {
	t.Helper()
	s, err := mcpserver.New(srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	if err != nil {
		t.Fatal(err)
	}
	in := strings.NewReader(strings.Join(append([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, lines...), "\n") + "\n")
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := mcpserver.ServeIO(ctx, s, in, &out); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("serve: %v\n%s", err, out.String())
	}
	return out.String(), time.Since(start)
}

// A line longer than any request msgcenter would take (17 MiB, past the
// SDK's own 16 MiB, which ended the session) is answered as too large
// under its id, and the calls around it are answered too.
func TestStdinOverlongLineIsAnswered(t *testing.T) {
	t.Parallel()
	huge := `{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{"name":"send_message","arguments":{"to":["did:agent:bob"],"text":"` +
		strings.Repeat("x", 17<<20) + `"}}}`
	out, _ := serveLines(t, testserver.Start(t, core.Config{}),
		`{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"claim","arguments":{"wait_ms":300}}}`,
		huge,
		`{"jsonrpc":"2.0","id":52,"method":"tools/list"}`)
	for _, want := range []string{`"id":50,"result"`, `"id":52,"result"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output lacks %s:\n%.2000s", want, out)
		}
	}
	if !strings.Contains(out, `{"jsonrpc":"2.0","id":51,"error":{"code":-32600`) || !strings.Contains(out, "send less") {
		t.Fatalf("the overlong line's answer is missing:\n%.2000s", out)
	}
}
