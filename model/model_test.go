package model

import (
	"errors"
	"strings"
	"testing"
)

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		box      BoxKind
		from, to State
		ok       bool
	}{
		{Inbox, Unread, Reading, true},
		{Inbox, Reading, Readed, true},
		{Inbox, Reading, Unread, true},
		{Inbox, Reading, Dead, true},
		{Inbox, Dead, Unread, true},
		{Inbox, Unread, Sending, false},
		{Inbox, Readed, Reading, false},
		{Inbox, Deleted, Unread, false},
		{GroupInbox, Unread, Readed, true},
		{TunnelOutbox, Wait, Sending, true},
		{TunnelOutbox, Sending, Sent, true},
		{TunnelOutbox, Sending, Wait, true},
		{TunnelOutbox, Sending, Dead, true},
		{TunnelOutbox, Failed, Wait, true},
		{TunnelOutbox, Dead, Wait, true},
		{TunnelOutbox, Wait, Sent, false}, // must be claimed first
		{TunnelOutbox, Sent, Wait, false},
		{TunnelOutbox, Unread, Reading, false},
		{Outbox, Sent, Archived, true},
		{Outbox, Sent, Unread, false},
		// An archived OUTBOX copy goes back to SENT, never to a state it
		// could be claimed or counted unread in.
		{Outbox, Archived, Sent, true},
		{Outbox, Archived, Unread, false},
		{Outbox, Archived, Readed, false},
		{Inbox, Archived, Sent, false},
		{Outbox, Unread, Archived, true}, // a way out for a copy an earlier table let in
		{Outbox, Sent, Reading, false},
	}
	for _, tc := range cases {
		if got := CanTransition(tc.box, tc.from, tc.to); got != tc.ok {
			t.Errorf("%s %s→%s = %v, want %v", tc.box, tc.from, tc.to, got, tc.ok)
		}
		err := CheckTransition(tc.box, tc.from, tc.to)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidTransition)) {
			t.Errorf("CheckTransition(%s, %s, %s) = %v", tc.box, tc.from, tc.to, err)
		}
	}
	// No state transitions to itself, and every box can archive and delete
	// from its initial state.
	for _, b := range BoxKinds {
		for _, s := range States {
			if CanTransition(b, s, s) {
				t.Errorf("%s allows %s→%s", b, s, s)
			}
		}
		for _, to := range []State{Archived, Deleted} {
			if !CanTransition(b, InitialState(b), to) {
				t.Errorf("%s cannot move from its initial state %s to %s", b, InitialState(b), to)
			}
		}
		c, h, d := ClaimableState(b), HeldState(b), DoneState(b)
		if b != Outbox && (!CanTransition(b, c, h) || !CanTransition(b, h, d) || !CanTransition(b, h, c) || !CanTransition(b, h, Dead) || !CanTransition(b, Dead, c)) {
			t.Errorf("%s lacks the claim cycle %s→%s→%s (retry, dead, redrive)", b, c, h, d)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]BoxKind{"inbox": Inbox, "Tunnel_Outbox": TunnelOutbox, " GROUP_INBOX ": GroupInbox} {
		if got, err := ParseBoxKind(in); err != nil || got != want {
			t.Errorf("ParseBoxKind(%q) = %q, %v", in, got, err)
		}
	}
	var me *Error
	if _, err := ParseBoxKind("mailbox"); !errors.As(err, &me) || me.Field != "box" || !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseBoxKind(mailbox) = %v", err)
	}
	got, err := ParseStates("state", "unread, READING")
	if err != nil || len(got) != 2 || got[0] != Unread || got[1] != Reading {
		t.Errorf("ParseStates = %v, %v", got, err)
	}
	if _, err := ParseStates("state", "UNREAD,NOPE"); !errors.As(err, &me) || me.Field != "state" {
		t.Errorf("ParseStates(bad) = %v", err)
	}
}

