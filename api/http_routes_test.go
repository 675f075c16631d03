package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestHTTPRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := "/v1/routes/" + esc(didExt)
	slack := model.ContactRoute{TunnelDID: "did:tunnel:slack", Platform: "slack", ChatID: "C42", Mode: "thread"}

	t.Run("set and get", func(t *testing.T) {
		routes := []model.ContactRoute{slack, extRoute}
		res := ok[wire.RoutesResult](t, e.do(t, "PUT", path, e.admin, wire.RoutesRequest{Routes: routes}))
		if res.DID != didExt || !reflect.DeepEqual(res.Routes, routes) {
			t.Fatalf("set %+v", res)
		}
		got := ok[wire.RoutesResult](t, e.do(t, "GET", path, e.admin, nil))
		if got.DID != didExt || !reflect.DeepEqual(got.Routes, routes) {
			t.Fatalf("get %+v", got)
		}
		none := ok[wire.RoutesResult](t, e.do(t, "GET", "/v1/routes/"+esc(didCarol), e.carol, nil))
		if none.DID != didCarol || none.Routes == nil || len(none.Routes) != 0 {
			t.Fatalf("routes of an unrouted DID: %+v", none)
		}
		// An agent routes no one, not even itself: a route makes a tunnel
		// send to its address (a webhook URL inside the network, say) and
		// shows the answer in the record.
		own := []model.ContactRoute{{TunnelDID: didTunnel, Address: "http://10.0.0.1/admin"}}
		wantErr(t, e.do(t, "PUT", "/v1/routes/"+esc(didAlice), e.alice, wire.RoutesRequest{Routes: own}), http.StatusForbidden, wire.CodeForbidden, "")
		if got := ok[wire.RoutesResult](t, e.do(t, "GET", "/v1/routes/"+esc(didAlice), e.alice, nil)); len(got.Routes) != 0 {
			t.Fatalf("a refused route was set: %+v", got)
		}
	})

	t.Run("post_send to a routed recipient", func(t *testing.T) {
		res := e.postSend(t, e.bob, chat(didBob, []string{didExt, didCarol}, "to dave"))
		want := model.RecordID(didTunnel, model.TunnelOutbox, res.MsgID, didExt+"\x00"+extRoute.Address+"\x00"+extRoute.ChatID)
		if !res.OK || len(res.Deliveries) != 1 || !reflect.DeepEqual(res.LocalRecipients, []string{didCarol}) {
			t.Fatalf("result %+v", res)
		}
		if d := res.Deliveries[0]; d != (wire.Delivery{TunnelDID: didTunnel, RecordID: want, TargetDID: didExt, Priority: 1}) {
			t.Fatalf("delivery %+v, want the highest priority route", d)
		}
		rec := e.record(t, want)
		wantRoute := &model.Route{TunnelDID: didTunnel, Platform: "telegram", Address: "tg:dave", ChatID: "1001", TargetDID: didExt, Priority: 1}
		if rec.Owner != didTunnel || rec.BoxKind != model.TunnelOutbox || rec.State != model.Wait || !reflect.DeepEqual(rec.Route, wantRoute) {
			t.Fatalf("tunnel record %+v route %+v", rec, rec.Route)
		}
		listed := ok[wire.ListResult](t, e.do(t, "GET", boxPath(didTunnel, model.TunnelOutbox, "records"), e.tunnel, nil))
		if len(listed.Items) != 1 || listed.Items[0].Record.RecordID != want || !reflect.DeepEqual(listed.Items[0].Record.Route, wantRoute) {
			t.Fatalf("tunnel's box %+v", listed.Items)
		}
		if n := len(e.syncAll(t, e.admin, didExt, model.Inbox)); n != 0 {
			t.Fatalf("a routed recipient got %d local records", n)
		}
	})

	t.Run("send_ctx picks routes", func(t *testing.T) {
		all := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.bob, wire.PostSendRequest{
			Msg: chat(didBob, []string{didExt}, "everywhere"), SendCtx: &wire.SendCtx{AllRoutes: true, Mode: "urgent"}}))
		var tunnels []string
		for _, d := range all.Deliveries {
			tunnels = append(tunnels, d.TunnelDID)
			if d.Mode != "urgent" {
				t.Fatalf("mode not applied: %+v", d)
			}
		}
		if !equalSet(tunnels, []string{didTunnel, slack.TunnelDID}) {
			t.Fatalf("all_routes deliveries %+v", all.Deliveries)
		}
		one := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.bob, wire.PostSendRequest{
			Msg: chat(didBob, []string{didExt}, "via slack"), SendCtx: &wire.SendCtx{TunnelDID: slack.TunnelDID}}))
		if len(one.Deliveries) != 1 || one.Deliveries[0].TunnelDID != slack.TunnelDID || one.Deliveries[0].Mode != "thread" {
			t.Fatalf("tunnel_did deliveries %+v", one.Deliveries)
		}
		rec := e.record(t, one.Deliveries[0].RecordID)
		if rec.Owner != slack.TunnelDID || rec.Route == nil || rec.Route.ChatID != "C42" || rec.Route.TargetDID != didExt {
			t.Fatalf("slack record %+v", rec)
		}
	})

	t.Run("bad input and others' routes", func(t *testing.T) {
		c := func(name, method, path, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: method, path: path, token: token, body: body, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.setSubscribers(t, didGroup, didBob)
		var many []string
		for i := range 65 {
			many = append(many, fmt.Sprintf(`{"tunnel_did":"did:t","address":"a%d"}`, i))
		}
		e.runBad(t, []badCase{
			c("empty body", "PUT", path, e.admin, "", 400, inv, ""),
			c("malformed JSON", "PUT", path, e.admin, `{"routes":[{]}`, 400, inv, ""),
			c("missing routes", "PUT", path, e.admin, `{}`, 400, inv, "routes"),
			c("routes wrong type", "PUT", path, e.admin, `{"routes":{}}`, 400, inv, "routes"),
			c("priority wrong type", "PUT", path, e.admin, `{"routes":[{"tunnel_did":"did:t","address":"a"},{"tunnel_did":"did:t","address":"b","priority":"high"}]}`, 400, inv, "routes[1].priority"),
			c("the same endpoint twice", "PUT", path, e.admin, `{"routes":[{"tunnel_did":"did:t","address":"a"},{"tunnel_did":"did:t","address":"a","priority":2}]}`, 400, inv, "routes[1]"),
			c("unknown route field", "PUT", path, e.admin, `{"routes":[{"tunnel_did":"did:t","address":"a","weight":1}]}`, 400, inv, "routes[0].weight"),
			c("missing tunnel_did", "PUT", path, e.admin, `{"routes":[{"address":"a"}]}`, 400, inv, "routes[0].tunnel_did"),
			c("neither address nor chat_id", "PUT", path, e.admin, `{"routes":[{"tunnel_did":"did:t","address":"a"},{"tunnel_did":"did:t"}]}`, 400, inv, "routes[1].address"),
			c("too many routes", "PUT", path, e.admin, `{"routes":[`+strings.Join(many, ",")+`]}`, 400, inv, "routes"),
			c("did with space", "PUT", "/v1/routes/did%20x", e.admin, `{"routes":[]}`, 400, inv, "did"),
			c("get did with space", "GET", "/v1/routes/did%20x", e.admin, nil, 400, inv, "did"),
			c("alice sets dave's routes", "PUT", path, e.alice, `{"routes":[]}`, 403, wire.CodeForbidden, ""),
			c("tunnel sets dave's routes through another tunnel", "PUT", path, e.tunnel, `{"routes":[{"tunnel_did":"did:tunnel:slack","address":"x"}]}`, 403, wire.CodeForbidden, ""),
			c("tunnel sets a new DID's routes with a bad route", "PUT", "/v1/routes/did:ext:new", e.tunnel, `{"routes":[{"platform":"telegram"}]}`, 400, inv, "routes[0].address"),
			c("tunnel sets a new DID's routes without a list", "PUT", "/v1/routes/did:ext:new", e.tunnel, `{}`, 400, inv, "routes"),
			c("tunnel sets the routes of a DID another tunnel reaches", "PUT", path, e.tunnel, `{"routes":[{"address":"x"}]}`, 403, wire.CodeForbidden, ""),
			c("tunnel sets the routes of a local agent", "PUT", "/v1/routes/"+esc(didBob), e.tunnel, `{"routes":[{"address":"x"}]}`, 403, wire.CodeForbidden, ""),
			c("tunnel sets the routes of a group", "PUT", "/v1/routes/"+esc(didGroup), e.tunnel, `{"routes":[{"address":"x"}]}`, 403, wire.CodeForbidden, ""),
			c("alice reads dave's routes", "GET", path, e.alice, nil, 403, wire.CodeForbidden, ""),
		})
	})

	t.Run("a tunnel routes the people it brings in", func(t *testing.T) {
		erin := "/v1/routes/" + esc("did:ext:erin")
		mine := []model.ContactRoute{{Address: "tg:erin", ChatID: "77", Platform: "telegram"}}
		res := ok[wire.RoutesResult](t, e.do(t, "PUT", erin, e.tunnel, wire.RoutesRequest{Routes: mine}))
		want := []model.ContactRoute{{TunnelDID: didTunnel, Address: "tg:erin", ChatID: "77", Platform: "telegram"}}
		if !reflect.DeepEqual(res.Routes, want) {
			t.Fatalf("set %+v, want %+v", res.Routes, want)
		}
		if all := ok[wire.RoutesResult](t, e.do(t, "GET", erin, e.admin, nil)).Routes; !reflect.DeepEqual(all, want) {
			t.Fatalf("admin sees %+v", all)
		}
		if seen := ok[wire.RoutesResult](t, e.do(t, "GET", erin, e.tunnel, nil)).Routes; !reflect.DeepEqual(seen, want) {
			t.Fatalf("the tunnel sees %+v", seen)
		}
		// It sees only its own routes of a DID others reach too.
		seen := ok[wire.RoutesResult](t, e.do(t, "GET", path, e.tunnel, nil)).Routes
		for _, r := range seen {
			if r.TunnelDID != didTunnel {
				t.Fatalf("the tunnel sees another tunnel's route of dave: %+v", seen)
			}
		}
		// A DID with no token that has sent with post_send is local too.
		e.postSend(t, e.admin, chat("did:local:svc", []string{didBob}, "from a service"))
		if r := e.do(t, "PUT", "/v1/routes/"+esc("did:local:svc"), e.tunnel, wire.RoutesRequest{Routes: mine}); r.status != 403 {
			t.Fatalf("a tunnel routed a DID that sends with post_send: %d %s", r.status, r.body)
		}
		ok[wire.RoutesResult](t, e.do(t, "PUT", erin, e.tunnel, wire.RoutesRequest{Routes: []model.ContactRoute{}}))
		if left := ok[wire.RoutesResult](t, e.do(t, "GET", erin, e.admin, nil)).Routes; len(left) != 0 {
			t.Fatalf("after the tunnel removed its routes: %+v", left)
		}
	})
}
