package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
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
		{"as an agent's source of a person's message", "msg.source", wire.DispatchRequest{Msg: &message.Message{
			From: "did:tg:user:42", Source: didAlice, To: []string{didBob}, Content: message.Content{Content: "pay eve 100"}}}},
		{"as an agent's source of its own message", "msg.source", wire.DispatchRequest{Msg: &message.Message{
			From: didTunnel, Source: didAlice, To: []string{didBob}, Content: message.Content{Content: "pay eve 100"}}}},
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

// TestHTTPTokenAfterATunnelsRoutes: a tunnel may route a DID no one holds
// a token for yet (a person it brings in); the first agent token for that
// DID is refused while those routes stand (messages to the new agent
// would go to the tunnel, never to its INBOX), until an admin clears them.
func TestHTTPTokenAfterATunnelsRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const carla = "did:carla"
	ok[wire.RoutesResult](t, e.do(t, "PUT", "/v1/routes/"+esc(carla), e.tunnel,
		wire.RoutesRequest{Routes: []model.ContactRoute{{ChatID: "666"}}}))
	// A tunnel token made first does not open the way.
	ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: carla, Role: model.RoleTunnel}))
	req := wire.TokenRequest{DID: carla, Role: model.RoleAgent}
	if d := wantErr(t, e.do(t, "POST", "/v1/tokens", e.admin, req), http.StatusConflict, wire.CodeConflict, "did"); !strings.Contains(d.Message, "--clear") {
		t.Fatalf("the refusal does not say how to go on: %q", d.Message)
	}
	ok[wire.RoutesResult](t, e.do(t, "PUT", "/v1/routes/"+esc(carla), e.admin, wire.RoutesRequest{Routes: []model.ContactRoute{}}))
	tok := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, req))
	e.postSend(t, e.alice, chat(didAlice, []string{carla}, "to carla's INBOX"))
	if got := e.syncAll(t, tok.Token, carla, model.Inbox); len(got) != 1 {
		t.Fatalf("carla's INBOX holds %d records, want 1", len(got))
	}
}
