// Package message defines the immutable message object (MsgObject) and its
// content-addressed id: "cymsg:" + hex SHA-256 of the RFC 8785 (JCS)
// canonical JSON. Same content, same id, stored once.
package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/msgcenter/msgcenter/model"
)

// Message kinds.
const (
	KindChat      = "chat"
	KindGroupMsg  = "group_msg"
	KindDeliver   = "deliver"
	KindNotify    = "notify"
	KindEvent     = "event"
	KindOperation = "operation"
)

// Kinds lists the known message kinds.
var Kinds = []string{KindChat, KindGroupMsg, KindDeliver, KindNotify, KindEvent, KindOperation}

// IDPrefix starts every message id.
const IDPrefix = "cymsg:"

// MaxDIDBytes bounds every DID in a message.
const MaxDIDBytes = 256

// MaxRecipients bounds the msg.to of a message an agent or a tunnel sends
// (core checks it when the message is sent, not when a stored one is read
// again): more go through a group, whose members an admin sets, rather than
// any caller writing a record per name it lists (60,000 fit in 1 MiB).
const MaxRecipients = 1_000

// DefaultMaxBytes is the default bound on a message's canonical size.
const DefaultMaxBytes = 1 << 20

// Message is a MsgObject. Free-form parts (content.machine, refs, meta) are
// kept as raw JSON so that canonicalization sees exactly what the client
// sent, numbers included.
type Message struct {
	From        string          `json:"from"`
	To          []string        `json:"to,omitempty"`
	Source      string          `json:"source,omitempty"`
	Kind        string          `json:"kind,omitempty"`
	Thread      *Thread         `json:"thread,omitempty"`
	Workspace   string          `json:"workspace,omitempty"`
	Mentions    []string        `json:"mentions,omitempty"`
	CreatedAtMS int64           `json:"created_at_ms,omitempty"`
	ExpiresAtMS int64           `json:"expires_at_ms,omitempty"`
	Nonce       string          `json:"nonce,omitempty"`
	Content     Content         `json:"content"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// Thread places a message in a conversation.
type Thread struct {
	Topic         string `json:"topic,omitempty"`
	ReplyTo       string `json:"reply_to,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
}

// Content is the payload.
type Content struct {
	Title   string            `json:"title,omitempty"`
	Format  string            `json:"format,omitempty"`
	Content string            `json:"content,omitempty"`
	Machine json.RawMessage   `json:"machine,omitempty"`
	Refs    []json.RawMessage `json:"refs,omitempty"`
}

// Stamp makes m a new message or a repeatable one. The id is a hash of
// the content: stamping the time keeps two identical texts sent on
// purpose from collapsing into one message. A send with an idempotency key
// is one its caller may repeat: the key stands in for the time, so a
// retry is the same message (the server then stores nothing new) and
// another key another message.
func (m *Message) Stamp(idempotencyKey string, now time.Time) {
	if idempotencyKey != "" {
		m.Nonce = "idempotency-key:" + idempotencyKey
		return
	}
	m.CreatedAtMS = now.UnixMilli()
}

// IDOf returns the id of a canonical JSON encoding.
func IDOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return IDPrefix + hex.EncodeToString(sum[:])
}

// ID computes the message id.
func (m *Message) ID() (string, error) {
	c, err := m.Canonical()
	if err != nil {
		return "", err
	}
	return IDOf(c), nil
}

// LogicalSender is the author: source for group messages, else from.
func (m *Message) LogicalSender() string {
	if m.Source != "" {
		return m.Source
	}
	return m.From
}

// Decode parses a message strictly: unknown fields and trailing data are
// errors, so a typo never silently changes a message's id.
func Decode(data []byte) (*Message, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Message
	if err := dec.Decode(&m); err != nil {
		return nil, model.Invalid("msg", "malformed message: "+err.Error())
	}
	// Not dec.More(), which answers false for a stray '}' or ']'.
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, model.Invalid("msg", "trailing data after message")
	}
	return &m, nil
}

// Validate checks the message's structure. fromIsGroup says whether the
// sender is a known group, which is the one case where "to" may be empty.
// It returns the canonical encoding so callers need not compute it twice.
func (m *Message) Validate(maxBytes int, fromIsGroup bool) ([]byte, error) {
	if err := CheckDID("msg.from", m.From, true); err != nil {
		return nil, err
	}
	if err := CheckDID("msg.source", m.Source, false); err != nil {
		return nil, err
	}
	if len(m.To) == 0 && !fromIsGroup {
		return nil, model.Invalid("msg.to", "at least one recipient is required unless msg.from is a group")
	}
	for i, d := range m.To {
		if err := CheckDID(fmt.Sprintf("msg.to[%d]", i), d, true); err != nil {
			return nil, err
		}
	}
	for i, d := range m.Mentions {
		if err := CheckDID(fmt.Sprintf("msg.mentions[%d]", i), d, true); err != nil {
			return nil, err
		}
	}
	if err := CheckDID("msg.workspace", m.Workspace, false); err != nil {
		return nil, err
	}
	if m.Thread != nil {
		if err := checkTopic(m.Thread.Topic); err != nil {
			return nil, err
		}
	}
	if m.Kind != "" && !knownKind(m.Kind) {
		return nil, model.Invalid("msg.kind", fmt.Sprintf("unknown kind %q (want one of %s)", m.Kind, strings.Join(Kinds, ", ")))
	}
	if m.CreatedAtMS < 0 {
		return nil, model.Invalid("msg.created_at_ms", "must not be negative")
	}
	if m.ExpiresAtMS < 0 {
		return nil, model.Invalid("msg.expires_at_ms", "must not be negative")
	}
	if m.ExpiresAtMS != 0 && m.CreatedAtMS != 0 && m.ExpiresAtMS < m.CreatedAtMS {
		return nil, model.Invalid("msg.expires_at_ms", "must not be before created_at_ms")
	}
	c, err := m.Canonical()
	if err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(c) > maxBytes {
		return nil, &model.Error{Kind: model.ErrTooLarge, Field: "msg",
			Message: fmt.Sprintf("message is %d bytes, the limit is %d", len(c), maxBytes)}
	}
	return c, nil
}

// MaxTopicBytes bounds thread.topic: it is part of the thread key stored
// with every record of the message and keyed in its readers' conversations.
const MaxTopicBytes = 512

func checkTopic(t string) error {
	if len(t) > MaxTopicBytes {
		return model.Invalid("msg.thread.topic", fmt.Sprintf("is %d bytes, at most %d allowed", len(t), MaxTopicBytes))
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return model.Invalid("msg.thread.topic", "must not contain control characters")
		}
	}
	return nil
}

func knownKind(k string) bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// CheckDID validates one DID: at most 256 bytes, valid UTF-8, no spaces or
// control characters.
func CheckDID(field, did string, required bool) error {
	if did == "" {
		if required {
			return model.Invalid(field, "is required")
		}
		return nil
	}
	if len(did) > MaxDIDBytes {
		return model.Invalid(field, fmt.Sprintf("is %d bytes, at most %d allowed", len(did), MaxDIDBytes))
	}
	if !utf8.ValidString(did) {
		return model.Invalid(field, "is not valid UTF-8")
	}
	for _, r := range did {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return model.Invalid(field, "must not contain spaces or control characters")
		}
		if unicode.Is(unicode.Cf, r) {
			// Invisible or reordering (a zero-width space, a right-to-left
			// override): a DID that shows as another one.
			return model.Invalid(field, fmt.Sprintf("must not contain invisible format characters (U+%04X)", r))
		}
	}
	return nil
}
