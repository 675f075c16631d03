package mcpserver

import (
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
)

// NewCached is newServer with a schema cache, for the benchmark.
func NewCached(c *client.Client, did string, cache *mcp.SchemaCache) (*mcp.Server, error) {
	return newServer(c, did, cache, callTimeout)
}

// NewWithTimeout is New whose calls to msgcenter give up after d.
func NewWithTimeout(c *client.Client, did string, d time.Duration) (*mcp.Server, error) {
	return newServer(c, did, nil, d)
}

// ServeIO is Serve on in and out.
var ServeIO = serveIO