func TestRecordIDDeterministic(t *testing.T) {
	t.Parallel()
	a := RecordID("did:a", Inbox, "cymsg:1", "")
	if a != RecordID("did:a", Inbox, "cymsg:1", "") {
		t.Fatal("same inputs, different ids")
	}
	// Field boundaries matter: ("did:a", "b") must not collide with ("did:ab", "").
	others := []string{
		RecordID("did:a", Outbox, "cymsg:1", ""),
		RecordID("did:b", Inbox, "cymsg:1", ""),
		RecordID("did:a", Inbox, "cymsg:2", ""),
		RecordID("did:a", Inbox, "cymsg:1", "v"),
		RecordID("did:a", Inbox, "cymsg:", "1"),
	}
	seen := map[string]bool{a: true}
	for _, o := range others {
		if seen[o] {
			t.Fatalf("collision: %s", o)
		}
		seen[o] = true
	}
}

func TestRecordIDLocatesItsMessage(t *testing.T) {
	t.Parallel()
	msg := "cymsg:0123456789abcdef" + strings.Repeat("e", 48)
	id := RecordID("did:a", Inbox, msg, "")
	if len(id) != len("cyrec:")+32+LocatorHex || !strings.HasPrefix(id, "cyrec:") {
		t.Fatalf("RecordID = %q, want cyrec: and 48 hex digits", id)
	}
	loc, ok := RecordLocator(id)
	if !ok || loc != "cymsg:0123456789abcdef" {
		t.Fatalf("RecordLocator(%s) = %q, %v", id, loc, ok)
	}
	if !RecordLocates(id, msg) {
		t.Fatalf("RecordLocates(%s, its message) = false", id)
	}
	if RecordLocates(id, "cymsg:0123456789abcdee"+strings.Repeat("e", 48)) {
		t.Fatal("RecordLocates accepted another message's prefix")
	}
	// The legacy id is the hash alone, exactly as RecordID made it before
	// the locator: stores of that time hold this id for this record.
	legacy, ok := LegacyRecordID(RecordID("did:x:bob", Inbox, "cymsg:1", ""))
	if want := "cyrec:8dc07b80aff10820eb8c583c088b522d"; !ok || legacy != want {
		t.Fatalf("LegacyRecordID = %q, %v; want %s", legacy, ok, want)
	}
	// A message id of another shape gets a locator that is no prefix of it.
	odd := RecordID("did:a", Inbox, "m1", "")
	if _, ok := RecordLocator(odd); !ok || RecordLocates(odd, "m1") {
		t.Fatalf("RecordID with message id m1 = %q: want a well-formed id that locates nothing", odd)
	}
	// So does one that only starts like a message id: a store searching
	// message ids by the locator's digits assumes hex digits follow them.
	for _, m := range []string{"cymsg:0123456789abcdefzz", "cymsg:0123456789abcdef" + strings.Repeat("E", 48),
		"cymsg:0123456789abcdef" + strings.Repeat("e", 47), msg + "0"} {
		if id := RecordID("did:a", Inbox, m, ""); RecordLocates(id, m) || RecordLocates(id, msg) {
			t.Errorf("RecordID of message id %q = %s: locates a message", m, id)
		}
	}
	for _, bad := range []string{"", "cyrec:1", legacy, "cyrec:" + strings.Repeat("A", 48), "cymsg:" + strings.Repeat("a", 48), id + "0"} {
		if _, ok := RecordLocator(bad); ok {
			t.Errorf("RecordLocator(%q) ok", bad)
		}
		if _, ok := LegacyRecordID(bad); ok {
			t.Errorf("LegacyRecordID(%q) ok", bad)
		}
	}
}

func TestUnreadDelta(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to State
		want     int
	}{{Unread, Reading, 0}, {Reading, Readed, -1}, {Readed, Unread, 1}, {Dead, Unread, 1}, {Sent, Archived, 0}} {
		if got := UnreadDelta(c.from, c.to); got != c.want {
			t.Errorf("UnreadDelta(%s, %s) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

func TestTransitionErrorArticle(t *testing.T) {
	t.Parallel()
	for box, want := range map[BoxKind]string{
		Inbox:        "an INBOX record cannot move from READED to READING",
		TunnelOutbox: "a TUNNEL_OUTBOX record cannot move from SENT to WAIT",
	} {
		from, to := Readed, Reading
		if box == TunnelOutbox {
			from, to = Sent, Wait
		}
		var e *Error
		if err := CheckTransition(box, from, to); !errors.As(err, &e) || e.Message != want {
			t.Errorf("CheckTransition(%s, %s, %s) = %v; want %q", box, from, to, err, want)
		}
	}
}
