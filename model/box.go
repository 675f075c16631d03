package model

import (
	"fmt"
	"strings"
)

// BoxKind names one of an owner's boxes.
type BoxKind string

// The box kinds of DESIGN.md.
const (
	Inbox        BoxKind = "INBOX"
	Outbox       BoxKind = "OUTBOX"
	GroupInbox   BoxKind = "GROUP_INBOX"
	TunnelOutbox BoxKind = "TUNNEL_OUTBOX"
	RequestBox   BoxKind = "REQUEST_BOX"
)

// BoxKinds lists every box kind, in a stable order.
var BoxKinds = []BoxKind{Inbox, Outbox, GroupInbox, TunnelOutbox, RequestBox}

// ConsumerFamily is the family of every durable consumer's box: the box of
// consumer NAME owned by a DID is "CONSUMER:NAME". Metrics and retention
// policies speak of the family, never of one consumer's box.
const ConsumerFamily BoxKind = "CONSUMER"

const consumerPrefix = string(ConsumerFamily) + ":"

// ParseBoxKind accepts a box kind in any letter case, and a consumer's box
// as "consumer:NAME" (the prefix in any case, the name as given).
func ParseBoxKind(s string) (BoxKind, error) {
	t := strings.TrimSpace(s)
	if len(t) > len(consumerPrefix) && strings.EqualFold(t[:len(consumerPrefix)], consumerPrefix) {
		name := t[len(consumerPrefix):]
		if err := ValidConsumerName(name); err != nil {
			return "", Invalid("box", err.(*Error).Message)
		}
		return ConsumerBox(name), nil
	}
	b := BoxKind(strings.ToUpper(t))
	for _, k := range BoxKinds {
		if b == k {
			return b, nil
		}
	}
	return "", Invalid("box", fmt.Sprintf("unknown box kind %q (want one of INBOX, OUTBOX, GROUP_INBOX, TUNNEL_OUTBOX, REQUEST_BOX, or consumer:NAME)", s))
}

// Valid reports whether b is a known box kind in its canonical spelling.
func (b BoxKind) Valid() bool {
	p, err := ParseBoxKind(string(b))
	return err == nil && p == b
}

// ConsumerBox is the box of the durable consumer called name.
func ConsumerBox(name string) BoxKind { return BoxKind(consumerPrefix + name) }

// ConsumerName returns the consumer's name if b is a consumer's box.
func (b BoxKind) ConsumerName() (string, bool) {
	if strings.HasPrefix(string(b), consumerPrefix) {
		return string(b)[len(consumerPrefix):], true
	}
	return "", false
}

// Family is b itself, or ConsumerFamily for a consumer's box.
func (b BoxKind) Family() BoxKind {
	if _, ok := b.ConsumerName(); ok {
		return ConsumerFamily
	}
	return b
}

// MaxConsumerName bounds a consumer's name.
const MaxConsumerName = 64

// ValidConsumerName checks a consumer name: 1 to 64 of ASCII letters,
// digits, '.', '_' and '-', starting with a letter or digit. Names go into
// URLs and box keys, so nothing needs escaping.
func ValidConsumerName(name string) error {
	if name == "" || len(name) > MaxConsumerName {
		return Invalid("name", fmt.Sprintf("consumer name must be 1 to %d characters", MaxConsumerName))
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return Invalid("name", fmt.Sprintf("consumer name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name))
		}
	}
	return nil
}

// IsOutbound reports whether the box is worked by a sender with the
// WAIT → SENDING → SENT cycle rather than read with UNREAD → READING → READED.
func (b BoxKind) IsOutbound() bool { return b == TunnelOutbox }

// HasConversations reports whether records in the box feed the owner's
// conversation list (the IM view of seed 004).
func (b BoxKind) HasConversations() bool {
	return b == Inbox || b == Outbox || b == GroupInbox
}
