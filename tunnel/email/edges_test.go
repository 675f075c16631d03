package email_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/email"
	"github.com/msgcenter/msgcenter/wire"
)

// inboxLen counts the records in did's inbox.
func inboxLen(t *testing.T, srv interface {
	Sync(context.Context, wire.SyncQuery) (*wire.SyncResult, error)
}, did string) int {
	t.Helper()
	res, err := srv.Sync(context.Background(), wire.SyncQuery{Owner: did, Box: model.Inbox, WithObject: true})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}

// An MTA that delivers one mail to two of the tunnel's mailboxes in two
// transactions (a per-recipient queue, a mailing list, a retry of the
// recipients a first transaction did not take) reaches both: the
// recipients are part of the message's id, so the second is not taken for
// the first again.
func TestSplitDeliveryReachesEveryRecipient(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	in := &tunnel.Inbound{Client: srv.Client(t, tunnelDID, model.RoleTunnel), DID: tunnelDID, Platform: email.Platform, Logger: quiet}
	addr := serve(t, &email.Backend{In: in, Logger: quiet,
		Mailboxes: map[string]string{"a@agents.test": "did:agent:a", "b@agents.test": "did:agent:b"}})
	raw := "From: alice@example.com\r\nTo: a@agents.test, b@agents.test\r\nSubject: s\r\nMessage-ID: <split-1@example.com>\r\n\r\nhello\r\n"
	for _, rcpt := range []string{"a@agents.test", "b@agents.test"} {
		if err := sendMail(addr, "alice@example.com", rcpt, raw); err != nil {
			t.Fatalf("to %s: %v", rcpt, err)
		}
	}
	if n := inboxLen(t, srv.Admin, "did:agent:a"); n != 1 {
		t.Fatalf("a has %d", n)
	}
	if n := inboxLen(t, srv.Admin, "did:agent:b"); n != 1 {
		t.Fatalf("the mail was answered 250 for b@agents.test, but b's inbox has %d records", n)
	}
}

// A text full of characters JSON escapes (a log, HTML: '<' becomes
// \u003c) is cut by its escaped size, so the message fits msgcenter's
// limit and the mail is not bounced.
func TestEscapedTextFits(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	in := &tunnel.Inbound{Client: srv.Client(t, tunnelDID, model.RoleTunnel), DID: tunnelDID, Platform: email.Platform, Logger: quiet}
	addr := serve(t, &email.Backend{In: in, Logger: quiet, Mailboxes: map[string]string{mailbox: agentDID}})
	var b strings.Builder
	for b.Len() < 300<<10 {
		b.WriteString(strings.Repeat("<a>&", 20) + "\r\n")
	}
	raw := "From: alice@example.com\r\nSubject: log\r\nMessage-ID: <big-1@example.com>\r\nContent-Type: text/plain\r\n\r\n" + b.String()
	if err := sendMail(addr, "alice@example.com", mailbox, raw); err != nil {
		t.Fatalf("a 300 KiB text mail (well under --max-mail-bytes, cut to 256 KiB): %v", err)
	}
}

// A corrupt attachment (bad base64), which is only listed, never kept,
// does not bounce the mail: its text is delivered.
func TestBadAttachmentDoesNotBounce(t *testing.T) {
	raw := "From: alice@example.com\r\nMessage-ID: <b64@example.com>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n" +
		"--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=x.pdf\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0x!!!!not*base64\r\n--b1--\r\n"
	ev, err := email.Event([]byte(raw), "alice@example.com")
	if err != nil {
		t.Fatalf("Event: %v (the mail would be bounced 554)", err)
	}
	if !strings.Contains(ev.Text, "see attached") {
		t.Fatalf("text %q", ev.Text)
	}
}

// A text part in a charset go-message does not know (unknown-8bit is what
// mutt and Postfix write for undeclared 8-bit) is kept as it came.
func TestUnknownCharsetTextKept(t *testing.T) {
	raw := "From: alice@example.com\r\nMessage-ID: <cs@example.com>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain; charset=unknown-8bit\r\n\r\nthe build is red\r\n--b1--\r\n"
	ev, err := email.Event([]byte(raw), "alice@example.com")
	if err != nil {
		t.Fatalf("Event: %v", err)
	}
	if !strings.Contains(ev.Text, "the build is red") {
		t.Fatalf("text %q: the part in an unknown charset was dropped", ev.Text)
	}
}

// A bounce or an auto-reply (Auto-Submitted) reaches the agent but its
// sender is not made answerable: an agent that answers every mail would
// otherwise answer the bounce of its own answer (a loop).
func TestBounceIsNotAnswerable(t *testing.T) {
	raw := "From: Mail Delivery System <MAILER-DAEMON@mx.example.com>\r\nAuto-Submitted: auto-replied\r\n" +
		"Message-ID: <bounce-1@mx.example.com>\r\nSubject: Undelivered Mail Returned to Sender\r\n" +
		"Content-Type: text/plain\r\n\r\nyour mail could not be delivered\r\n"
	ev, err := email.Event([]byte(raw), "")
	if err == nil && !ev.NoReplyRoute {
		t.Fatalf("a bounce is dispatched as an answerable message from %s (route %q)", ev.From, ev.Address)
	}
}

