package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// routeCall is one concrete request for a route pattern: a request an admin
// would get a 2xx for.
type routeCall struct {
	method, pattern, path string
	body                  any
}

// callsForEveryRoute builds one valid request per authenticated route, on
// records and messages that exist.
func callsForEveryRoute(t *testing.T, e *env) []routeCall {
	e.setRoutes(t, didExt, extRoute)
	e.setSubscribers(t, didGroup, didAlice, didBob)
	d := e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "target"))
	rec := model.RecordID(didAlice, model.Inbox, d.MsgID, "")
	inbox := func(rest string) string { return boxPath(didAlice, model.Inbox, rest) }
	delay := int64(3_600_000)
	later := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice,
		wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "to cancel"), DelayMS: &delay}))
	sched := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled", e.admin, nil))
	if len(sched.Items) != 1 || sched.Items[0].MsgID != later.MsgID {
		t.Fatalf("scheduled: %+v", sched)
	}
	cancel := fmt.Sprintf("/v1/scheduled/%d", sched.Items[0].ID)
	tok := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:x:revoked", Role: model.RoleAgent}))
	return []routeCall{
		{"POST", "/v1/dispatch", "/v1/dispatch", wire.DispatchRequest{Msg: chat("did:tg:u1", []string{didBob}, "x")}},
		{"POST", "/v1/post_send", "/v1/post_send", wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "x")}},
		{"GET", "/v1/messages/{msg_id}", "/v1/messages/" + esc(d.MsgID), nil},
		{"POST", "/v1/boxes/{owner}/{box}/next", inbox("next"), wire.NextRequest{}},
		{"GET", "/v1/boxes/{owner}/{box}/records", inbox("records"), nil},
		{"GET", "/v1/boxes/{owner}/{box}/sync", inbox("sync"), nil},
		{"GET", "/v1/boxes/{owner}/{box}/stream", inbox("stream"), nil},
		{"POST", "/v1/boxes/{owner}/{box}/redrive", inbox("redrive"), wire.RedriveRequest{}},
		{"GET", "/v1/records/{record_id}", recPath(rec, ""), nil},
		{"POST", "/v1/records/{record_id}/state", recPath(rec, "state"), wire.StateRequest{NewState: model.Readed}},
		{"POST", "/v1/records/{record_id}/delivery", recPath(rec, "delivery"), wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}}},
		{"POST", "/v1/records/{record_id}/lease", recPath(rec, "lease"), wire.LeaseRequest{}},
		{"POST", "/v1/records/{record_id}/redrive", recPath(rec, "redrive"), nil},
		{"POST", "/v1/read_receipts", "/v1/read_receipts", wire.ReceiptRequest{MsgID: d.MsgID, ReaderDID: didAlice, Status: model.ReceiptReaded}},
		{"GET", "/v1/read_receipts", "/v1/read_receipts?msg_id=" + esc(d.MsgID), nil},
		{"PUT", "/v1/groups/{group}/subscribers", "/v1/groups/" + esc(didGroup) + "/subscribers", wire.SubscribersRequest{Subscribers: []string{didCarol}}},
		{"GET", "/v1/groups/{group}/subscribers", "/v1/groups/" + esc(didGroup) + "/subscribers", nil},
		{"DELETE", "/v1/groups/{group}", "/v1/groups/" + esc(didGroup), nil},
		{"GET", "/v1/contacts/{owner}/blocks", "/v1/contacts/" + esc(didAlice) + "/blocks", nil},
		{"PUT", "/v1/contacts/{owner}/blocks/{did}", "/v1/contacts/did:alice/blocks/did:tg:u1", nil},
		{"DELETE", "/v1/contacts/{owner}/blocks/{did}", "/v1/contacts/did:alice/blocks/did:tg:u1", nil},
		{"PUT", "/v1/routes/{did}", "/v1/routes/" + esc(didExt), wire.RoutesRequest{Routes: []model.ContactRoute{}}},
		{"GET", "/v1/routes/{did}", "/v1/routes/" + esc(didExt), nil},
		{"GET", "/v1/owners/{owner}/conversations", "/v1/owners/did:alice/conversations", nil},
		{"POST", "/v1/owners/{owner}/conversations/read", "/v1/owners/did:alice/conversations/read", wire.ReadConversationRequest{ThreadKey: "dm:did:bob"}},
		{"GET", "/v1/events", "/v1/events", nil},
		{"GET", "/v1/events/stream", "/v1/events/stream", nil},
		{"GET", "/v1/owners/{owner}/presence", "/v1/owners/did:alice/presence", nil},
		{"GET", "/v1/whoami", "/v1/whoami", nil},
		{"GET", "/v1/scheduled", "/v1/scheduled", nil},
		{"DELETE", "/v1/scheduled/{id}", cancel, nil}, // before the flush, which would deliver it
		{"POST", "/v1/scheduled/flush", "/v1/scheduled/flush", wire.FlushRequest{}},
		{"GET", "/v1/mail/pending", "/v1/mail/pending", nil},
		{"POST", "/v1/mail/flush", "/v1/mail/flush", nil},
		{"POST", "/v1/tokens", "/v1/tokens", wire.TokenRequest{DID: "did:x", Role: model.RoleAgent}},
		{"GET", "/v1/tokens", "/v1/tokens", nil},
		{"DELETE", "/v1/tokens/{token_id}", "/v1/tokens/" + tok.TokenID, nil},
		{"POST", "/v1/consumers", "/v1/consumers", wire.ConsumerRequest{Owner: didAlice, Name: "c1", SourceOwner: didAlice, SourceBox: "INBOX"}},
		{"GET", "/v1/consumers", "/v1/consumers", nil},
		{"GET", "/v1/consumers/{owner}/{name}", "/v1/consumers/did:alice/c1", nil},
		{"POST", "/v1/consumers/{owner}/{name}/ack", "/v1/consumers/did:alice/c1/ack", wire.AckRequest{Seq: 0}},
		{"DELETE", "/v1/consumers/{owner}/{name}", "/v1/consumers/did:alice/c1", nil},
		{"GET", "/v1/admin/retention", "/v1/admin/retention", nil},
		{"POST", "/v1/admin/retention/run", "/v1/admin/retention/run", nil},
		{"GET", "/debug/pprof/{profile}", "/debug/pprof/heap", nil},
	}
}

func TestHTTPUnauthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	calls := callsForEveryRoute(t, e)

	t.Run("every authenticated route is covered", func(t *testing.T) {
		have := map[string]bool{}
		for _, c := range calls {
			have[c.method+" "+c.pattern] = true
		}
		for _, r := range api.Routes() {
			if public := r.Pattern == "/healthz" || r.Pattern == "/metrics"; !public && !have[r.Method+" "+r.Pattern] {
				t.Errorf("route %s %s has no 401 case", r.Method, r.Pattern)
			}
			delete(have, r.Method+" "+r.Pattern)
		}
		for k := range have {
			t.Errorf("401 case for %s, which is not a route", k)
		}
	})

	var cases []badCase
	for _, c := range calls {
		for _, auth := range []struct{ name, token string }{
			{"no token", ""},
			{"unknown token", "mct_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
			{"not a token", "hunter2"},
		} {
			cases = append(cases, badCase{name: auth.name + " " + c.method + " " + c.pattern, method: c.method, path: c.path,
				token: auth.token, body: c.body, status: http.StatusUnauthorized, code: wire.CodeUnauthorized})
		}
	}
	e.runBad(t, cases)

	t.Run("other schemes", func(t *testing.T) {
		for _, h := range []string{"Basic " + e.admin, e.admin, "Bearer", "Bearer  "} {
			req, _ := http.NewRequest("GET", e.url+"/v1/events", nil)
			req.Header.Set("Authorization", h)
			res, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Errorf("Authorization %q: status %d, want 401", strings.Replace(h, e.admin, "<admin>", 1), res.StatusCode)
			}
		}
		// The scheme is case-insensitive.
		req, _ := http.NewRequest("GET", e.url+"/v1/events", nil)
		req.Header.Set("Authorization", "bearer "+e.admin)
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("lower-case bearer: status %d", res.StatusCode)
		}
	})

	t.Run("the same calls as admin succeed", func(t *testing.T) {
		for _, c := range calls {
			if strings.HasSuffix(c.pattern, "/stream") {
				continue // a stream does not end: see http_stream_test.go
			}
			if r := e.do(t, c.method, c.path, e.admin, c.body); r.status != 200 && r.status != 201 && r.status != 204 && r.status != 409 {
				t.Errorf("%s %s as admin: %s", c.method, c.path, r)
			}
		}
	})
}

