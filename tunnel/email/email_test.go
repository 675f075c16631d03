package email_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/email"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	tunnelDID = "did:tunnel:mail"
	agentDID  = "did:agent:helper"
	mailbox   = "helper@agents.test"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serve runs an SMTP server for be on a free port until the test ends.
func serve(t *testing.T, be smtp.Backend) string {
	t.Helper()
	srv := smtp.NewServer(be)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// sendMail mails body to addr in plain SMTP (the test servers have no TLS).
func sendMail(addr, from, to, body string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SendMail(from, []string{to}, strings.NewReader(body))
}

const aMail = "From: Alice <Alice@Example.com>\r\n" +
	"To: helper@agents.test\r\n" +
	"Subject: =?utf-8?q?Build_=C3=A9chou=C3=A9?=\r\n" +
	"Message-ID: <m-1@example.com>\r\n" +
	"Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=b1\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=iso-8859-1\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"The build is red, d=E9sol=E9e.\r\n" +
	"--b1\r\n" +
	"Content-Type: application/pdf\r\n" +
	"Content-Disposition: attachment; filename=\"log.pdf\"\r\n" +
	"\r\n" +
	"%PDF-1.4 not really\r\n" +
	"--b1--\r\n"

// A mail to an agent's mailbox is stored once (a resent mail is the same
// message), its sender becomes answerable, and mail for anyone else is
// refused.
func TestInbound(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	in := &tunnel.Inbound{Client: srv.Client(t, tunnelDID, model.RoleTunnel), DID: tunnelDID, Platform: email.Platform, Logger: quiet}
	addr := serve(t, &email.Backend{In: in, Mailboxes: map[string]string{mailbox: agentDID}, Logger: quiet})
	for range 2 {
		if err := sendMail(addr, "alice@example.com", "Helper@Agents.test", aMail); err != nil {
			t.Fatalf("SendMail: %v", err)
		}
	}
	err := sendMail(addr, "alice@example.com", "nobody@agents.test", aMail)
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 550 {
		t.Fatalf("mail to an unknown mailbox: %v, want 550", err)
	}

	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: agentDID, Box: model.Inbox, WithObject: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 1 {
		t.Fatalf("inbox has %d records, want one mail", len(res.Items))
	}
	m, err := message.Decode(res.Items[0].Msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "did:email:alice@example.com" || m.Content.Title != "Build échoué" ||
		strings.TrimSpace(m.Content.Content) != "The build is red, désolée." || m.CreatedAtMS != 1_700_000_000_000 {
		t.Fatalf("message from %s title %q text %q at %d", m.From, m.Content.Title, m.Content.Content, m.CreatedAtMS)
	}
	var mm email.Machine
	if err := json.Unmarshal(m.Content.Machine, &mm); err != nil {
		t.Fatal(err)
	}
	if mm.Email.MessageID != "m-1@example.com" || len(mm.Email.Attachments) != 1 || mm.Email.Attachments[0].Filename != "log.pdf" {
		t.Fatalf("machine %+v", mm.Email)
	}
	routes, err := srv.Admin.GetRoutes(context.Background(), "did:email:alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(routes.Routes) != 1 || routes.Routes[0].Address != "alice@example.com" || routes.Routes[0].TunnelDID != tunnelDID ||
		routes.Routes[0].ChatID != "m-1@example.com" {
		t.Fatalf("routes %+v", routes.Routes)
	}
}

// relay is an SMTP relay that keeps what it is given and answers RCPT
// from a script.
type relay struct {
	mu    sync.Mutex
	mails []string
	rcpt  []*smtp.SMTPError // nil: accept
}

func (r *relay) NewSession(*smtp.Conn) (smtp.Session, error) { return &relaySession{r: r}, nil }

type relaySession struct{ r *relay }

func (s *relaySession) Reset()                               {}
func (s *relaySession) Logout() error                        { return nil }
func (s *relaySession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *relaySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if len(s.r.rcpt) > 0 {
		e := s.r.rcpt[0]
		s.r.rcpt = s.r.rcpt[1:]
		if e != nil {
			return e
		}
	}
	return nil
}
func (s *relaySession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.mails = append(s.r.mails, string(b))
	return err
}

// Agents' answers are mailed to the person from the agent's own mailbox;
// a 4xx from the relay is retried (with the same Message-ID), a 5xx is
// DEAD.
func TestOutbound(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{BackoffBase: 100 * time.Millisecond})
	rl := &relay{}
	addr := serve(t, rl)
	ctx := context.Background()
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	if _, err := tun.SetRoutes(ctx, "did:email:bob@example.com", []model.ContactRoute{{Address: "bob@example.com", ChatID: "q-7@example.com"}}); err != nil {
		t.Fatal(err)
	}
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Lease: 5 * time.Second, Wait: 300 * time.Millisecond, Logger: quiet,
		Sender: &email.Sender{Relay: addr, TLS: "none", From: "noreply@agents.test", FromOf: map[string]string{agentDID: mailbox}}}
	testserver.Run(t, ob.Run)

	rl.mu.Lock()
	rl.rcpt = []*smtp.SMTPError{{Code: 451, Message: "greylisted"}}
	rl.mu.Unlock()
	id := srv.Reply(t, agentDID, "did:email:bob@example.com", "", "Hello Bob,\nthe build is green again.")
	testserver.WaitFor(t, "SENT after a 451", func() bool { return srv.Record(t, id).State == model.Sent })
	rec := srv.Record(t, id)
	rl.mu.Lock()
	mails := rl.mails
	rl.rcpt = []*smtp.SMTPError{{Code: 550, Message: "no such user"}}
	rl.mu.Unlock()
	if len(mails) != 1 || rec.Delivery.Attempts != 2 {
		t.Fatalf("%d mails, %d attempts", len(mails), rec.Delivery.Attempts)
	}
	for _, want := range []string{"From: <helper@agents.test>", "To: <bob@example.com>", "Subject: Hello Bob,",
		"Message-Id: " + rec.Delivery.ExternalMsgID, "In-Reply-To: <q-7@example.com>", "References: <q-7@example.com>",
		"the build is green again."} {
		if !strings.Contains(mails[0], want) {
			t.Fatalf("mail lacks %q:\n%s", want, mails[0])
		}
	}
	gone := srv.Reply(t, agentDID, "did:email:bob@example.com", "", "to nobody")
	testserver.WaitFor(t, "DEAD after a 550", func() bool { return srv.Record(t, gone).State == model.Dead })
	if d := srv.Record(t, gone).Delivery; d.ErrorCode != "smtp_550" {
		t.Fatalf("dead record %+v", d)
	}
}

// An agent's answer to a mail (thread.reply_to) that has no title of its
// own is mailed as "Re:" that mail's subject, in reply to exactly it and
// the thread it continued: the tunnel may read what came in through it.
func TestAnswerThreadsUnderTheMailAnswered(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	rl := &relay{}
	addr := serve(t, rl)
	ctx := context.Background()
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	in := &tunnel.Inbound{Client: tun, DID: tunnelDID, Platform: email.Platform, To: []string{agentDID}, Logger: quiet}
	mailText := "From: Bob <bob@example.com>\r\nTo: " + mailbox + "\r\nSubject: Build status\r\n" +
		"Message-ID: <m2@example.com>\r\nIn-Reply-To: <m1@example.com>\r\nDate: Mon, 23 Nov 2026 10:00:00 +0000\r\n\r\nIs it green?\r\n"
	ev, err := email.Event([]byte(mailText), "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.Dispatch(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	// A later mail moves the person's route on: the answer must still
	// thread under the mail it answers.
	later := strings.Replace(strings.Replace(mailText, "<m2@example.com>", "<m3@example.com>", 1), "Build status", "Lunch?", 1)
	if ev, err = email.Event([]byte(later), "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Dispatch(ctx, ev); err != nil {
		t.Fatal(err)
	}
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Lease: 5 * time.Second, Wait: 300 * time.Millisecond, Logger: quiet,
		Sender: &email.Sender{Relay: addr, TLS: "none", From: mailbox, Answered: tun.GetMessageObject}}
	testserver.Run(t, ob.Run)

	sent, err := srv.Admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: agentDID, To: []string{"did:email:bob@example.com"},
		Thread: &message.Thread{ReplyTo: res.MsgID}, Content: message.Content{Content: "Yes, green since 9:40."}}})
	if err != nil || len(sent.Deliveries) != 1 {
		t.Fatalf("post_send %+v, %v", sent, err)
	}
	testserver.WaitFor(t, "the answer SENT", func() bool { return srv.Record(t, sent.Deliveries[0].RecordID).State == model.Sent })
	// An answer to someone else naming bob's mail does not show it bob's
	// subject or Message-ID: it goes as any other mail to that person.
	if _, err := tun.SetRoutes(ctx, "did:email:carol@example.com", []model.ContactRoute{{Address: "carol@example.com"}}); err != nil {
		t.Fatal(err)
	}
	other, err := srv.Admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: agentDID, To: []string{"did:email:carol@example.com"},
		Thread: &message.Thread{ReplyTo: res.MsgID}, Content: message.Content{Content: "Not yours."}}})
	if err != nil || len(other.Deliveries) != 1 {
		t.Fatalf("post_send %+v, %v", other, err)
	}
	testserver.WaitFor(t, "the other answer SENT", func() bool { return srv.Record(t, other.Deliveries[0].RecordID).State == model.Sent })
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.mails) != 2 {
		t.Fatalf("%d mails", len(rl.mails))
	}
	for _, want := range []string{"Subject: Re: Build status", "In-Reply-To: <m2@example.com>", "References: <m1@example.com> <m2@example.com>"} {
		if !strings.Contains(rl.mails[0], want) {
			t.Fatalf("the answer lacks %q:\n%s", want, rl.mails[0])
		}
	}
	for _, leak := range []string{"Build status", "m2@example.com", "m1@example.com"} {
		if strings.Contains(rl.mails[1], leak) {
			t.Fatalf("the mail to carol shows bob's %q:\n%s", leak, rl.mails[1])
		}
	}
}
