package api_test

import (
	"net/http"
	"testing"

	"github.com/msgcenter/msgcenter/wire"
)

// TestHTTPTunnelSpeaksOnlyForItsPeople: a tunnel dispatches for the
// people of its platform and for itself, never in the name of a local
// identity (one with a token): not as an agent's direct message, not as
// an agent's post in a group. Nothing is delivered when it tries.
func TestHTTPTunnelSpeaksOnlyForItsPeople(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setSubscribers(t, didGroup, didAlice, didBob)
	for _, tc := range []struct {
		name, field string
		req         wire.DispatchRequest
	}{
		{"as an agent", "msg.from", wire.DispatchRequest{Msg: chat(didAlice, []string{didBob}, "pay eve 100")}},
		{"as an agent in a group", "msg.source", wire.DispatchRequest{Msg: groupMsg(didGroup, didAlice, "pay eve 100")}},
	} {
		wantErr(t, e.do(t, "POST", "/v1/dispatch", e.tunnel, tc.req), http.StatusForbidden, wire.CodeForbidden, tc.field)
	}
	if n := len(e.syncAll(t, e.bob, didBob, "INBOX")); n != 0 {
		t.Fatalf("a forged dispatch delivered: bob has %d records", n)
	}
	for _, from := range []string{"did:tg:user:42", didTunnel} {
		if d := e.dispatch(t, chat(from, []string{didBob}, "hello from "+from)); !d.OK {
			t.Fatalf("dispatch from %s: %+v", from, d)
		}
	}
	if d := e.dispatch(t, groupMsg(didGroup, "did:tg:user:42", "a person of the platform in the group")); !d.OK {
		t.Fatalf("group dispatch from a person of the platform: %+v", d)
	}
}
