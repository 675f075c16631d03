package mcpserver_test

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/mcpserver"
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
