package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/model"
)

func newMCPCmd(g *globals) *cobra.Command {
	var did string
	cmd := &cobra.Command{
		Use:   "mcp [--did DID]",
		Short: "Serve an agent's mailbox as MCP tools on stdin/stdout, for AI agent runtimes",
		Long: `Serve an agent's mailbox as Model Context Protocol tools on stdin and stdout:
send_message (now or after delay_ms, to DIDs or a group), cancel_scheduled,
check_inbox, claim, extend_lease, ack, fail, check_deliveries and read_group.
An agent runtime starts it as a subprocess; the tools act for the token's DID,
with its rights and nothing more.

Give it the agent's own token (msgcenter token create --did DID). With an
admin's token, --did says whom to act for.

A client configuration (Claude Desktop, Claude Code, and others):

  {"mcpServers": {"msgcenter": {
     "command": "msgcenter", "args": ["mcp"],
     "env": {"MSGCENTER_SERVER": "http://127.0.0.1:7420", "MSGCENTER_TOKEN": "<the agent's token>"}}}}`,
		Example: `  MSGCENTER_TOKEN=<token> msgcenter mcp
  msgcenter mcp --did did:agent:helper     # with the admin token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// A server that accepts but never answers must not keep the
			// runtime waiting on a subprocess that never starts.
			check, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if err := c.Health(check); err != nil {
				return fmt.Errorf("msgcenter at %s does not answer: %w", g.Server, err)
			}
			me, err := c.WhoAmI(check)
			if err != nil {
				return err
			}
			switch {
			case me.Role == model.RoleAdmin && did == "":
				return usagef("--did is required with an admin's token: the DID whose mailbox the tools use (or run with the agent's own token)")
			case me.Role == model.RoleAdmin:
				fmt.Fprintf(cmd.ErrOrStderr(), "msgcenter mcp: acting for %s with an admin's token; the agent's own token (msgcenter token create --did %s) can do only what the agent may\n", did, did)
			case me.Role != model.RoleAgent:
				return fmt.Errorf("the token is %s's, role %s; the MCP tools need an agent's token (msgcenter token create --did DID)", me.DID, me.Role)
			case did != "" && did != me.DID:
				return usagef("--did %s: the token speaks for %s; leave --did out, or use %s's own token", did, me.DID, did)
			default:
				did = me.DID
			}
			srv, err := mcpserver.New(c, did)
			if err != nil {
				return err
			}
			return mcpserver.Serve(ctx, srv)
		},
	}
	cmd.Flags().StringVar(&did, "did", "", "the DID whose mailbox the tools use (default: the token's; required with an admin's token)")
	return cmd
}
