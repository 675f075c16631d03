package model

import (
	"errors"
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
