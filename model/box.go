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

// ParseBoxKind accepts a box kind in any letter case.
func ParseBoxKind(s string) (BoxKind, error) {
	b := BoxKind(strings.ToUpper(strings.TrimSpace(s)))
	for _, k := range BoxKinds {
		if b == k {
			return b, nil
		}
	}
	return "", Invalid("box", fmt.Sprintf("unknown box kind %q (want one of INBOX, OUTBOX, GROUP_INBOX, TUNNEL_OUTBOX, REQUEST_BOX)", s))
}

// Valid reports whether b is a known box kind.
func (b BoxKind) Valid() bool {
	_, err := ParseBoxKind(string(b))
	return err == nil && string(b) == strings.ToUpper(string(b))
}

// IsOutbound reports whether the box is worked by a sender with the
// WAIT → SENDING → SENT cycle rather than read with UNREAD → READING → READED.
func (b BoxKind) IsOutbound() bool { return b == TunnelOutbox }

// HasConversations reports whether records in the box feed the owner's
// conversation list (the IM view of seed 004).
func (b BoxKind) HasConversations() bool {
	return b == Inbox || b == Outbox || b == GroupInbox
}
