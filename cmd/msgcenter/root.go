package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/wire"
)

// Defaults shared by the CLI and `serve`.
const (
	defaultServer  = "http://127.0.0.1:7420"
	defaultDataDir = "msgcenter-data"
	// adminTokenFile is the file under the data directory where `serve`
	// writes the admin token, so a local CLI needs no --token.
	adminTokenFile = "admin.token"
)

// Environment variables that stand in for global flags.
const (
	envServer = "MSGCENTER_SERVER"
	envToken  = "MSGCENTER_TOKEN"
	envData   = "MSGCENTER_DATA"
)

// globals holds the flags every command shares. After the root's
// PersistentPreRunE has run, Server and DataDir are resolved (flag, then
// environment, then default); the token is resolved lazily by client()
// because only commands that call the API need one.
//
// serve.go reads DataDir (and may derive its listen address from Server); it
// must not define its own PersistentPreRun, which would skip the root's.
type globals struct {
	Server  string
	Token   string
	DataDir string
	JSON    bool

	getenv func(string) string
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "msgcenter",
		Short: "Message center for agents, people and external platforms",
		Long: `msgcenter is a message center for AI agents, people and external platforms.

"msgcenter serve" runs the server; every other command calls its HTTP API.
With no flags the CLI talks to ` + defaultServer + ` using the admin token that
serve writes to ./` + defaultDataDir + `/` + adminTokenFile + `.

DIDs are used verbatim (did:web:example.com/alice is fine). BOX is one of
INBOX, OUTBOX, GROUP_INBOX, TUNNEL_OUTBOX, REQUEST_BOX (any letter case), or
consumer:NAME, the box of a durable consumer (see "msgcenter consumer").`,
		SilenceErrors: true, // run() prints errors in one consistent format
		SilenceUsage:  true, // a failed API call is not a usage problem
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.resolve(cmd)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.Server, "server", defaultServer, "server URL (env "+envServer+")")
	pf.StringVar(&g.Token, "token", "", "API token (env "+envToken+"; default: the admin token in <data>/"+adminTokenFile+")")
	pf.StringVar(&g.DataDir, "data", defaultDataDir, "data directory (env "+envData+")")
	pf.BoolVar(&g.JSON, "json", false, "print the raw JSON result instead of a human rendering")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{msg: err.Error()}
	})

	root.AddCommand(
		newServeCmd(g),
		newMigrateCmd(g),
		newPresenceCmd(g),
		newTokenCmd(g),
		newSendCmd(g),
		newDispatchCmd(g),
		newBoxCmd(g),
		newRecordCmd(g),
		newDLQCmd(g),
		newReceiptCmd(g),
		newGroupCmd(g),
		newBlockCmd(g),
		newUnblockCmd(g),
		newBlocksCmd(g),
		newRouteCmd(g),
		newConversationsCmd(g),
		newEventsCmd(g),
		newScheduledCmd(g),
		newMailCmd(g),
		newTunnelCmd(g),
		newConsumerCmd(g),
		newRetentionCmd(g),
		newMessageCmd(g),
		newHealthCmd(g),
		newWhoAmICmd(g),
		newMCPCmd(g),
	)
	return root
}

// resolve fills Server and DataDir from the environment when their flags
// were not given, and checks the server URL early so that a typo is reported
// as such rather than as a connection error.
func (g *globals) resolve(cmd *cobra.Command) error {
	flags := cmd.Flags()
	if !flags.Changed("server") {
		if v := g.env(envServer); v != "" {
			g.Server = v
		}
	}
	if !flags.Changed("data") {
		if v := g.env(envData); v != "" {
			g.DataDir = v
		}
	}
	u, err := url.Parse(g.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--server %q is not a server URL; want something like %s", g.Server, defaultServer)
	}
	return nil
}

func (g *globals) env(key string) string {
	if g.getenv == nil {
		return ""
	}
	return strings.TrimSpace(g.getenv(key))
}

// tokenFile is where serve keeps the admin token.
func (g *globals) tokenFile() string { return filepath.Join(g.DataDir, adminTokenFile) }

// token returns the token to use: --token, then MSGCENTER_TOKEN, then the
// admin token file of the data directory.
func (g *globals) token() (string, error) {
	if g.Token != "" {
		return g.Token, nil
	}
	if v := g.env(envToken); v != "" {
		return v, nil
	}
	b, err := os.ReadFile(g.tokenFile())
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	return "", fmt.Errorf("no API token: pass --token, set %s, or point --data at the data directory of a running `msgcenter serve` (looked for %s)", envToken, g.tokenFile())
}

// client builds an SDK client with the resolved token.
func (g *globals) client(opts ...client.Option) (*client.Client, error) {
	tok, err := g.token()
	if err != nil {
		return nil, err
	}
	return client.New(g.Server, tok, opts...), nil
}

// usageError is a mistake in the command line: reported with a pointer to
// --help and exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{msg: fmt.Sprintf(format, a...)} }

