package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"os"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/email"
)

// envSMTPPassword holds the relay's password when --relay-password-file is
// not given.
const envSMTPPassword = "MSGCENTER_SMTP_PASSWORD"

func newTunnelEmailCmd(g *globals) *cobra.Command {
	var f tunnelFlags
	var listen, domain, relay, relayTLS, relayUser, passFile, from string
	var mailboxes []string
	var maxBytes int64
	var maxConns int
	cmd := &cobra.Command{
		Use:   "email --did DID --mailbox ADDR=DID [--relay HOST:PORT] [flags]",
		Short: "A tunnel for mail: mail to agents' mailboxes becomes messages, agents' answers are mailed through a relay",
		Long: `Run a mail tunnel until interrupted. Use the tunnel's own token
(msgcenter token create --did DID --role tunnel), through --token or
` + envToken + `.

Inbound: an SMTP server on --listen takes mail for the --mailbox addresses,
each read by an agent (helper@example.com=did:agent:helper). A mail is
dispatched to its agents from did:email:<From address>, its Subject as
title, its text (first text/plain part, else the HTML) as content, its
Message-ID and recipients as id (a mail delivered twice is one message)
and its other parts listed (not kept) in machine content; it is answered
250 only once stored, 4xx (try later) when msgcenter cannot take it now.
Answers go to its Reply-To, else its From; bounces and auto-replies reach
the agent but are not made answerable (answers carry Auto-Submitted). Mail for other
addresses is refused (550). SPF, DKIM and DMARC are not checked: run it
behind your MX, on an address only that MX reaches.

Outbound: every message in the tunnel's TUNNEL_OUTBOX is mailed to its
route's address (in reply to the mail the person last wrote: the route's
chat_id is its Message-ID) through --relay (STARTTLS unless --relay-tls says tls or
none), from the author's own --mailbox if it has one, else --from, with a
Message-ID that is the same for every attempt. A 4xx answer is retried, a
5xx ends it as DEAD.`,
		Example: `  MSGCENTER_TOKEN=<token> MSGCENTER_SMTP_PASSWORD=… msgcenter tunnel email --did did:tunnel:mail \
      --mailbox helper@example.com=did:agent:helper --listen 10.0.0.5:2525 \
      --relay smtp.example.com:587 --relay-user helper@example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.to) > 0 {
				return usagef("--to is not for mail: each --mailbox names the agent that reads it")
			}
			if _, err := f.check(); err != nil {
				return err
			}
			if maxConns < 1 || maxBytes < 1<<10 {
				return usagef("--max-connections must be at least 1 and --max-mail-bytes at least 1024")
			}
			boxes, fromOf, err := parseMailboxes(mailboxes)
			if err != nil {
				return err
			}
			if !f.noInbound && len(boxes) == 0 {
				return usagef("give at least one --mailbox ADDR=DID: the addresses this tunnel takes mail for")
			}
			var sender *email.Sender
			if !f.noOutbound {
				if sender, err = relaySender(relay, relayTLS, relayUser, passFile, g.env(envSMTPPassword), from, mailboxes, fromOf); err != nil {
					return err
				}
				sender.HelloName = domain
				if relayTLS == "none" && relayUser != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning: with --relay-tls none the relay password goes over the network in clear text")
				}
			}
			return runTunnel(cmd, g, &f, nil, email.Platform, func(ctx context.Context, c *client.Client, log *slog.Logger) (*connector, error) {
				conn := &connector{sender: sender}
				if sender != nil {
					// An answer is mailed as "Re:" the mail it answers.
					sender.Answered = c.GetMessageObject
				}
				if f.noInbound {
					return conn, nil
				}
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return nil, usagef("--listen %s: %v", listen, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "email tunnel %s: SMTP on %s for %d mailboxes\n", f.did, ln.Addr(), len(boxes))
				conn.inbound = func(ctx context.Context, in *tunnel.Inbound) error {
					srv := smtp.NewServer(&email.Backend{In: in, Mailboxes: boxes, Logger: log})
					srv.Domain, srv.MaxMessageBytes, srv.MaxRecipients = domain, maxBytes, 100
					srv.MaxLineLength = 64 << 10 // HTML mail has long lines; 998 is a SHOULD
					srv.ReadTimeout, srv.WriteTimeout = time.Minute, time.Minute
					// Each session may hold a mail of up to --max-mail-bytes.
					return serveUntil(ctx, srv, netutil.LimitListener(ln, maxConns), smtp.ErrServerClosed)
				}
				return conn, nil
			})
		},
	}
	f.bind(cmd.Flags())
	host, _ := os.Hostname()
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:2525", "where the SMTP server takes mail (HOST:PORT)")
	fl.StringArrayVar(&mailboxes, "mailbox", nil, "ADDR=DID: mail to ADDR goes to the agent DID, whose answers are mailed from ADDR (repeat)")
	fl.StringVar(&domain, "domain", host, "this host's name: in the SMTP server's greeting, and in EHLO to the relay")
	fl.Int64Var(&maxBytes, "max-mail-bytes", 25<<20, "the largest mail taken (attachments are listed, not kept)")
	fl.IntVar(&maxConns, "max-connections", 32, "SMTP sessions at once (each may hold a mail of --max-mail-bytes)")
	fl.StringVar(&relay, "relay", "", "the SMTP relay answers are mailed through (HOST:PORT; required unless --no-outbound)")
	fl.StringVar(&relayTLS, "relay-tls", "starttls", "starttls, tls (implicit, port 465) or none")
	fl.StringVar(&relayUser, "relay-user", "", "user name at the relay (PLAIN auth; the password from --relay-password-file or "+envSMTPPassword+")")
	fl.StringVar(&passFile, "relay-password-file", "", "file holding the relay password")
	fl.StringVar(&from, "from", "", "the From of answers by authors without a mailbox (default: the first --mailbox)")
	return cmd
}

// parseMailboxes reads ADDR=DID pairs into address → DID and DID → address.
func parseMailboxes(pairs []string) (map[string]string, map[string]string, error) {
	boxes, fromOf := map[string]string{}, map[string]string{}
	for _, p := range pairs {
		addr, did, ok := strings.Cut(p, "=")
		if !ok {
			return nil, nil, usagef("--mailbox %q: want ADDR=DID, like helper@example.com=did:agent:helper", p)
		}
		a, err := mail.ParseAddress(strings.TrimSpace(addr))
		if err != nil || a.Name != "" {
			return nil, nil, usagef("--mailbox %q: %q is not a bare mail address", p, addr)
		}
		did = strings.TrimSpace(did)
		if err := message.CheckDID("did", did, true); err != nil || !strings.HasPrefix(did, "did:") {
			return nil, nil, usagef("--mailbox %q: %q is not a DID", p, did)
		}
		key := strings.ToLower(a.Address)
		if _, dup := boxes[key]; dup {
			return nil, nil, usagef("--mailbox %s is given twice", a.Address)
		}
		boxes[key] = did
		if _, ok := fromOf[did]; !ok {
			fromOf[did] = a.Address
		}
	}
	return boxes, fromOf, nil
}

// relaySender checks the outbound flags and makes the Sender.
func relaySender(relay, mode, user, passFile, passEnv, from string, mailboxes []string, fromOf map[string]string) (*email.Sender, error) {
	if relay == "" {
		return nil, usagef("--relay HOST:PORT is needed to mail answers (or --no-outbound)")
	}
	if _, _, err := net.SplitHostPort(relay); err != nil {
		return nil, usagef("--relay %q: %v", relay, err)
	}
	switch mode {
	case "starttls", "tls", "none":
	default:
		return nil, usagef("--relay-tls must be starttls, tls or none, got %q", mode)
	}
	var pass string
	if user != "" {
		var err error
		if pass, err = readSecretValue("--relay-password-file", passFile, envSMTPPassword, passEnv, "the relay's password"); err != nil {
			return nil, err
		}
	}
	if from == "" && len(mailboxes) > 0 {
		from, _, _ = strings.Cut(mailboxes[0], "=")
		from = strings.TrimSpace(from)
	}
	if a, err := mail.ParseAddress(from); err != nil || a.Name != "" {
		return nil, usagef("--from %q is not a bare mail address (give --from, or a --mailbox)", from)
	}
	return &email.Sender{Relay: relay, TLS: mode, Username: user, Password: pass, From: from, FromOf: fromOf}, nil
}
