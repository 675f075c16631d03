package api_test

import (
	"net/http"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Over HTTP: a tunnel's burst waits as a pending Mail, listed for the
// tunnel and written at once by an admin's flush; alice gets one record.
func TestHTTPMailBurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agg := map[string]any{"key": "tg:chat-7", "window_ms": 60_000}
	var ids []string
	for _, text := range []string{"first", "second"} {
		r := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel, map[string]any{
			"msg": chat("did:tg:u7", []string{didAlice}, text), "aggregate": agg}))
		if r.Aggregate == nil || r.Aggregate.BucketID == 0 || len(r.DeliveredRecipients) != 0 {
			t.Fatalf("dispatch %q answered %+v", text, r)
		}
		ids = append(ids, r.MsgID)
	}
	pending := ok[wire.PendingMailResult](t, e.do(t, "GET", "/v1/mail/pending", e.tunnel, nil))
	if len(pending.Mail) != 1 || pending.Mail[0].Parts != 2 || pending.Mail[0].Sender != didTunnel || pending.Mail[0].PartMsgIDs[1] != ids[1] {
		t.Fatalf("pending = %+v", pending)
	}
	if n := len(e.syncAll(t, e.alice, didAlice, model.Inbox)); n != 0 {
		t.Fatalf("alice has %d records before the burst ended", n)
	}
	fl := ok[wire.MailFlushResult](t, e.do(t, "POST", "/v1/mail/flush", e.admin, nil))
	if fl.Flushed != 1 {
		t.Fatalf("flush = %+v", fl)
	}
	items := e.syncAll(t, e.alice, didAlice, model.Inbox)
	if len(items) != 1 {
		t.Fatalf("alice's inbox after the flush: %d records", len(items))
	}
	r := e.do(t, "GET", "/v1/messages/"+esc(items[0].Record.MsgID), e.alice, nil)
	if r.status != http.StatusOK || contentOf(t, r.body) != "first\nsecond" {
		t.Fatalf("alice reads her Mail: %s", r)
	}
	if p := ok[wire.PendingMailResult](t, e.do(t, "GET", "/v1/mail/pending", e.admin, nil)); len(p.Mail) != 0 {
		t.Fatalf("pending after the flush = %+v", p)
	}
}

// Bad aggregation requests are 4xx naming the field, and change nothing.
func TestHTTPMailRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := chat("did:tg:u7", []string{didAlice}, "x")
	bad := func(name string, body any, field string) badCase {
		return badCase{name: name, method: "POST", path: "/v1/dispatch", token: e.tunnel, body: body,
			status: http.StatusBadRequest, code: wire.CodeInvalid, field: field}
	}
	e.runBad(t, []badCase{
		bad("no key", map[string]any{"msg": m, "aggregate": map[string]any{}}, "aggregate.key"),
		bad("window as a string", map[string]any{"msg": m, "aggregate": map[string]any{"key": "k", "window_ms": "5"}}, "aggregate.window_ms"),
		bad("unknown field", map[string]any{"msg": m, "aggregate": map[string]any{"key": "k", "windw_ms": 5}}, "aggregate.windw_ms"),
		bad("negative max wait", map[string]any{"msg": m, "aggregate": map[string]any{"key": "k", "max_wait_ms": -1}}, "aggregate.max_wait_ms"),
		bad("with a delay", map[string]any{"msg": m, "delay_ms": 1000, "aggregate": map[string]any{"key": "k"}}, "aggregate"),
		bad("aggregate not an object", map[string]any{"msg": m, "aggregate": "k"}, "aggregate"),
		{name: "agent dispatches a part", method: "POST", path: "/v1/dispatch", token: e.alice,
			body: map[string]any{"msg": m, "aggregate": map[string]any{"key": "k"}}, status: http.StatusForbidden, code: wire.CodeForbidden},
		{name: "agent flushes", method: "POST", path: "/v1/mail/flush", token: e.alice, status: http.StatusForbidden, code: wire.CodeForbidden},
		{name: "repeated sender filter", method: "GET", path: "/v1/mail/pending?sender=did:a&sender=did:b", token: e.admin,
			status: http.StatusBadRequest, code: wire.CodeInvalid, field: "sender"},
	})
	if p := ok[wire.PendingMailResult](t, e.do(t, "GET", "/v1/mail/pending", e.admin, nil)); len(p.Mail) != 0 {
		t.Fatalf("refused requests left pending Mails: %+v", p)
	}
}