// reportError prints err to stderr and returns the exit code. With --json
// it prints the error as the API's error body (plus the exit code), one
// line a script can parse, as the output it asked for.
func reportError(w io.Writer, cmd *cobra.Command, g *globals, err error) int {
	if g != nil && g.JSON {
		var human strings.Builder
		exit := reportHuman(&human, cmd, g, err)
		d := wire.ErrorDetail{Code: "error", Message: err.Error()}
		var ae *client.APIError
		var ue usageError
		var ne net.Error
		switch {
		case errors.As(err, &ae):
			d = wire.ErrorDetail{Code: ae.Code, Message: ae.Message, Field: ae.Field}
		case errors.Is(err, context.Canceled):
			d.Code = "interrupted"
		case errors.As(err, &ue) || isCobraUsage(err):
			d.Code = "usage"
		case errors.As(err, &ne):
			d.Code = "unreachable"
		}
		b, _ := json.Marshal(struct {
			Error wire.ErrorDetail `json:"error"`
			Exit  int              `json:"exit"`
			Text  string           `json:"text"`
		}{d, exit, strings.TrimSpace(human.String())})
		fmt.Fprintf(w, "%s\n", b)
		return exit
	}
	return reportHuman(w, cmd, g, err)
}

// usesPostgres: does cmd (serve, migrate) run on PostgreSQL?
func usesPostgres(cmd *cobra.Command, g *globals) bool {
	kind := ""
	if f := cmd.Flags().Lookup("store"); f != nil {
		kind = f.Value.String()
		if !f.Changed {
			kind = cmp.Or(g.env("MSGCENTER_STORE"), kind)
		}
	}
	return strings.EqualFold(kind, "postgres")
}

// reportHuman is reportError's rendering for people.
func reportHuman(w io.Writer, cmd *cobra.Command, g *globals, err error) int {
	var ue usageError
	var ae *client.APIError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(w, "error: interrupted")
		return 130
	case errors.As(err, &ue) || isCobraUsage(err):
		fmt.Fprintf(w, "error: %s\n", err)
		if cmd != nil {
			fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return 2
	case errors.As(err, &ae):
		if ae.Field != "" {
			fmt.Fprintf(w, "error: %s: %s: %s\n", ae.Code, ae.Field, ae.Message)
		} else {
			fmt.Fprintf(w, "error: %s: %s\n", ae.Code, ae.Message)
		}
		if flag := flagOfField(cmd, ae.Field); flag != "" {
			fmt.Fprintf(w, "hint: %s is --%s here\n", ae.Field, flag)
		}
		if client.IsUnauthorized(err) {
			fmt.Fprintf(w, "hint: the token was not accepted; check --token, %s or %s\n", envToken, g.tokenFile())
		}
		return 1
	case errors.As(err, &ne):
		fmt.Fprintf(w, "error: %s\n", err)
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "listen" {
			// serve's own address, not a server the CLI talks to.
			if errors.Is(err, syscall.EADDRINUSE) {
				fmt.Fprintln(w, "hint: another process holds that port; pick another with --listen HOST:PORT, or stop it")
			} else {
				fmt.Fprintln(w, "hint: --listen wants HOST:PORT that is free here, e.g. 127.0.0.1:7420")
			}
		} else if cmd != nil && (cmd.Name() == "serve" || cmd.Name() == "migrate") {
			// Not a server the CLI talks to: the database serve uses.
			if usesPostgres(cmd, g) {
				fmt.Fprintln(w, "hint: the store's database could not be reached: check --postgres-url and that PostgreSQL runs there")
			}
		} else {
			fmt.Fprintf(w, "hint: is `msgcenter serve` running at %s? (set --server or %s)\n", g.Server, envServer)
		}
		return 1
	default:
		fmt.Fprintf(w, "error: %s\n", err)
		return 1
	}
}

// fieldFlags names the flags that set an API field in other units than
// the field's (a duration for milliseconds), so the server's error, which
// names the field and its bounds in milliseconds, can be traced to the
// flag that was given.
var fieldFlags = map[string][]string{
	"lease_ms":       {"lease"},
	"wait_ms":        {"wait"},
	"delay_ms":       {"delay", "delay-ms"},
	"deliver_at_ms":  {"deliver-at"},
	"retry_after_ms": {"retry-after"},

	"aggregate.key":         {"aggregate"},
	"aggregate.window_ms":   {"aggregate-window"},
	"aggregate.max_wait_ms": {"aggregate-max-wait"},
}

// flagOfField is the flag of cmd that set an API error's field, "" if
// none does.
func flagOfField(cmd *cobra.Command, field string) string {
	if cmd == nil {
		return ""
	}
	for _, prefix := range []string{"next.", "result."} {
		field = strings.TrimPrefix(field, prefix)
	}
	for _, name := range fieldFlags[field] {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return name
		}
	}
	return ""
}

// isCobraUsage recognizes the usage errors cobra itself returns (unknown
// command, wrong argument count from its validators) which carry no type.
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "required flag") ||
		strings.Contains(s, "arg(s), received") || strings.HasPrefix(s, "invalid argument")
}

// args returns a positional-argument validator that names the missing
// arguments instead of counting them.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) == len(names) {
			return nil
		}
		if len(a) < len(names) {
			return usagef("missing %s (usage: %s)", strings.Join(names[len(a):], " and "), cmd.UseLine())
		}
		return usagef("too many arguments: want %s, got %q", strings.Join(names, " "), a)
	}
}

// groupCmd returns a parent command whose bare invocation explains itself
// instead of silently printing help with exit code 0.
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, a []string) error {
			return usagef("%s needs a subcommand: %s", cmd.CommandPath(), subNames(cmd))
		},
	}
}

func subNames(cmd *cobra.Command) string {
	var n []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			n = append(n, c.Name())
		}
	}
	return strings.Join(n, ", ")
}
