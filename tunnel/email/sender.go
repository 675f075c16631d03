package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"slices"
	"strings"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/tunnel"
)

// Sender mails each delivery to its route's address through an SMTP relay.
type Sender struct {
	// Relay is the relay's host:port.
	Relay string
	// TLS is "starttls" (default), "tls" (implicit, port 465) or "none".
	TLS string
	// Username and Password, when set, authenticate (PLAIN).
	Username, Password string
	// From is the sender's address, unless the message's author has a
	// mailbox of its own (FromOf).
	From string
	// FromOf maps an author's DID to its mailbox's address.
	FromOf map[string]string
	// TLSConfig is used for STARTTLS and implicit TLS (default: verify the
	// relay's certificate for its host name).
	TLSConfig *tls.Config
	// HelloName is this host's name in EHLO (default "localhost", which
	// some relays refuse; with STARTTLS the EHLO before TLS says it).
	HelloName string
	// Answered, when set, reads the message an answer replies to (its
	// thread.reply_to): a mail that came in is answered as "Re:" its
	// subject, in reply to exactly it. The tunnel's client does
	// (client.GetMessageObject): msgcenter lets a tunnel read what came
	// in through it. Without it, or when the lookup fails, an answer
	// replies to the person's last mail (the route's chat_id).
	Answered func(ctx context.Context, msgID string) (*message.Message, error)
}

// Send mails one delivery. Its Message-ID follows from the record, the
// same for every attempt, so a receiver can tell a retried mail.
func (s *Sender) Send(ctx context.Context, d *tunnel.Delivery) (string, error) {
	to, err := mail.ParseAddress(d.Route.Address)
	if err != nil {
		return "", tunnel.Permanent("bad_address", fmt.Sprintf("route address %q is not a mail address: %v", d.Route.Address, err))
	}
	from := s.From
	if a, ok := s.FromOf[d.Msg.LogicalSender()]; ok {
		from = a
	}
	ans, err := s.answered(ctx, d)
	if err != nil {
		return "", tunnel.Retry("lookup", fmt.Sprintf("reading the mail this answers: %v", err), 0)
	}
	body, id, err := s.compose(d, from, to.Address, ans)
	if err != nil {
		return "", tunnel.Permanent("bad_message", err.Error())
	}
	if err := s.deliver(ctx, from, to.Address, body); err != nil {
		return "", classify(err)
	}
	return id, nil
}

// answered is the mail d answers, when d names one (thread.reply_to) that
// came in as a mail from d's recipient: another person's subject and
// Message-ID are not the recipient's to see. An error is one worth
// retrying (msgcenter away); a message that is not there, or not this
// tunnel's to read, is no mail to thread under.
func (s *Sender) answered(ctx context.Context, d *tunnel.Delivery) (*Machine, error) {
	if s.Answered == nil || d.Msg.Thread == nil || d.Msg.Thread.ReplyTo == "" {
		return nil, nil
	}
	m, err := s.Answered(ctx, d.Msg.Thread.ReplyTo)
	var api *client.APIError
	if errors.As(err, &api) && api.Status < 500 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if m == nil || len(m.Content.Machine) == 0 || m.LogicalSender() != d.Route.TargetDID {
		return nil, nil
	}
	var mm Machine
	if json.Unmarshal(m.Content.Machine, &mm) != nil || mm.Email.MessageID == "" {
		return nil, nil
	}
	return &mm, nil
}

