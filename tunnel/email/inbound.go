// Package email is a tunnel for mail. Inbound, it is an SMTP server
// (go-smtp) for the mailboxes it is given, each an address of an agent:
// a mail to one is dispatched to its agent from did:email:<sender
// address>, and answered 250 only once it is stored (a sending server
// that gets no 250 tries again later). Outbound, messages agents post_send
// to such a DID are mailed to the address through an SMTP relay.
//
// It does not check SPF, DKIM or DMARC: put it behind the MX that does,
// or accept mail only from a relay you trust (--listen on a private
// address).
package email

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets mail comes in
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"

	msgmessage "github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/tunnel"
)

// Platform is the platform name in routes and in senders' DIDs.
const Platform = "email"

// maxText bounds the text kept of a mail; the rest is cut with a note
// (msgcenter's messages are 1 MiB by default, machine content included).
const maxText = 256 << 10

// Backend is the go-smtp backend: it takes mail for Mailboxes.
type Backend struct {
	In *tunnel.Inbound
	// Mailboxes maps an address (lower case) to the DID of the agent
	// that reads it. Mail to any other address is refused (550).
	Mailboxes map[string]string
	Logger    *slog.Logger
}

// NewSession starts an SMTP session.
func (b *Backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{b: b}, nil }

type session struct {
	b    *Backend
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = strings.ToLower(strings.TrimSpace(from))
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	did, ok := s.b.Mailboxes[strings.ToLower(strings.TrimSpace(to))]
	if !ok {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox here"}
	}
	s.to = append(s.to, did)
	return nil
}

// Data reads one mail and dispatches it to the recipients accepted.
func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ev, err := Event(raw, s.from)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "cannot read this mail: " + err.Error()}
	}
	ev.To = s.to
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.b.In.Dispatch(ctx, ev); err != nil {
		if status, _, _, msg, refused := tunnel.Refusal(err); refused {
			if status == http.StatusConflict { // the same mail again, after all
				return nil
			}
			return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "refused: " + msg}
		}
		s.logger().Error("email: dispatch failed; the sender will retry", "message_id", ev.ID, "err", err)
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "not stored; try again later"}
	}
	return nil
}

func (s *session) logger() *slog.Logger {
	if s.b.Logger != nil {
		return s.b.Logger
	}
	return slog.Default()
}

// Attachment describes a part of a mail that is not its text; the
// contents are not kept.
type Attachment struct {
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
}

// Machine is the machine content of a mail's message.
type Machine struct {
	Email struct {
		MessageID   string       `json:"message_id"`
		From        string       `json:"from"`
		Subject     string       `json:"subject,omitempty"`
		InReplyTo   []string     `json:"in_reply_to,omitempty"`
		Attachments []Attachment `json:"attachments,omitempty"`
		HTMLOnly    bool         `json:"html_only,omitempty"`
	} `json:"email"`
}

// Event reads a mail: its Message-ID is the event's id (a mail without one
// gets the hash of its bytes), the envelope sender (else From) the sender,
// the Subject its title, the first text/plain part its text (an HTML-only
// mail's HTML, marked), and the other parts are listed in machine content.
func Event(raw []byte, envelopeFrom string) (*tunnel.Event, error) {
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
		return nil, err
	}
	h := mr.Header
	var m Machine
	m.Email.MessageID, _ = h.MessageID()
	if m.Email.MessageID == "" {
		m.Email.MessageID = "sha256:" + strings.TrimPrefix(msgmessage.IDOf(raw), "cymsg:")
	}
	from := envelopeFrom
	if addrs, err := h.AddressList("From"); err == nil && len(addrs) > 0 {
		m.Email.From = addrs[0].Address
		if from == "" {
			from = strings.ToLower(addrs[0].Address)
		}
	}
	if from == "" {
		return nil, errors.New("no sender (neither MAIL FROM nor From)")
	}
	m.Email.Subject, _ = h.Subject()
	m.Email.InReplyTo, _ = h.MsgIDList("In-Reply-To")
	var text, html string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if message.IsUnknownCharset(err) || message.IsUnknownEncoding(err) {
				continue
			}
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(p.Body, 64<<20))
		if err != nil {
			return nil, err
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := ph.ContentType()
			switch {
			case ct == "text/plain" && text == "":
				text = string(body)
				continue
			case ct == "text/html" && html == "":
				html = string(body)
				continue
			}
			m.Email.Attachments = append(m.Email.Attachments, Attachment{ContentType: ct, Size: len(body)})
		case *mail.AttachmentHeader:
			ct, _, _ := ph.ContentType()
			name, _ := ph.Filename()
			m.Email.Attachments = append(m.Email.Attachments, Attachment{Filename: name, ContentType: ct, Size: len(body)})
		}
	}
	format := ""
	if text == "" && html != "" {
		text, format, m.Email.HTMLOnly = html, "text/html", true
	}
	if len(text) > maxText {
		text = strings.ToValidUTF8(text[:maxText], "") + "\n[… cut: the mail's text is longer]"
	}
	machine, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ev := &tunnel.Event{ID: m.Email.MessageID, From: tunnel.SenderDID(Platform, from), Address: from,
		Title: m.Email.Subject, Text: strings.ToValidUTF8(text, "\uFFFD"), Format: format, Machine: machine}
	if d, err := h.Date(); err == nil && !d.IsZero() && d.Unix() > 0 {
		ev.At = d
	}
	return ev, nil
}
