package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/webhook"
)

// envWebhookSecret holds the webhook tunnel's shared secret when
// --secret-file is not given.
const envWebhookSecret = "MSGCENTER_WEBHOOK_SECRET"

func newTunnelCmd(g *globals) *cobra.Command {
	cmd := groupCmd("tunnel", "Run a connector between msgcenter and an outside system")
	cmd.AddCommand(newTunnelWebhookCmd(g))
	return cmd
}

type webhookFlags struct {
	did, listen, secretFile, platform string
	to                                []string
	workers                           int
	lease, sendTimeout                time.Duration
	noInbound, noOutbound             bool
	aggregate                         bool
	window, maxWait                   time.Duration
	logLevel                          string
}

func newTunnelWebhookCmd(g *globals) *cobra.Command {
	var f webhookFlags
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
"from" is a DID or the system's name for the user (then did:PLATFORM:NAME);
the message goes to "to" or, when the post names nobody, to --to. An answer
of 200 means the message is stored; a retried post with the same id makes
nothing new. When reply_url is given, the sender's route through this
tunnel is set to it, so that an agent can answer with post_send.

Outbound: every message in the tunnel's TUNNEL_OUTBOX is posted, signed the
same way, to its route's address (an http(s) URL) with its delivery_id as
Idempotency-Key. A 2xx answer delivers it; 429 and 503 are retried after
their Retry-After, other 5xx with backoff, other 4xx end it as DEAD.`,
		Example: `  msgcenter token create --did did:tunnel:hook --role tunnel
  head -c 32 /dev/urandom | base64 > hook.secret
  MSGCENTER_TOKEN=<token> msgcenter tunnel webhook --did did:tunnel:hook \
      --secret-file hook.secret --to did:agent:helper --aggregate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWebhookTunnel(cmd, g, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.did, "did", "", "the tunnel's DID (required)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7430", "where inbound posts are taken (HOST:PORT)")
	fl.StringVar(&f.secretFile, "secret-file", "", "file holding the shared secret, at least 16 bytes (or env "+envWebhookSecret+")")
	fl.StringVar(&f.platform, "platform", "webhook", "the platform's name: in routes, and in the DIDs of senders named without one")
	fl.StringSliceVar(&f.to, "to", nil, "recipients of inbound posts that name none (comma-separated or repeated)")
	fl.IntVar(&f.workers, "workers", 4, "outbound posts in flight at once")
	fl.DurationVar(&f.lease, "lease", 60*time.Second, "how long a claimed outbound message is held (extended while its post lasts)")
	fl.DurationVar(&f.sendTimeout, "send-timeout", 30*time.Second, "how long one outbound post may take")
	fl.BoolVar(&f.noInbound, "no-inbound", false, "do not take inbound posts")
	fl.BoolVar(&f.noOutbound, "no-outbound", false, "do not post the tunnel's outbox")
	fl.BoolVar(&f.aggregate, "aggregate", false, "deliver each chat's bursts as one Mail")
	fl.DurationVar(&f.window, "aggregate-window", 0, "with --aggregate: the pause that ends a burst (default: the server's --mail-window)")
	fl.DurationVar(&f.maxWait, "aggregate-max-wait", 0, "with --aggregate: the longest a burst is held (default: the server's --mail-max-wait)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

func runWebhookTunnel(cmd *cobra.Command, g *globals, f *webhookFlags) error {
	if err := message.CheckDID("did", f.did, true); err != nil {
		return usagef("--did: %v", err)
	}
	if f.noInbound && f.noOutbound {
		return usagef("--no-inbound and --no-outbound leave nothing to do")
	}
	to := splitList(f.to)
	for _, d := range to {
		if err := message.CheckDID("to", d, true); err != nil {
			return usagef("--to: %v", err)
		}
	}
	if f.workers < 1 || f.workers > 256 {
		return usagef("--workers must be 1..256, got %d", f.workers)
	}
	if f.lease < 3*time.Second {
		return usagef("--lease must be at least 3s, got %v", f.lease)
	}
	if f.sendTimeout <= 0 {
		return usagef("--send-timeout must be positive, got %v", f.sendTimeout)
	}
	if !f.aggregate && (f.window != 0 || f.maxWait != 0) {
		return usagef("--aggregate-window and --aggregate-max-wait need --aggregate")
	}
	if f.window < 0 || f.maxWait < 0 {
		return usagef("--aggregate-window and --aggregate-max-wait must not be negative")
	}
	secret, err := readSecret(f.secretFile, g.env(envWebhookSecret))
	if err != nil {
		return err
	}
	log, err := newLogger(f.logLevel, "text")
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if err := c.Health(ctx); err != nil {
		return fmt.Errorf("msgcenter at %s does not answer: %w", g.Server, err)
	}

	var ln net.Listener
	if !f.noInbound {
		ln, err = net.Listen("tcp", f.listen)
		if err != nil {
			return usagef("--listen %s: %v", f.listen, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if ln != nil {
		in := &tunnel.Inbound{Client: c, DID: f.did, Platform: f.platform, To: to}
		if f.aggregate {
			in.Aggregate = &tunnel.Aggregate{Window: f.window, MaxWait: f.maxWait}
		}
		mux := http.NewServeMux()
		mux.Handle(webhook.Path, &webhook.Handler{In: in, Secret: secret, Logger: log})
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- err
				cancel()
			}
		}()
		go func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
		fmt.Fprintf(cmd.OutOrStdout(), "webhook tunnel %s: inbound posts to http://%s%s\n", f.did, ln.Addr(), webhook.Path)
	}
	if !f.noOutbound {
		ob := &tunnel.Outbox{Client: c, DID: f.did, Workers: f.workers, Lease: f.lease, SendTimeout: f.sendTimeout,
			Logger: log, Sender: &webhook.Sender{Secret: secret, UserAgent: "msgcenter-webhook-tunnel/1"}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ob.Run(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
		fmt.Fprintf(cmd.OutOrStdout(), "webhook tunnel %s: posting its outbox (%d at once)\n", f.did, f.workers)
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// readSecret reads the shared secret from file, else from the
// environment's value.
func readSecret(file, env string) ([]byte, error) {
	var s []byte
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usagef("--secret-file: %v", err)
		}
		s = []byte(strings.TrimSpace(string(b)))
	case env != "":
		s = []byte(env)
	default:
		return nil, usagef("give the shared secret with --secret-file FILE or %s", envWebhookSecret)
	}
	if err := webhook.CheckSecret(s); err != nil {
		return nil, usagef("the shared secret is %d bytes; use at least %d (for example: head -c 32 /dev/urandom | base64)", len(s), webhook.MinSecretBytes)
	}
	return s, nil
}