// scriptRelay is a raw SMTP relay: reply(cmd) answers each command line;
// DATA's body is read to "." and answered 250. quitHangup closes the
// connection instead of answering QUIT.
type scriptRelay struct {
	mu         sync.Mutex
	mails      int
	quitHangup bool
	auth       string // the reply to AUTH
}

func (r *scriptRelay) serve(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.conn(c)
		}
	}()
	return ln.Addr().String()
}

func (r *scriptRelay) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	w := func(s string) { _, _ = c.Write([]byte(s + "\r\n")) }
	w("220 relay.test ESMTP")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"):
			w("250-relay.test")
			w("250 AUTH PLAIN")
		case strings.HasPrefix(cmd, "AUTH"):
			w(r.auth)
		case strings.HasPrefix(cmd, "DATA"):
			w("354 go on")
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			r.mu.Lock()
			r.mails++
			r.mu.Unlock()
			w("250 2.0.0 queued as 42")
		case strings.HasPrefix(cmd, "QUIT"):
			r.mu.Lock()
			hang := r.quitHangup
			r.mu.Unlock()
			if !hang {
				w("221 bye")
			}
			return
		default:
			w("250 ok")
		}
	}
}

func delivery() *tunnel.Delivery {
	return &tunnel.Delivery{Record: model.Record{RecordID: "cyrec:abc"}, Route: &model.Route{Address: "bob@example.com"},
		Msg: &message.Message{From: agentDID, To: []string{"did:email:bob@example.com"}, Content: message.Content{Content: "hi"}}}
}

// The relay took the mail (250 after DATA) and hung up instead of
// answering QUIT: the mail is sent, not failed (a failure would mail it
// again).
func TestQuitFailureAfterAcceptedMail(t *testing.T) {
	r := &scriptRelay{quitHangup: true}
	s := &email.Sender{Relay: r.serve(t), TLS: "none", From: mailbox}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Send(ctx, delivery())
	r.mu.Lock()
	n := r.mails
	r.mu.Unlock()
	if n == 1 && err != nil {
		t.Fatalf("the relay accepted the mail, yet Send failed (%v): it will be mailed again", err)
	}
}

// A wrong relay password (535) is the tunnel's configuration, not the
// message: retried, not DEAD at the first attempt.
func TestAuthFailureIsNotPermanent(t *testing.T) {
	r := &scriptRelay{auth: "535 5.7.8 authentication failed"}
	s := &email.Sender{Relay: r.serve(t), TLS: "none", From: mailbox, Username: "u", Password: "p"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Send(ctx, delivery())
	var te *tunnel.Error
	if !errors.As(err, &te) || !te.Retryable {
		t.Fatalf("Send with a refused password: %v (retryable=%v): the message goes DEAD", err, te != nil && te.Retryable)
	}
}

// A mail whose top-level Content-Transfer-Encoding go-message does not
// know (x-uuencode, "8-bit", ...) gets no reader from go-message: Event
// says so instead of panicking (go-smtp would answer 421, and the sender
// retry for days).
func TestUnknownTopLevelEncoding(t *testing.T) {
	raw := "From: a@x.test\r\nMessage-ID: <uu@x>\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nhello\r\n"
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Event panicked: %v", p)
		}
	}()
	if _, err := email.Event([]byte(raw), "a@x.test"); err != nil {
		t.Logf("Event: %v", err)
	}
}

// The envelope sender is a bounce address, not the author (an ESP's VERP
// or BATV tag, a mailing list): the From is the sender and the reply
// route.
func TestEnvelopeSenderIsNotTheAuthor(t *testing.T) {
	raw := "From: Alice <alice@example.com>\r\nMessage-ID: <verp@x>\r\n\r\nhello\r\n"
	ev, err := email.Event([]byte(raw), "bounces+1234-abcd-alice=example.com@em123.sendgrid.net")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Address != "alice@example.com" {
		t.Fatalf("reply route %q, sender %s", ev.Address, ev.From)
	}
}

// A mail without Message-ID gets a hash of its content, trace headers
// left out: the same mail arriving through the backup MX (another
// Received line) is one message.
func TestNoMessageIDIgnoresTraceHeaders(t *testing.T) {
	body := "From: a@x.test\r\nSubject: s\r\nDate: Tue, 14 Nov 2023 22:13:20 +0000\r\n\r\nhello\r\n"
	a, err1 := email.Event([]byte("Received: from mx1 by a; Tue, 14 Nov 2023 22:13:21 +0000\r\n"+body), "a@x.test")
	b, err2 := email.Event([]byte("Received: from mx2 by a; Tue, 14 Nov 2023 22:19:40 +0000\r\n"+body), "a@x.test")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if a.ID != b.ID {
		t.Fatalf("one mail, two ids: %s, %s", a.ID, b.ID)
	}
}

// A list's mail (List-Id, Precedence: bulk) is automatic: its sender is
// not made answerable. Line ends come as the message's (LF).
func TestListMailAndLineEnds(t *testing.T) {
	t.Parallel()
	for _, hdr := range []string{"List-Id: <news.example.com>\r\n", "Precedence: bulk\r\n"} {
		ev, err := email.Event([]byte("From: news@example.com\r\nMessage-ID: <n@x>\r\n"+hdr+"\r\nline one\r\nline two\r\n"), "news@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if !ev.NoReplyRoute {
			t.Fatalf("%q: a list's mail made its sender answerable", hdr)
		}
		if ev.Text != "line one\nline two\n" {
			t.Fatalf("text %q", ev.Text)
		}
	}
}
