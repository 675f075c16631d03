package e2e

import (
	"fmt"
	"testing"

	"github.com/msgcenter/msgcenter/message"
)

// The consumer scenario's messages (consumers_test.go) and, decided from
// their attributes here, independently of the server's filter code, which
// consumer takes each one.

// consMsg is one message of the scenario and the attributes the filters
// look at.
type consMsg struct {
	i         int
	msg       *message.Message
	id        string
	workspace string
	kind      string
	urgent    bool
}

// The three consumers and what each takes, decided from the message's
// attributes here, independently of the server's filter code.
const (
	consAlpha  = "alpha"  // workspace alpha; every record claimed and done
	consUrgent = "urgent" // text "urgent" in any case, in title or content; some fail
	consLate   = "late"   // kind notify, from "now" midway; read over the WebSocket
)

func (m *consMsg) matches(consumer string) bool {
	switch consumer {
	case consAlpha:
		return m.workspace == wsAlpha
	case consUrgent:
		return m.urgent
	case consLate:
		return m.kind == message.KindNotify
	}
	panic(consumer)
}

// urgent consumer's treatment of a record: by message number.
type urgentFate int

const (
	fateDone  urgentFate = iota
	fateDead             // failed, not retryable: DEAD
	fateRetry            // failed once, retryable; done on a later claim
)

func (m *consMsg) fate() urgentFate {
	switch (m.i / 5) % 4 {
	case 0:
		return fateDead
	case 1:
		return fateRetry
	}
	return fateDone
}

func consMessages(t *testing.T, run int64, total int) ([]*consMsg, map[string]*consMsg) {
	t.Helper()
	msgs := make([]*consMsg, total)
	byID := make(map[string]*consMsg, total)
	for i := range msgs {
		cm := &consMsg{i: i,
			workspace: []string{wsAlpha, wsBeta, ""}[i%3],
			kind:      []string{message.KindChat, message.KindNotify, message.KindEvent}[(i/3)%3],
			urgent:    i%5 == 0}
		text, title := fmt.Sprintf("run %d message %d", run, i), ""
		switch {
		case cm.urgent && (i/5)%3 == 0:
			text += " -- urgent"
		case cm.urgent && (i/5)%3 == 1:
			text = "URGENT " + text
		case cm.urgent:
			title = "Urgent follow-up"
		case i%7 == 0:
			text += " (urge nobody)" // close, but no match
		}
		from := fmt.Sprintf("did:cons:prod%d", i%4) // agents' post_send
		if i%4 >= 2 {
			from = fmt.Sprintf("did:ext:user%d", i%4) // the tunnel's dispatch
		}
		cm.msg = &message.Message{From: from, To: []string{consAgent}, Kind: cm.kind, Workspace: cm.workspace,
			Content: message.Content{Title: title, Content: text}}
		id, err := cm.msg.ID()
		if err != nil {
			t.Fatalf("id of message %d: %v", i, err)
		}
		cm.id = id
		msgs[i], byID[id] = cm, cm
	}
	return msgs, byID
}
