package e2e

import (
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

var smtpOnRE = regexp.MustCompile(`SMTP on (\S+)`)

// relayTo is an SMTP relay that passes each mail it takes to a channel.
type relayTo chan string

func (r relayTo) NewSession(*smtp.Conn) (smtp.Session, error) { return r, nil }
func (r relayTo) Reset()                                      {}
func (r relayTo) Logout() error                               { return nil }
func (r relayTo) Mail(string, *smtp.MailOptions) error        { return nil }
func (r relayTo) Rcpt(string, *smtp.RcptOptions) error        { return nil }
func (r relayTo) Data(d io.Reader) error {
	b, err := io.ReadAll(d)
	r <- string(b)
	return err
}

// The mail tunnel as a user runs it: a mail to the agent's mailbox
// reaches the agent, and the agent's answer is mailed through the relay,
// from the agent's own address.
func TestEmailTunnel(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	tok := mustToken(ctx, t, admin, "did:tunnel:mail", model.RoleTunnel)
	relayed := make(relayTo, 4)
	rs := smtp.NewServer(relayed)
	rs.Domain = "relay.test"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rs.Serve(ln) }()
	defer rs.Close()

	tun, smtpAddr := startTunnel(t, []string{"MSGCENTER_SERVER=" + srv.URL, "MSGCENTER_TOKEN=" + tok}, smtpOnRE,
		"tunnel", "email", "--did", "did:tunnel:mail", "--listen", "127.0.0.1:0",
		"--mailbox", "helper@agents.test=did:agent:helper", "--relay", ln.Addr().String(), "--relay-tls", "none",
		"--log-level", "warn")

	c, err := smtp.Dial(smtpAddr)
	if err != nil {
		t.Fatal(err)
	}
	mail := "From: carol@example.com\r\nTo: helper@agents.test\r\nSubject: help\r\nMessage-ID: <c-1@example.com>\r\n\r\nmy build is red\r\n"
	if err := c.SendMail("carol@example.com", []string{"helper@agents.test"}, strings.NewReader(mail)); err != nil {
		t.Fatalf("mailing the tunnel: %v\n%s", err, tun.logs.String())
	}
	c.Close()
	inbox := syncAll(ctx, t, admin, "did:agent:helper", model.Inbox)
	if len(inbox) != 1 {
		t.Fatalf("inbox has %d records", len(inbox))
	}
	if m, err := message.Decode(inbox[0].Msg); err != nil || m.From != "did:email:carol@example.com" || m.Content.Title != "help" {
		t.Fatalf("inbound %+v, %v", m, err)
	}
	if _, err := admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:agent:helper",
		To: []string{"did:email:carol@example.com"}, Content: message.Content{Title: "Re: help", Content: "try a clean build"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-relayed:
		for _, want := range []string{"From: <helper@agents.test>", "To: <carol@example.com>", "Subject: Re: help", "try a clean build"} {
			if !strings.Contains(got, want) {
				t.Fatalf("relayed mail lacks %q:\n%s", want, got)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("nothing relayed within 20s\n%s", tun.logs.String())
	}
	tun.stop(t)
}
