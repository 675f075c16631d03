package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/slack"
)

// The Slack app's secrets, when their files are not given.
const (
	envSlackToken   = "MSGCENTER_SLACK_TOKEN"
	envSlackSigning = "MSGCENTER_SLACK_SIGNING_SECRET"
)

func newTunnelSlackCmd(g *globals) *cobra.Command {
	var f tunnelFlags
	var listen, tokenFile, signingFile, apiURL string
	cmd := &cobra.Command{
		Use:   "slack --did DID --to DID [flags]",
		Short: "A tunnel for a Slack app: what people write it becomes messages, agents' answers go back to the channel",
		Long: `Run a Slack app tunnel until interrupted. Use the tunnel's own token
(msgcenter token create --did DID --role tunnel), through --token or
` + envToken + `, the app's bot token (--bot-token-file or ` + envSlackToken + `)
and its signing secret (--signing-secret-file or ` + envSlackSigning + `).

Inbound: set the app's Event Subscriptions Request URL to
https://<this host>` + slack.Path + ` (in front of --listen) and subscribe to
message.channels, message.im (and app_mention). Each message a person writes
is dispatched from did:slack:<team>:<user> to --to, with its text, and the
Slack event as machine content; Slack is answered 200 once it is stored, and
its retries (and the same message as an app_mention) make nothing new. The
sender's route through the tunnel is set to the channel, so an agent answers
with post_send to the sender's DID.

Outbound: every message in the tunnel's TUNNEL_OUTBOX is posted to its
route's channel with chat.postMessage (the title in bold, then the text),
into the thread the route names (a chat_id of CHANNEL/THREAD_TS: inbound sets
it to the thread the person wrote in, or one under their channel message). A
rate limit is retried after Slack's Retry-After; a channel that is gone, an
archived one or one the app is not in ends it as DEAD; other failures are
retried with backoff.

The app's bot token needs the OAuth scopes chat:write (to post),
channels:history and im:history (for message.channels and message.im) and
app_mentions:read (for app_mention); groups:history and mpim:history too
for private channels and group DMs. A send refused for a scope the token
lacks names the scope in its last_error.`,
		Example: `  msgcenter token create --did did:tunnel:slack --role tunnel
  MSGCENTER_TOKEN=<token> MSGCENTER_SLACK_TOKEN=xoxb-… MSGCENTER_SLACK_SIGNING_SECRET=… \
      msgcenter tunnel slack --did did:tunnel:slack --to did:agent:helper --listen 127.0.0.1:7431`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to, err := f.check()
			if err != nil {
				return err
			}
			if !f.noInbound && len(to) == 0 {
				return usagef("--to names nobody: say which DIDs get what people write the app")
			}
			botToken, err := readSecretValue("--bot-token-file", tokenFile, envSlackToken, g.env(envSlackToken), "the app's bot token (xoxb-…)")
			if err != nil {
				return err
			}
			var signing string
			if !f.noInbound {
				if signing, err = readSecretValue("--signing-secret-file", signingFile, envSlackSigning, g.env(envSlackSigning), "the app's signing secret"); err != nil {
					return err
				}
			}
			return runTunnel(cmd, g, &f, to, slack.Platform, func(ctx context.Context, c *client.Client, log *slog.Logger) (*connector, error) {
				api, team, err := slack.NewClient(ctx, botToken, apiURL)
				if err != nil {
					return nil, err
				}
				conn := &connector{sender: &slack.Sender{API: api}, account: team}
				if f.noInbound {
					return conn, nil
				}
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return nil, usagef("--listen %s: %v", listen, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "slack tunnel %s: events to http://%s%s\n", f.did, ln.Addr(), slack.Path)
				conn.inbound = func(ctx context.Context, in *tunnel.Inbound) error {
					return serveInbound(ctx, ln, slack.Path, &slack.Handler{In: in, SigningSecret: signing, Logger: log})
				}
				return conn, nil
			})
		},
	}
	f.bind(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:7431", "where Slack's event posts are taken (HOST:PORT)")
	fl.StringVar(&tokenFile, "bot-token-file", "", "file holding the app's bot token (or env "+envSlackToken+")")
	fl.StringVar(&signingFile, "signing-secret-file", "", "file holding the app's signing secret (or env "+envSlackSigning+")")
	fl.StringVar(&apiURL, "api-url", "", "Slack's Web API base URL (default https://slack.com/api/)")
	return cmd
}
