package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/telegram"
)

// envTelegramToken holds the bot's token when --bot-token-file is not
// given.
const envTelegramToken = "MSGCENTER_TELEGRAM_TOKEN"

func newTunnelTelegramCmd(g *globals) *cobra.Command {
	var f tunnelFlags
	var tokenFile, apiURL string
	cmd := &cobra.Command{
		Use:   "telegram --did DID --bot-token-file FILE --to DID [flags]",
		Short: "A tunnel for a Telegram bot: what people write the bot becomes messages, agents' answers go back through it",
		Long: `Run a Telegram bot tunnel until interrupted. Use the tunnel's own token
(msgcenter token create --did DID --role tunnel), through --token or
` + envToken + `, and the bot's token from @BotFather (--bot-token-file or
` + envTelegramToken + `).

Inbound: the tunnel long-polls the bot's updates. Each message a person
sends the bot is dispatched from did:telegram:<user id> to --to, with its
text (or caption) as content and the whole Telegram message as machine
content. An update is confirmed to Telegram only once msgcenter has stored
it, and one seen twice makes nothing new: a crash or restart of the tunnel
loses no message and doubles none. The sender's route through the tunnel
is set to the chat, so an agent answers with post_send to the sender's DID.

Outbound: every message in the tunnel's TUNNEL_OUTBOX is sent to its
route's chat_id, or its forum topic (CHAT/TOPIC), at a group's new id if it
became a supergroup (its title, then its content; longer than 4096 characters,
as several messages). A rate limit is retried after Telegram's retry_after;
a blocked bot or a chat that is gone ends it as DEAD; other failures are
retried with backoff.`,
		Example: `  msgcenter token create --did did:tunnel:tg --role tunnel
  MSGCENTER_TOKEN=<token> MSGCENTER_TELEGRAM_TOKEN=<bot token> \
      msgcenter tunnel telegram --did did:tunnel:tg --to did:agent:helper --aggregate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to, err := f.check()
			if err != nil {
				return err
			}
			if !f.noInbound && len(to) == 0 {
				return usagef("--to names nobody: say which DIDs get what people write the bot")
			}
			botToken, err := readSecretValue("--bot-token-file", tokenFile, envTelegramToken, g.env(envTelegramToken), "the bot's token")
			if err != nil {
				return err
			}
			return runTunnel(cmd, g, &f, to, telegram.Platform, func(ctx context.Context, c *client.Client, log *slog.Logger) (*connector, error) {
				b, err := telegram.NewBot(ctx, botToken, apiURL)
				if err != nil {
					return nil, err
				}
				conn := &connector{sender: &telegram.Sender{Bot: b}, account: strconv.FormatInt(b.ID(), 10)}
				conn.inbound = func(ctx context.Context, in *tunnel.Inbound) error {
					return (&telegram.Poller{Token: botToken, APIURL: apiURL, In: in, Logger: log}).Run(ctx)
				}
				if !f.noInbound {
					fmt.Fprintf(cmd.OutOrStdout(), "telegram tunnel %s: taking the bot's messages for %s\n", f.did, strings.Join(to, ", "))
				}
				return conn, nil
			})
		},
	}
	f.bind(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&tokenFile, "bot-token-file", "", "file holding the bot's token (or env "+envTelegramToken+")")
	fl.StringVar(&apiURL, "api-url", telegram.DefaultAPIURL, "the Bot API's base URL (a local Bot API server)")
	return cmd
}
