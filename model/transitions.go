package model

import (
	"fmt"
	"strings"
)

// transitions is the one table of allowed state changes, per box family.
// Everything that changes a record's state (claims, acks, failures, lease
// expiry, redrive, user updates) is checked against it.
var transitions = map[family]map[State][]State{
	// INBOX, GROUP_INBOX, REQUEST_BOX and consumers' boxes.
	inboxFamily: {
		Unread:   {Reading, Readed, Dead, Archived, Deleted},
		Reading:  {Readed, Unread, Dead, Archived, Deleted},
		Readed:   {Unread, Archived, Deleted},
		Dead:     {Unread, Archived, Deleted},
		Archived: {Unread, Readed, Deleted},
		Deleted:  {},
	},
	// The author's OUTBOX copy: sent, and nothing to read or claim, so
	// archiving it and back is all it can do (it was in the inbox family,
	// where an archived copy could become UNREAD and then be claimed).
	outboxFamily: {
		Sent:     {Archived, Deleted},
		Archived: {Sent, Deleted},
		Deleted:  {},
		// Ways out, and no way in, for copies the inbox family's table
		// let into these states before.
		Unread:  {Sent, Archived, Deleted},
		Reading: {Sent, Archived, Deleted},
		Readed:  {Sent, Archived, Deleted},
		Dead:    {Sent, Archived, Deleted},
	},
	// TUNNEL_OUTBOX.
	outboundFamily: {
		Wait:     {Sending, Dead, Archived, Deleted},
		Sending:  {Sent, Wait, Failed, Dead, Archived, Deleted},
		Failed:   {Wait, Dead, Archived, Deleted},
		Sent:     {Archived, Deleted},
		Dead:     {Wait, Archived, Deleted},
		Archived: {Wait, Deleted},
		Deleted:  {},
	},
}

type family int

const (
	inboxFamily family = iota
	outboxFamily
	outboundFamily
)

func familyOf(b BoxKind) family {
	switch {
	case b.IsOutbound():
		return outboundFamily
	case b == Outbox:
		return outboxFamily
	}
	return inboxFamily
}

// CanTransition reports whether a record of box b may move from one state
// to another.
func CanTransition(b BoxKind, from, to State) bool {
	for _, s := range transitions[familyOf(b)][from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition returns an ErrInvalidTransition error naming the states
// when the move is not in the table.
func CheckTransition(b BoxKind, from, to State) error {
	if CanTransition(b, from, to) {
		return nil
	}
	return &Error{Kind: ErrInvalidTransition, Field: "new_state",
		Message: fmt.Sprintf("%s %s record cannot move from %s to %s", article(string(b)), b, from, to)}
}

// article is "a" or "an" before word, by its first letter.
func article(word string) string {
	if word != "" && strings.ContainsRune("AEIOUaeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// StatesOf lists the states a record of box b can ever be in.
func StatesOf(b BoxKind) []State {
	var out []State
	for _, s := range States {
		if _, ok := transitions[familyOf(b)][s]; ok {
			out = append(out, s)
		}
	}
	return out
}
