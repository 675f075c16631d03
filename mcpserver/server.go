// Package mcpserver lets an AI agent use its msgcenter boxes as tools: a
// Model Context Protocol server whose tools send messages (now or later),
// look into the agent's inbox, claim a message with a lease, ack or fail
// it, and hear how deliveries through tunnels ended. It speaks to
// msgcenter through the Go SDK (package client) as one DID, so it holds
// no state of its own and the server's rules (scopes, blocks, leases)
// apply to it as to any other client. It is served over stdio by
// `msgcenter mcp` (Serve) and over streamable HTTP at every node's /mcp
// (HTTPHandler).
package mcpserver

import (
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
)

// Version is what the server says of itself at initialization.
const Version = "1"

// New returns an MCP server whose tools act for did through c. c's token
// must speak for did: an agent's own token, or an admin's.
func New(c *client.Client, did string) (*mcp.Server, error) {
	return newServer(c, did, nil, callTimeout)
}

// newServer is New with the tools' schemas taken from cache when not nil:
// inferring them is most of the cost of a server (about 2 ms), which the
// HTTP handler pays per request otherwise.
func newServer(c *client.Client, did string, cache *mcp.SchemaCache, timeout time.Duration) (*mcp.Server, error) {
	if c == nil {
		return nil, errors.New("mcpserver: no client")
	}
	if did == "" {
		return nil, errors.New("mcpserver: no DID to act for")
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "msgcenter", Version: Version}, &mcp.ServerOptions{
		Instructions: fmt.Sprintf("These tools are the message center mailbox of %s. "+
			"send_message sends to other agents, people (through their tunnels) or a group, now or after delay_ms "+
			"(cancel_scheduled takes a delayed one back). check_inbox shows unread messages without taking them; "+
			"claim takes the next one with a lease, which must then be acked (done) or failed (retried later, or "+
			"dead-lettered) before it expires, or extended (extend_lease) while the work goes on. read_group reads "+
			"a group's log. check_deliveries says which messages sent through tunnels were delivered or failed for good.", did),
		SchemaCache: cache,
	})
	t := &tools{c: c, did: did, timeout: timeout}
	t.register(srv)
	return srv, nil
}
