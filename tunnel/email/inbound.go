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
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // decode the charsets mail comes in
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-smtp"

	msgmessage "github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/tunnel"
)

// Platform is the platform name in routes and in senders' DIDs.
const Platform = "email"

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
	if s.from == "" {
		s.from = nullSender // MAIL FROM:<>, a bounce
	}
	return nil
}

// nullSender stands for the empty envelope sender of bounces.
const nullSender = "<>"

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
	// One mail delivered in several transactions (a queue per recipient,
	// the rest after MaxRecipients) is one message per recipient set: the
	// recipients are part of its id.
	rcpt := slices.Clone(s.to)
	slices.Sort(rcpt)
	ev.ID += " to " + strings.Join(rcpt, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.b.In.Dispatch(ctx, ev); err != nil {
		if status, _, _, msg, refused := tunnel.Refusal(err); refused {
			if status == http.StatusConflict {
				// Its Message-ID was stored with other content: a sender
				// that reuses Message-IDs. The first mail stands.
				s.logger().Warn("email: a Message-ID came again with other content; keeping the first", "message_id", ev.ID, "err", err)
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
	Size        int64  `json:"size"`
}

// Machine is the machine content of a mail's message.
type Machine struct {
	Email struct {
		MessageID   string       `json:"message_id"`
		From        string       `json:"from"`
		ReturnPath  string       `json:"return_path,omitempty"`
		Subject     string       `json:"subject,omitempty"`
		InReplyTo   []string     `json:"in_reply_to,omitempty"`
		Attachments []Attachment `json:"attachments,omitempty"`
		// MoreAttachments counts the parts not listed (past maxListed).
		MoreAttachments int  `json:"more_attachments,omitempty"`
		HTMLOnly        bool `json:"html_only,omitempty"`
		// Automatic marks a bounce or an auto-reply: it reaches the agent,
		// but its sender is not made answerable (that is how mail loops).
		Automatic bool `json:"automatic,omitempty"`
	} `json:"email"`
}

// Bounds on what a mail may put into its message, so that it fits
// msgcenter's (1 MiB by default) with room: text and subject are measured
// as JSON escapes them.
const (
	maxTextJSON    = 256 << 10
	maxSubject     = 998
	maxListed      = 50
	maxInReplyTo   = 10
	maxHeaderValue = 998
	// maxThreadID is the longest Message-ID kept as a route's chat (routes
	// keep 512 bytes).
	maxThreadID = 500
)

// Event reads a mail (envelopeFrom is the envelope sender, "<>" for a
// bounce's, "" when unknown): its Message-ID is the event's id (a mail without one
// gets a hash of its content, trace headers left out), its From the
// sender (the envelope sender only when there is no From: that is a
// bounce address), Reply-To (else From) where answers go, the Subject its
// title, the first text/plain part its text (an HTML-only mail's HTML,
// marked), and its other parts are listed in machine content. A bounce,
// an auto-reply or a list's mail is marked automatic and not made
// answerable.
func Event(raw []byte, envelopeFrom string) (ev *tunnel.Event, err error) {
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if mr == nil { // go-message gives no reader for an encoding it does not know
		if err == nil {
			err = errors.New("unreadable mail")
		}
		return nil, err
	}
	h := mr.Header
	var m Machine
	m.Email.MessageID, _ = h.MessageID()
	bounce := envelopeFrom == nullSender
	if bounce {
		envelopeFrom = ""
	}
	m.Email.ReturnPath = envelopeFrom
	author := ""
	if addrs, err := h.AddressList("From"); err == nil && len(addrs) > 0 {
		m.Email.From = addrs[0].Address
		author = strings.ToLower(addrs[0].Address)
	}
	if author == "" {
		author = envelopeFrom
	}
	if author == "" {
		return nil, errors.New("no sender (neither From nor MAIL FROM)")
	}
	replyTo := author
	if addrs, err := h.AddressList("Reply-To"); err == nil && len(addrs) > 0 && addrs[0].Address != "" {
		replyTo = strings.ToLower(addrs[0].Address)
	}
	m.Email.Subject, _ = h.Subject()
	m.Email.Subject = cutRunes(m.Email.Subject, maxSubject)
	if ids, _ := h.MsgIDList("In-Reply-To"); len(ids) > 0 {
		m.Email.InReplyTo = ids[:min(len(ids), maxInReplyTo)]
	}
	ct, _, _ := h.ContentType()
	auto := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted")))
	prec := strings.ToLower(strings.TrimSpace(h.Get("Precedence")))
	m.Email.Automatic = bounce || strings.TrimSpace(h.Get("Return-Path")) == nullSender ||
		(auto != "" && auto != "no") || prec == "bulk" || prec == "list" || prec == "junk" || h.Get("List-Id") != "" || ct == "multipart/report" ||
		strings.HasPrefix(strings.ToLower(author), "mailer-daemon@") || strings.HasPrefix(strings.ToLower(author), "postmaster@")
	text, html := readParts(mr, &m)
	format := ""
	if text == "" && html != "" {
		text, format, m.Email.HTMLOnly = html, "text/html", true
	}
	text = strings.ReplaceAll(text, "\r\n", "\n") // mail's line ends are CRLF; messages' are LF
	text = cutJSON(strings.ToValidUTF8(text, "\uFFFD"), maxTextJSON)
	if m.Email.MessageID == "" {
		m.Email.MessageID = "sha256:" + strings.TrimPrefix(msgmessage.IDOf([]byte(strings.Join([]string{
			author, h.Get("Date"), h.Get("Subject"), h.Get("To"), text}, "\x00"))), "cymsg:")
	}
	m.Email.MessageID = cutRunes(m.Email.MessageID, maxHeaderValue)
	machine, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	ev = &tunnel.Event{ID: m.Email.MessageID, From: SenderDID(author), Address: replyTo,
		NoReplyRoute: m.Email.Automatic, Title: m.Email.Subject, Text: text, Format: format, Machine: machine}
	if len(m.Email.MessageID) <= maxThreadID && !strings.HasPrefix(m.Email.MessageID, "sha256:") {
		// The route's chat is the mail an answer replies to (In-Reply-To),
		// so the sender's mail program threads the answer under it.
		ev.ChatID = m.Email.MessageID
	}
	if d, err := h.Date(); err == nil && d.Unix() > 0 && d.Year() < 10000 {
		ev.At = d
	}
	return ev, nil
}

// readParts walks a mail's parts: the first text/plain and text/html are
// its text, the others are listed. A damaged part ends the walk (what was
// read stands); a part in a charset go-message does not know is read as
// it is.
func readParts(mr *mail.Reader, m *Machine) (text, html string) {
	for {
		p, err := mr.NextPart()
		if err == io.EOF || p == nil {
			return text, html
		}
		if err != nil && !message.IsUnknownCharset(err) {
			return text, html
		}
		var ct, name string
		inline := false
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ = ph.ContentType()
			inline = true
		case *mail.AttachmentHeader:
			ct, _, _ = ph.ContentType()
			name, _ = ph.Filename()
		}
		if inline && ((ct == "text/plain" && text == "") || (ct == "text/html" && html == "")) {
			body, _ := io.ReadAll(io.LimitReader(p.Body, 4*maxTextJSON))
			if ct == "text/plain" {
				text = string(body)
			} else {
				html = string(body)
			}
			continue
		}
		n, _ := io.Copy(io.Discard, p.Body) // a part not kept: its size, whatever its encoding's damage
		if len(m.Email.Attachments) < maxListed {
			m.Email.Attachments = append(m.Email.Attachments, Attachment{Filename: cutRunes(name, 255), ContentType: ct, Size: n})
		} else {
			m.Email.MoreAttachments++
		}
	}
}

// SenderDID is the DID of a mail address: did:email:<address>, the
// address's characters a DID cannot hold escaped.
func SenderDID(addr string) string {
	return tunnel.EscapedDID(Platform, strings.ToLower(addr), func(r rune) bool { return r > ' ' && r < 0x7f })
}

// cutRunes keeps at most n runes of s.
func cutRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// cutJSON keeps as much of s as JSON-encodes (and canonicalizes) to at
// most n bytes, with a note when it cut.
func cutJSON(s string, n int) string {
	size := 0
	for i, r := range s {
		switch {
		case r == '<' || r == '>' || r == '&' || r < 0x20 || r == 0x2028 || r == 0x2029:
			size += 6
		case r == '"' || r == '\\':
			size += 2
		default:
			size += utf8.RuneLen(r)
		}
		if size > n {
			return s[:i] + "\n[… cut: the mail's text is longer]"
		}
	}
	return s
}
