package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
)

func newTunnelCmd(g *globals) *cobra.Command {
	cmd := groupCmd("tunnel", "Run a connector between msgcenter and an outside system (webhook, telegram, slack, email)")
	cmd.AddCommand(newTunnelWebhookCmd(g), newTunnelTelegramCmd(g), newTunnelSlackCmd(g), newTunnelEmailCmd(g))
	return cmd
}

// tunnelFlags are the flags every connector takes: who it is, where
// inbound messages go, and how its outbox is worked.
type tunnelFlags struct {
	did                   string
	to                    []string
	workers               int
	lease, sendTimeout    time.Duration
	noInbound, noOutbound bool
	aggregate             bool
	window, maxWait       time.Duration
	logLevel              string
}

func (f *tunnelFlags) bind(fl *pflag.FlagSet) {
	fl.StringVar(&f.did, "did", "", "the tunnel's DID (required)")
	fl.StringSliceVar(&f.to, "to", nil, "recipients of inbound messages that name none (comma-separated or repeated)")
	fl.IntVar(&f.workers, "workers", 4, "outbound messages in flight at once")
	fl.DurationVar(&f.lease, "lease", 60*time.Second, "how long a claimed outbound message is held (extended while it is being sent)")
	fl.DurationVar(&f.sendTimeout, "send-timeout", 30*time.Second, "how long sending one outbound message may take")
	fl.BoolVar(&f.noInbound, "no-inbound", false, "take no inbound messages")
	fl.BoolVar(&f.noOutbound, "no-outbound", false, "do not send the tunnel's outbox")
	fl.BoolVar(&f.aggregate, "aggregate", false, "deliver each chat's bursts as one Mail")
	fl.DurationVar(&f.window, "aggregate-window", 0, "with --aggregate: the pause that ends a burst (default: the server's --mail-window)")
	fl.DurationVar(&f.maxWait, "aggregate-max-wait", 0, "with --aggregate: the longest a burst is held (default: the server's --mail-max-wait)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
}

// check refuses flags that make no sense; it returns the recipients.
func (f *tunnelFlags) check() ([]string, error) {
	if err := message.CheckDID("did", f.did, true); err != nil {
		return nil, usagef("--did %q: %s", f.did, fieldMsg(err))
	}
	if !strings.HasPrefix(f.did, "did:") {
		return nil, usagef("--did %q is not a DID; give the tunnel's, like did:tunnel:hook", f.did)
	}
	if f.noInbound && f.noOutbound {
		return nil, usagef("--no-inbound and --no-outbound leave nothing to do")
	}
	to := splitList(f.to)
	for _, d := range to {
		if err := message.CheckDID("to", d, true); err != nil {
			return nil, usagef("--to %q: %s", d, fieldMsg(err))
		}
		if !strings.HasPrefix(d, "did:") {
			return nil, usagef("--to %q is not a DID; give the agents', like did:agent:helper", d)
		}
	}
	switch {
	case f.workers < 1 || f.workers > 256:
		return nil, usagef("--workers must be 1..256, got %d", f.workers)
	case f.lease < 3*time.Second:
		return nil, usagef("--lease must be at least 3s, got %v", f.lease)
	case f.sendTimeout <= 0:
		return nil, usagef("--send-timeout must be positive, got %v", f.sendTimeout)
	case !f.aggregate && (f.window != 0 || f.maxWait != 0):
		return nil, usagef("--aggregate-window and --aggregate-max-wait need --aggregate")
	case f.window < 0 || f.maxWait < 0:
		return nil, usagef("--aggregate-window and --aggregate-max-wait must not be negative")
	}
	return to, nil
}

// fieldMsg is a field error's message without the field's name (the
// flag names it).
func fieldMsg(err error) string {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Message
	}
	return err.Error()
}

// connector is what a tunnel command runs: an inbound loop or server
// (nil with --no-inbound) and a Sender for its outbox.
type connector struct {
	inbound func(ctx context.Context, in *tunnel.Inbound) error
	sender  tunnel.Sender
	// account is the tunnel's account on the platform (the bot, the
	// Slack team), kept in routes and in inbound messages' keys.
	account string
}

// runTunnel checks the server, then runs the connector's inbound side and
// its outbox until ctx ends or one of them fails.
func runTunnel(cmd *cobra.Command, g *globals, f *tunnelFlags, to []string, platform string,
	setup func(ctx context.Context, c *client.Client, log *slog.Logger) (*connector, error)) error {
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
	// The token must be the tunnel's (or an admin's): found out now, not
	// by the outside system through answers it cannot act on.
	me, err := c.WhoAmI(ctx)
	if err != nil {
		return err
	}
	if me.Role != model.RoleAdmin && (me.Role != model.RoleTunnel || me.DID != f.did) {
		return fmt.Errorf("the token is %s's (role %s); %s needs its own tunnel token (msgcenter token create --did %s --role tunnel) or an admin's", me.DID, me.Role, f.did, f.did)
	}
	if g.Token == "" && g.env(envToken) == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: running with the admin token of %s; a tunnel's own token (msgcenter token create --did %s --role tunnel) can do only what a tunnel needs\n", g.tokenFile(), f.did)
	}
	conn, err := setup(ctx, c, log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	if !f.noInbound {
		in := &tunnel.Inbound{Client: c, DID: f.did, Platform: platform, AccountID: conn.account, To: to, Logger: log}
		if f.aggregate {
			in.Aggregate = &tunnel.Aggregate{Window: f.window, MaxWait: f.maxWait}
		}
		run(func() error { return conn.inbound(ctx, in) })
	}
	if !f.noOutbound {
		ob := &tunnel.Outbox{Client: c, DID: f.did, Workers: f.workers, Lease: f.lease, SendTimeout: f.sendTimeout,
			Logger: log, Sender: conn.sender}
		run(func() error { return ob.Run(ctx) })
		fmt.Fprintf(cmd.OutOrStdout(), "%s tunnel %s: sending its outbox (%d at once)\n", platform, f.did, f.workers)
	}
	<-ctx.Done()
	if cmd.Context().Err() != nil {
		log.Info("stopping: finishing what is in flight (up to --send-timeout)")
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// drainable is a server that can stop taking work and finish what it has
// (http.Server, smtp.Server).
type drainable interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// serveUntil serves srv on ln until ctx ends, then lets the work in flight
// finish (30 s at most) before it returns. closed is what srv's Serve
// returns once shut down.
func serveUntil(ctx context.Context, srv drainable, ln net.Listener, closed error) error {
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, closed) {
		return err // the caller cancels ctx on an error; drained follows
	}
	<-drained // Serve returns as Shutdown starts; what is in flight finishes first
	return nil
}

// readSecretValue reads a secret from its file, else from the
// environment's value; what names it for the user.
func readSecretValue(flag, file, envName, env, what string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", usagef("%s: %v", flag, err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", usagef("%s %s is empty", flag, file)
	case env != "":
		return env, nil
	}
	return "", usagef("give %s with %s FILE or %s", what, flag, envName)
}