// TestHTTPForbidden gathers the access rules: each refused request next to
// the closest allowed one.
func TestHTTPForbidden(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setSubscribers(t, didGroup, didAlice, didBob)
	e.setSubscribers(t, didGroup2, didBob)
	toBob := e.dispatch(t, chat("did:tg:u1", []string{didBob}, "bob's"))
	bobRec := model.RecordID(didBob, model.Inbox, toBob.MsgID, "")
	g1 := e.postSend(t, e.bob, groupMsg(didGroup, didBob, "g1 msg"))
	e.postSend(t, e.bob, groupMsg(didGroup2, didBob, "g2 msg"))
	g1Rec := model.RecordID(didGroup, model.GroupInbox, g1.MsgID, "")

	f := func(name, method, path, token string, body any) badCase {
		return badCase{name: name, method: method, path: path, token: token, body: body, status: http.StatusForbidden, code: wire.CodeForbidden}
	}
	hidden := func(name, method, path, token string, body any) badCase {
		return badCase{name: name, method: method, path: path, token: token, body: body, status: http.StatusNotFound, code: wire.CodeNotFound}
	}
	e.runBad(t, []badCase{
		f("alice post_send as bob", "POST", "/v1/post_send", e.alice, wire.PostSendRequest{Msg: chat(didBob, []string{didCarol}, "x")}),
		f("alice claims bob's INBOX", "POST", boxPath(didBob, model.Inbox, "next"), e.alice, nil),
		f("alice lists bob's records", "GET", boxPath(didBob, model.Inbox, "records"), e.alice, nil),
		f("alice syncs bob's records", "GET", boxPath(didBob, model.Inbox, "sync"), e.alice, nil),
		// a record one may not read is not found, as a message is: its id
		// follows from the owner and the message
		hidden("alice reads bob's record", "GET", recPath(bobRec, ""), e.alice, nil),
		hidden("alice acks bob's record", "POST", recPath(bobRec, "delivery"), e.alice, wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}}),
		f("alice sets a receipt as reader bob", "POST", "/v1/read_receipts", e.alice,
			wire.ReceiptRequest{MsgID: toBob.MsgID, ReaderDID: didBob, Status: model.ReceiptReaded}),
		f("agent creates a token", "POST", "/v1/tokens", e.alice, wire.TokenRequest{DID: didAlice, Role: model.RoleAdmin}),
		f("agent lists another's scheduled", "GET", "/v1/scheduled?sender=did:x:bob", e.alice, nil),
		f("agent flushes scheduled", "POST", "/v1/scheduled/flush", e.bob, nil),
		f("tunnel flushes Mails", "POST", "/v1/mail/flush", e.tunnel, nil),
		f("tunnel lists another's pending Mails", "GET", "/v1/mail/pending?sender=did:tunnel:other", e.tunnel, nil),
		f("agent dispatches", "POST", "/v1/dispatch", e.alice, wire.DispatchRequest{Msg: chat(didAlice, []string{didBob}, "x")}),
		f("alice lists a GROUP_INBOX she is not in", "GET", boxPath(didGroup2, model.GroupInbox, "records"), e.alice, nil),
		f("alice syncs a GROUP_INBOX she is not in", "GET", boxPath(didGroup2, model.GroupInbox, "sync"), e.alice, nil),
		f("carol lists a GROUP_INBOX she is not in", "GET", boxPath(didGroup, model.GroupInbox, "records"), e.carol, nil),
	})

	t.Run("allowed", func(t *testing.T) {
		for _, c := range []struct {
			name, method, path, token string
			body                      any
		}{
			{"alice post_send as alice", "POST", "/v1/post_send", e.alice, wire.PostSendRequest{Msg: chat(didAlice, []string{didCarol}, "mine")}},
			{"tunnel dispatches", "POST", "/v1/dispatch", e.tunnel, wire.DispatchRequest{Msg: chat("did:tg:u9", []string{didCarol}, "in")}},
			{"bob reads his record", "GET", recPath(bobRec, ""), e.bob, nil},
			{"alice lists a GROUP_INBOX she is in", "GET", boxPath(didGroup, model.GroupInbox, "records"), e.alice, nil},
			{"alice syncs a GROUP_INBOX she is in", "GET", boxPath(didGroup, model.GroupInbox, "sync"), e.alice, nil},
			{"alice reads a record of a group she is in", "GET", recPath(g1Rec, ""), e.alice, nil},
			{"admin lists scheduled", "GET", "/v1/scheduled", e.admin, nil},
			{"tunnel lists its pending Mails", "GET", "/v1/mail/pending", e.tunnel, nil},
		} {
			if r := e.do(t, c.method, c.path, c.token, c.body); r.status != http.StatusOK {
				t.Errorf("%s: %s", c.name, r)
			}
		}
	})
}

// whoami answers each token's own DID and role.
func TestHTTPWhoAmI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		token string
		want  wire.WhoAmI
	}{
		{e.alice, wire.WhoAmI{DID: didAlice, Role: model.RoleAgent}},
		{e.tunnel, wire.WhoAmI{DID: didTunnel, Role: model.RoleTunnel}},
	} {
		if got := ok[wire.WhoAmI](t, e.do(t, "GET", "/v1/whoami", c.token, nil)); got != c.want {
			t.Fatalf("whoami = %+v, want %+v", got, c.want)
		}
	}
	if got := ok[wire.WhoAmI](t, e.do(t, "GET", "/v1/whoami", e.admin, nil)); got.Role != model.RoleAdmin {
		t.Fatalf("admin's whoami = %+v", got)
	}
}
