package model

import (
	"fmt"
	"strings"
)

// State is the state of one record.
type State string

// Record states. Inbox-style boxes use UNREAD → READING → READED; the tunnel
// outbox uses WAIT → SENDING → SENT with FAILED/DEAD; ARCHIVED and DELETED
// apply to every box.
const (
	Unread   State = "UNREAD"
	Reading  State = "READING"
	Readed   State = "READED"
	Wait     State = "WAIT"
	Sending  State = "SENDING"
	Sent     State = "SENT"
	Failed   State = "FAILED"
	Dead     State = "DEAD"
	Archived State = "ARCHIVED"
	Deleted  State = "DELETED"
)

// States lists every state.
var States = []State{Unread, Reading, Readed, Wait, Sending, Sent, Failed, Dead, Archived, Deleted}

// ParseState accepts a state name in any letter case.
func ParseState(s string) (State, error) {
	st := State(strings.ToUpper(strings.TrimSpace(s)))
	for _, k := range States {
		if st == k {
			return st, nil
		}
	}
	return "", Invalid("state", fmt.Sprintf("unknown state %q", s))
}

// ParseStates parses a comma separated list of states; empty means none.
func ParseStates(field, s string) ([]State, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []State
	for _, p := range strings.Split(s, ",") {
		st, err := ParseState(p)
		if err != nil {
			return nil, Invalid(field, err.(*Error).Message)
		}
		out = append(out, st)
	}
	return out, nil
}

// IsUnread reports whether a record in state s counts towards a
// conversation's unread count: it has not been read yet.
func (s State) IsUnread() bool { return s == Unread || s == Reading }

// UnreadDelta is how a move from one state to another changes a
// conversation's unread count: -1, 0 or +1. Every driver keeps the count
// with it, so the rule lives here once.
func UnreadDelta(from, to State) int {
	d := 0
	if to.IsUnread() {
		d++
	}
	if from.IsUnread() {
		d--
	}
	return d
}

// IsTerminal reports whether a record in state s is finished with: such
// records are subject to retention and never claimed again without a redrive.
func (s State) IsTerminal() bool {
	switch s {
	case Readed, Sent, Dead, Archived, Deleted:
		return true
	}
	return false
}

// InitialState is the state a record is created in for the box kind.
func InitialState(b BoxKind) State {
	switch b {
	case TunnelOutbox:
		return Wait
	case Outbox:
		return Sent
	default:
		return Unread
	}
}

// ClaimableState is the state get_next takes records from in box b.
func ClaimableState(b BoxKind) State {
	if b.IsOutbound() {
		return Wait
	}
	return Unread
}

// HeldState is the state a claimed (leased) record of box b is in.
func HeldState(b BoxKind) State {
	if b.IsOutbound() {
		return Sending
	}
	return Reading
}

// DoneState is the state an acknowledged record of box b moves to.
func DoneState(b BoxKind) State {
	if b.IsOutbound() {
		return Sent
	}
	return Readed
}
