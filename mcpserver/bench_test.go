package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// BenchmarkNew is the cost of a server: New's, and the HTTP handler's,
// which builds one per request with the tools' schemas cached.
func BenchmarkNew(b *testing.B) {
	c := client.New("http://127.0.0.1:1", "t")
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := mcpserver.New(c, "did:agent:a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache := mcp.NewSchemaCache()
		for b.Loop() {
			if _, err := mcpserver.NewCached(c, "did:agent:a", cache); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkToolCall is one tool call end to end against a live node:
// MCP in memory (stdio's cost without the pipes) or over the node's /mcp
// (HTTP, the server built per request from the cache), then the node's
// API.
func BenchmarkToolCall(b *testing.B) {
	srv := testserver.Start(b, core.Config{})
	tok, err := srv.Admin.CreateToken(context.Background(), &wire.TokenRequest{DID: "did:agent:ann", Role: model.RoleAgent})
	if err != nil {
		b.Fatal(err)
	}
	inMemory, err := mcpserver.New(client.New(srv.URL, tok.Token), "did:agent:ann")
	if err != nil {
		b.Fatal(err)
	}
	sessions := map[string]*mcp.ClientSession{}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := inMemory.Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Wait()
	if sessions["stdio"], err = mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), ct, nil); err != nil {
		b.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + mcpserver.HTTPPath, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{tok.Token}}}
	if sessions["http"], err = mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), tr, nil); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"stdio", "http"} {
		cs := sessions[name]
		defer cs.Close()
		for _, tool := range []string{"send_message", "check_inbox"} {
			b.Run(name+"/"+tool, func(b *testing.B) {
				i := 0
				for b.Loop() {
					args := map[string]any{"limit": 10}
					if tool == "send_message" {
						i++
						args = map[string]any{"to": []string{"did:agent:bob"}, "text": fmt.Sprintf("%s %d", name, i)}
					}
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
					if err != nil || res.IsError {
						b.Fatalf("%s: %v %+v", tool, err, res)
					}
				}
			})
		}
	}
}
