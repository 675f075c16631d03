package main

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/server"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		listen, durability, logLevel, logFormat string
		storeKind, postgresURL                  string
		maxAttempts, tunnelMaxAttempts          int
		maxMessageBytes                         int
		defaultLease                            time.Duration
		mailWindow, mailMaxWait                 time.Duration
		mailMaxParts                            int
		retention                               retentionFlags
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the msgcenter server (embedded SQLite under --data, or --store postgres)",
		Long: `Run the msgcenter server. With no flags it stores everything in SQLite under
./msgcenter-data and listens on 127.0.0.1:7420. On first start it writes an
admin token to <data>/admin.token (mode 0600), which the other commands use
by default. SIGINT/SIGTERM drain in-flight requests and stop cleanly.

With --store postgres --postgres-url URL any number of nodes share one
PostgreSQL database (each node still keeps its lock and admin token in its
own --data directory). See docs/deploy.md.

Retention deletes finished records (READED, SENT, DEAD, ARCHIVED, DELETED)
30 days after their last change, per box family, and events after 30 days;
acknowledged records of durable consumers go at the next pass. A group's
log (GROUP_INBOX), which no one finishes, goes after its family's period
read or not. Records a consumer has not examined yet are kept. Idempotency
keys are kept as long as the longest period. For example:

  msgcenter serve --retention INBOX=90d,CONSUMER=1d,TUNNEL_OUTBOX=off --retention-events 7d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd, g, "durability", "max-attempts", "tunnel-max-attempts", "max-message-bytes", "default-lease", "log-level", "log-format",
				"mail-window", "mail-max-wait", "mail-max-parts"); err != nil {
				return err
			}
			if !cmd.Flags().Changed("listen") {
				if v := g.env("MSGCENTER_LISTEN"); v != "" {
					listen = v
				}
			}
			var err error
			if storeKind, postgresURL, err = storeFlags(cmd, g, storeKind, postgresURL); err != nil {
				return err
			}
			log, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			if maxAttempts < 1 || tunnelMaxAttempts < 1 {
				return usagef("--max-attempts and --tunnel-max-attempts must be at least 1")
			}
			if maxMessageBytes < 1024 {
				return usagef("--max-message-bytes must be at least 1024")
			}
			if defaultLease < time.Second {
				return usagef("--default-lease must be at least 1s")
			}
			if mailWindow < time.Millisecond || mailWindow > 24*time.Hour {
				return usagef("--mail-window must be between 1ms and 24h")
			}
			if mailMaxWait < mailWindow || mailMaxWait > 24*time.Hour {
				return usagef("--mail-max-wait must be at least --mail-window (%s) and at most 24h", mailWindow)
			}
			if mailMaxParts < 1 {
				return usagef("--mail-max-parts must be at least 1")
			}
			ret, err := retention.config(cmd, g)
			if err != nil {
				return err
			}
			return server.Run(cmd.Context(), server.Config{
				DataDir:     g.DataDir,
				Listen:      listen,
				Store:       storeKind,
				PostgresURL: postgresURL,
				Durability:  durability,
				Logger:      log,
				Core: core.Config{MaxAttempts: maxAttempts, TunnelMaxAttempts: tunnelMaxAttempts, MaxMessageBytes: maxMessageBytes,
					DefaultLease: defaultLease, Retention: ret,
					MailWindow: mailWindow, MailMaxWait: mailMaxWait, MailMaxParts: mailMaxParts},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", server.DefaultListen, "address to listen on, HOST:PORT (env MSGCENTER_LISTEN)")
	addStoreFlags(cmd, &storeKind, &postgresURL)
	f.StringVar(&durability, "durability", "normal", "normal: survives a process crash; full: also an OS crash (fsync per commit) (env MSGCENTER_DURABILITY)")
	f.IntVar(&maxAttempts, "max-attempts", 3, "failed attempts after which a record is DEAD (env MSGCENTER_MAX_ATTEMPTS)")
	f.IntVar(&tunnelMaxAttempts, "tunnel-max-attempts", 10, "the same for TUNNEL_OUTBOX records: with the backoff, about 8 min of a far side being away (env MSGCENTER_TUNNEL_MAX_ATTEMPTS)")
	f.IntVar(&maxMessageBytes, "max-message-bytes", 1<<20, "largest accepted message (canonical JSON bytes) (env MSGCENTER_MAX_MESSAGE_BYTES)")
	f.DurationVar(&defaultLease, "default-lease", 300*time.Second, "lease of a claim that names none (env MSGCENTER_DEFAULT_LEASE)")
	f.DurationVar(&mailWindow, "mail-window", 5*time.Second, "an aggregated burst ends after this long without a part (dispatch's aggregate.window_ms overrides) (env MSGCENTER_MAIL_WINDOW)")
	f.DurationVar(&mailMaxWait, "mail-max-wait", 30*time.Second, "an aggregated burst ends at the latest this long after its first part (aggregate.max_wait_ms overrides) (env MSGCENTER_MAIL_MAX_WAIT)")
	f.IntVar(&mailMaxParts, "mail-max-parts", 100, "an aggregated burst with this many parts ends at once (env MSGCENTER_MAIL_MAX_PARTS)")
	retention.bind(f)
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error (env MSGCENTER_LOG_LEVEL)")
	f.StringVar(&logFormat, "log-format", "text", "text or json (env MSGCENTER_LOG_FORMAT)")
	return cmd
}

// flagsFromEnv sets each named flag that the command line did not give
// from MSGCENTER_<NAME> (dashes as underscores), so that a unit file or a
// container needs no command line. A value the flag refuses is an error
// that names the variable.
func flagsFromEnv(cmd *cobra.Command, g *globals, names ...string) error {
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			continue
		}
		env := "MSGCENTER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		v := g.env(env)
		if v == "" {
			continue
		}
		if err := cmd.Flags().Set(name, v); err != nil {
			return usagef("%s=%q: %v", env, v, err)
		}
	}
	return nil
}

// addStoreFlags adds the flags that pick the store driver (serve, migrate).
func addStoreFlags(cmd *cobra.Command, kind, url *string) {
	cmd.Flags().StringVar(kind, "store", "sqlite", "sqlite (embedded, under --data) or postgres (env MSGCENTER_STORE)")
	cmd.Flags().StringVar(url, "postgres-url", "", "PostgreSQL connection URL for --store postgres (env MSGCENTER_POSTGRES_URL)")
}

// storeFlags fills the store flags from the environment when not given.
// A PostgreSQL URL with the SQLite store is refused: the node would run on
// a database of its own, cut off from the nodes it was meant to join.
func storeFlags(cmd *cobra.Command, g *globals, kind, url string) (string, string, error) {
	if !cmd.Flags().Changed("store") {
		if v := g.env("MSGCENTER_STORE"); v != "" {
			kind = v
		}
	}
	if !cmd.Flags().Changed("postgres-url") {
		if v := g.env("MSGCENTER_POSTGRES_URL"); v != "" {
			url = v
		}
	}
	if url != "" && strings.EqualFold(kind, "sqlite") {
		return kind, url, usagef("a PostgreSQL URL is given (--postgres-url or MSGCENTER_POSTGRES_URL) but the store is sqlite: add --store postgres (or MSGCENTER_STORE=postgres), or drop the URL")
	}
	return kind, url, nil
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level must be debug, info, warn or error, got %q", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, usagef("--log-format must be text or json, got %q", format)
}
