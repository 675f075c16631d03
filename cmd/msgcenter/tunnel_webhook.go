package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/webhook"
)

// envWebhookSecret holds the webhook tunnel's shared secret when
// --secret-file is not given.
const envWebhookSecret = "MSGCENTER_WEBHOOK_SECRET"

func newTunnelWebhookCmd(g *globals) *cobra.Command {
	var f tunnelFlags
	var listen, secretFile, platform string
	cmd := &cobra.Command{
		Use:   "webhook --did DID --secret-file FILE [flags]",
		Short: "A tunnel over signed HTTP posts: inbound posts become messages, messages to routed DIDs are posted out",
		Long: `Run a webhook tunnel until interrupted. Use the tunnel's own token
(msgcenter token create --did DID --role tunnel), through --token or
` + envToken + `.

Inbound: an outside system posts JSON to http://LISTEN` + webhook.Path + `:
  {"id": "m-1", "from": "alice", "chat_id": "c-9", "text": "hi",
   "reply_url": "https://example.com/hooks/msgcenter"}
signed with the shared secret (headers ` + webhook.HeaderTimestamp + ` and
` + webhook.HeaderSignature + `: v1=hex(HMAC-SHA256(secret, timestamp "." body))).
"from" is the system's name for the user (made did:PLATFORM:NAME) or such a
DID; the message goes to "to" or, when the post names nobody, to --to. An answer
of 200 means the message is stored; a retried post with the same id makes
nothing new. When reply_url is given, the sender's route through this
tunnel is set to it, so that an agent can answer with post_send.

Outbound: every message in the tunnel's TUNNEL_OUTBOX is posted, signed the
same way, to its route's address (an http(s) URL) with its delivery_id as
Idempotency-Key. A 2xx answer delivers it (answer 2xx to a delivery_id you
already have); 408, 429 and 5xx are retried with backoff, no sooner than
their Retry-After; other 4xx end it as DEAD.`,
		Example: `  msgcenter token create --did did:tunnel:hook --role tunnel
  head -c 32 /dev/urandom | base64 > hook.secret
  MSGCENTER_TOKEN=<token> msgcenter tunnel webhook --did did:tunnel:hook \
      --secret-file hook.secret --to did:agent:helper --aggregate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			to, err := f.check()
			if err != nil {
				return err
			}
			if !platformRE.MatchString(platform) {
				return usagef("--platform %q: use lower-case letters, digits, '.', '-' and '_' (it becomes part of DIDs)", platform)
			}
			secret, err := readSecret(secretFile, g.env(envWebhookSecret))
			if err != nil {
				return err
			}
			return runTunnel(cmd, g, &f, to, platform, func(ctx context.Context, c *client.Client, log *slog.Logger) (*connector, error) {
				conn := &connector{sender: &webhook.Sender{Secret: secret, UserAgent: "msgcenter-webhook-tunnel/1"}}
				if f.noInbound {
					return conn, nil
				}
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return nil, usagef("--listen %s: %v", listen, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "webhook tunnel %s: inbound posts to http://%s%s\n", f.did, ln.Addr(), webhook.Path)
				conn.inbound = func(ctx context.Context, in *tunnel.Inbound) error {
					return serveInbound(ctx, ln, webhook.Path, &webhook.Handler{In: in, Secret: secret, Logger: log})
				}
				return conn, nil
			})
		},
	}
	f.bind(cmd.Flags())
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:7430", "where inbound posts are taken (HOST:PORT)")
	fl.StringVar(&secretFile, "secret-file", "", "file holding the shared secret, at least 16 bytes, without the whitespace around it (a trailing newline is not part of it; or env "+envWebhookSecret+")")
	fl.StringVar(&platform, "platform", "webhook", "the platform's name: in routes, and in the DIDs of senders named without one")
	return cmd
}

// platformRE is what a platform name may be: it goes into senders' DIDs.
var platformRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)

// serveInbound serves h on ln until ctx ends, then lets requests in
// flight finish.
func serveInbound(ctx context.Context, ln net.Listener, path string, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle(path, h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"error":{"code":"not_found","message":"post to %s"}}`+"\n", path)
	})
	return serveUntil(ctx, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln, http.ErrServerClosed)
}

// readSecret reads the shared secret from file, else from the
// environment's value.
func readSecret(file, env string) ([]byte, error) {
	v, err := readSecretValue("--secret-file", file, envWebhookSecret, env, "the shared secret")
	if err != nil {
		return nil, err
	}
	if err := webhook.CheckSecret([]byte(v)); err != nil {
		return nil, usagef("the shared secret is %d bytes; use at least %d (for example: head -c 32 /dev/urandom | base64)", len(v), webhook.MinSecretBytes)
	}
	return []byte(v), nil
}
