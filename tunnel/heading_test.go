package tunnel_test

import (
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
)

// Only a group's message to one of its people, in the person's own chat,
// says who wrote it and where.
func TestHeading(t *testing.T) {
	t.Parallel()
	group := &message.Message{From: "did:group:team", Source: "did:agent:ann"}
	for _, c := range []struct {
		name   string
		msg    *message.Message
		target string
		want   string
	}{
		{"to a member's chat", group, "did:tg:pat", "did:agent:ann in did:group:team:"},
		{"to the group's chat", group, "did:group:team", ""},
		{"a direct message", &message.Message{From: "did:agent:ann"}, "did:tg:pat", ""},
		{"a group speaking for itself", &message.Message{From: "did:group:team", Source: "did:group:team"}, "did:tg:pat", ""},
	} {
		d := &tunnel.Delivery{Msg: c.msg, Route: &model.Route{TargetDID: c.target}}
		if got := d.Heading(); got != c.want {
			t.Errorf("%s: Heading() = %q, want %q", c.name, got, c.want)
		}
	}
}
