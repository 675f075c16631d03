package email

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEvent: whatever a sending server hands over, Event reads it or says
// why not, and what it reads has an id, a sender DID and valid text.
func FuzzEvent(f *testing.F) {
	f.Add([]byte("From: a@b.c\r\nSubject: hi\r\nMessage-ID: <x@y>\r\n\r\nbody\r\n"), "a@b.c")
	f.Add([]byte("Content-Type: multipart/mixed; boundary=z\r\n\r\n--z\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--z--\r\n"), "")
	f.Add([]byte("garbage"), "x@y")
	f.Fuzz(func(t *testing.T, raw []byte, from string) {
		ev, err := Event(raw, from)
		if err != nil {
			return
		}
		if ev.ID == "" || !strings.HasPrefix(ev.From, "did:email:") || (ev.Address == "" && !ev.NoReplyRoute) {
			t.Fatalf("event %+v", ev)
		}
		if !utf8.ValidString(ev.Text) || len(ev.Text) > maxTextJSON+64 {
			t.Fatalf("text of %d bytes, valid UTF-8: %v", len(ev.Text), utf8.ValidString(ev.Text))
		}
	})
}