// compose writes the mail: plain text, UTF-8, the title as subject (else
// "Re:" the subject of the mail answered, else the text's first line).
func (s *Sender) compose(d *tunnel.Delivery, from, to string, ans *Machine) ([]byte, string, error) {
	var h gomail.Header
	h.SetDate(time.Now())
	h.SetAddressList("From", []*gomail.Address{{Address: from}})
	h.SetAddressList("To", []*gomail.Address{{Address: to}})
	subject := d.Msg.Content.Title
	if subject == "" && ans != nil && strings.TrimSpace(ans.Email.Subject) != "" {
		subject = ans.Email.Subject
		if len(subject) < 3 || !strings.EqualFold(subject[:3], "re:") {
			subject = "Re: " + subject
		}
	}
	if subject == "" {
		subject, _, _ = strings.Cut(strings.TrimSpace(d.Msg.Content.Content), "\n")
		subject = strings.TrimSpace(subject)
		if r := []rune(subject); len(r) > 78 {
			subject = string(r[:77]) + "…"
		}
	}
	h.SetSubject(subject)
	host := "msgcenter"
	if _, dom, ok := strings.Cut(from, "@"); ok {
		host = dom
	}
	id := strings.TrimPrefix(d.Record.RecordID, "cyrec:") + "@" + host
	h.SetMessageID(id)
	switch {
	case ans != nil && !strings.HasPrefix(ans.Email.MessageID, "sha256:"):
		// The mail answered, and the thread it continued.
		h.SetMsgIDList("In-Reply-To", []string{ans.Email.MessageID})
		h.SetMsgIDList("References", append(slices.Clone(ans.Email.InReplyTo), ans.Email.MessageID))
	case d.Route.ChatID != "":
		// The mail the person last wrote (see Event): answer in its thread.
		h.SetMsgIDList("In-Reply-To", []string{d.Route.ChatID})
		h.SetMsgIDList("References", []string{d.Route.ChatID})
	}
	// An agent's answer is an automatic reply (RFC 3834): vacation
	// responders and the like do not answer it, which keeps two machines
	// from mailing each other for ever.
	h.Set("Auto-Submitted", "auto-replied")
	h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	var buf bytes.Buffer
	w, err := gomail.CreateSingleInlineWriter(&buf, h)
	if err != nil {
		return nil, "", err
	}
	body := d.Msg.Content.Content
	if hd := d.Heading(); hd != "" {
		body = hd + "\n\n" + body
	}
	if _, err := w.Write([]byte(body)); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), "<" + id + ">", nil
}

// deliver runs one SMTP transaction, bounded by ctx.
func (s *Sender) deliver(ctx context.Context, from, to string, body []byte) error {
	host, _, err := net.SplitHostPort(s.Relay)
	if err != nil {
		return tunnel.Permanent("bad_relay", err.Error())
	}
	cfg := s.TLSConfig
	if cfg == nil {
		cfg = &tls.Config{ServerName: host}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Relay)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	var c *smtp.Client
	switch s.TLS {
	case "tls", "none":
		if s.TLS == "tls" {
			c = smtp.NewClient(tls.Client(conn, cfg))
		} else {
			c = smtp.NewClient(conn)
		}
		if s.HelloName != "" {
			if err := c.Hello(s.HelloName); err != nil {
				c.Close()
				return err
			}
		}
	default:
		// go-smtp v0.25 says EHLO localhost before STARTTLS (it has no
		// other way to start TLS); the EHLO that counts, after it, says
		// HelloName.
		if c, err = smtp.NewClientStartTLS(conn, cfg); err != nil {
			conn.Close()
			return fmt.Errorf("STARTTLS with the relay: %w", err)
		}
		if s.HelloName != "" {
			if err := c.Hello(s.HelloName); err != nil {
				c.Close()
				return err
			}
		}
	}
	defer c.Close()
	if s.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", s.Username, s.Password)); err != nil {
			return err
		}
	}
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	if err := c.Rcpt(to, nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	// The relay took the mail (its reply to DATA): what QUIT says no
	// longer matters, and a failure now would send the mail again.
	_ = c.Quit()
	return nil
}

// classify reads an SMTP reply: 4xx is retried, 5xx is not; anything else
// (the network, TLS) is retried.
func classify(err error) error {
	var e *tunnel.Error
	if errors.As(err, &e) {
		return err
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		code := fmt.Sprintf("smtp_%d", se.Code)
		// Refused credentials or a sender the login may not use is the
		// tunnel's configuration, not the message: retried until fixed.
		auth := se.Code == 530 || se.Code == 534 || se.Code == 535 || se.Code == 538 ||
			(se.EnhancedCode[0] == 5 && se.EnhancedCode[1] == 7 && (se.EnhancedCode[2] == 8 || se.EnhancedCode[2] == 0))
		if se.Code >= 500 && !auth {
			return tunnel.Permanent(code, se.Message)
		}
		return tunnel.Retry(code, se.Message, 0)
	}
	return tunnel.Retry("send_error", err.Error(), 0)
}
