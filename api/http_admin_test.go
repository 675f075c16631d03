package api_test

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// recordEvents keeps the events of records.
func recordEvents(evs []model.Event) []model.Event {
	var out []model.Event
	for _, e := range evs {
		if strings.HasPrefix(e.Type, "record.") {
			out = append(out, e)
		}
	}
	return out
}

func TestHTTPEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.dispatch(t, chat("did:tg:u1", []string{didAlice, didBob}, "evented"))
	held := e.claim(t, e.alice, didAlice, model.Inbox)
	e.deliver(t, e.alice, held.Record.RecordID, wire.DeliveryResult{OK: true})

	t.Run("admin pages the whole log", func(t *testing.T) {
		all := e.allEvents(t, e.admin, "")
		var got []model.Event
		after := int64(0)
		for range 20 {
			res := ok[wire.EventsResult](t, e.do(t, "GET", fmt.Sprintf("/v1/events?after=%d&limit=2", after), e.admin, nil))
			if len(res.Items) == 0 {
				if res.NextAfter != after {
					t.Fatalf("empty page moved next_after from %d to %d", after, res.NextAfter)
				}
				break
			}
			if len(res.Items) > 2 || res.NextAfter != res.Items[len(res.Items)-1].EventID {
				t.Fatalf("page %+v", res)
			}
			got = append(got, res.Items...)
			after = res.NextAfter
		}
		if !reflect.DeepEqual(got, all) || len(recordEvents(all)) != 4 {
			t.Fatalf("paged %d events, whole log %d: %+v", len(got), len(all), all)
		}
		for i := 1; i < len(got); i++ {
			if got[i].EventID <= got[i-1].EventID {
				t.Fatalf("event ids not increasing: %+v", got)
			}
		}
	})

	t.Run("types and owners", func(t *testing.T) {
		// (the tokens the test server made for its users are events too)
		evs := recordEvents(e.allEvents(t, e.alice, ""))
		var types []string
		for _, ev := range evs {
			types = append(types, ev.Type)
			if ev.Owner != didAlice || ev.MsgID != d.MsgID || ev.BoxKind != model.Inbox || ev.RecordID != held.Record.RecordID || ev.AtMS == 0 {
				t.Fatalf("alice's event %+v", ev)
			}
		}
		if want := []string{model.EventRecordCreated, model.EventRecordClaimed, model.EventRecordDelivered}; !reflect.DeepEqual(types, want) {
			t.Fatalf("alice's event types %v, want %v", types, want)
		}
		if evs[1].FromState != model.Unread || evs[1].ToState != model.Reading || evs[2].FromState != model.Reading || evs[2].ToState != model.Readed {
			t.Fatalf("transitions %+v", evs)
		}
		if own := recordEvents(e.allEvents(t, e.alice, didAlice)); !reflect.DeepEqual(own, evs) {
			t.Fatalf("owner=self differs: %+v", own)
		}
		bobs := recordEvents(e.allEvents(t, e.admin, didBob))
		if len(bobs) != 1 || bobs[0].Owner != didBob || bobs[0].Type != model.EventRecordCreated {
			t.Fatalf("bob's events %+v", bobs)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name, q, token string, status int, code, field string) badCase {
			return badCase{name: name, method: "GET", path: "/v1/events?" + q, token: token, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			c("negative after", "after=-1", e.admin, 400, inv, "after"),
			c("after past the end of the log", "after=1000000", e.admin, 400, inv, "after"),
			c("after past the end, own events", "after=1000000", e.alice, 400, inv, "after"),
			c("after not a number", "after=first", e.admin, 400, inv, "after"),
			c("limit too big", "limit=1001", e.admin, 400, inv, "limit"),
			c("negative limit", "limit=-1", e.admin, 400, inv, "limit"),
			c("alice reads bob's events", "owner=did:bob", e.alice, 403, wire.CodeForbidden, ""),
			c("owner not a DID", "owner=did%20x%00", e.admin, 400, inv, "owner"),
		})
	})
}

func TestHTTPScheduled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.NowMS()
	p1 := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice,
		wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "in a minute"), DelayMS: ptr(int64(60_000))}))
	p2 := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice,
		wire.PostSendRequest{Msg: chat(didAlice, []string{didBob, didCarol}, "in two"), DeliverAtMS: ptr(now + 120_000)}))
	d1 := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel,
		wire.DispatchRequest{Msg: chat("did:tg:u1", []string{didCarol}, "in ninety s"), DelayMS: ptr(int64(90_000))}))

	t.Run("delayed sends answer with the due time and deliver nothing yet", func(t *testing.T) {
		for _, c := range []struct {
			due   string
			minMS int64
		}{{p1.ScheduledDeliveryTime, now + 60_000}, {p2.ScheduledDeliveryTime, now + 120_000}, {d1.ScheduledDeliveryTime, now + 90_000}} {
			at, err := time.Parse(time.RFC3339Nano, c.due)
			if err != nil || at.UnixMilli() < c.minMS || at.UnixMilli() > c.minMS+10_000 {
				t.Fatalf("scheduled_delivery_time %q (%v), want ~%d", c.due, err, c.minMS)
			}
		}
		if !p1.OK || p1.OutboxRecordID != "" || len(p1.LocalRecipients) != 0 || !d1.OK || len(d1.DeliveredRecipients) != 0 {
			t.Fatalf("delayed results %+v %+v", p1, d1)
		}
		for _, b := range [][2]string{{didBob, "INBOX"}, {didCarol, "INBOX"}, {didAlice, "OUTBOX"}} {
			if n := len(e.syncAll(t, e.admin, b[0], model.BoxKind(b[1]))); n != 0 {
				t.Fatalf("%s %s has %d records before the due time", b[0], b[1], n)
			}
		}
		// The same delayed message again is not scheduled twice, and the
		// answer tells when it will really come: the first due time.
		again := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice,
			wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "in a minute"), DelayMS: ptr(int64(600_000))}))
		if again.MsgID != p1.MsgID || again.ScheduledDeliveryTime != p1.ScheduledDeliveryTime {
			t.Errorf("re-sent delayed message: due %s, but it stays scheduled for %s", again.ScheduledDeliveryTime, p1.ScheduledDeliveryTime)
		}
	})

	t.Run("list with count per recipient", func(t *testing.T) {
		all := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled", e.admin, nil))
		if all.Count != 3 || len(all.Items) != 3 {
			t.Fatalf("scheduled %+v", all)
		}
		want := []struct {
			op, msg    string
			recipients []string
		}{{"post_send", p1.MsgID, []string{didBob}}, {"dispatch", d1.MsgID, []string{didCarol}}, {"post_send", p2.MsgID, []string{didBob, didCarol}}}
		for i, it := range all.Items {
			w := want[i]
			if it.Op != w.op || it.MsgID != w.msg || !equalSet(it.Recipients, w.recipients) || it.ID == 0 || it.CreatedAtMS < now ||
				it.ScheduledDeliveryTime != time.UnixMilli(it.DueAtMS).UTC().Format(time.RFC3339Nano) ||
				(i > 0 && it.DueAtMS < all.Items[i-1].DueAtMS) {
				t.Fatalf("item %d: %+v, want %+v in due order", i, it, w)
			}
		}
		for did, n := range map[string]int64{didBob: 2, didCarol: 2, didAlice: 0} {
			res := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled?recipient="+url.QueryEscape(did), e.admin, nil))
			if res.Count != n || int64(len(res.Items)) != n {
				t.Fatalf("recipient %s: %+v, want %d", did, res, n)
			}
		}
		one := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled?limit=1", e.admin, nil))
		if one.Count != 3 || len(one.Items) != 1 || one.Items[0].MsgID != p1.MsgID {
			t.Fatalf("limit=1: %+v", one)
		}
	})

	t.Run("each lists what it sent", func(t *testing.T) {
		for _, c := range []struct {
			name, q, token, sender string
			want                   []string
		}{
			{"alice", "", e.alice, didAlice, []string{p1.MsgID, p2.MsgID}},
			{"alice naming herself, for carol", "?sender=" + url.QueryEscape(didAlice) + "&recipient=" + url.QueryEscape(didCarol), e.alice, didAlice, []string{p2.MsgID}},
			{"bob, their recipient", "", e.bob, "", nil},
			{"the tunnel, whose dispatch named no ingress", "", e.tunnel, didTunnel, []string{d1.MsgID}},
			{"an admin, for one sender", "?sender=" + url.QueryEscape(didAlice), e.admin, didAlice, []string{p1.MsgID, p2.MsgID}},
		} {
			res := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled"+c.q, c.token, nil))
			var got []string
			for _, it := range res.Items {
				got = append(got, it.MsgID)
				if it.Sender != c.sender {
					t.Errorf("%s: item %+v, want sender %s", c.name, it, c.sender)
				}
			}
			if !slices.Equal(got, c.want) || res.Count != int64(len(c.want)) {
				t.Errorf("%s: %+v, want %v", c.name, res, c.want)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		g := func(name, q, token string, status int, code, field string) badCase {
			return badCase{name: name, method: "GET", path: "/v1/scheduled" + q, token: token, status: status, code: code, field: field}
		}
		f := func(name string, body any, token string, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: "/v1/scheduled/flush", token: token, body: body, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			g("limit too big", "?limit=1001", e.admin, 400, inv, "limit"),
			g("negative limit", "?limit=-1", e.admin, 400, inv, "limit"),
			g("limit not a number", "?limit=many", e.admin, 400, inv, "limit"),
			g("agent lists another's", "?sender="+url.QueryEscape(didBob), e.alice, 403, wire.CodeForbidden, ""),
			g("tunnel lists an agent's", "?sender="+url.QueryEscape(didAlice), e.tunnel, 403, wire.CodeForbidden, ""),
			g("sender not a DID", "?sender=did%20x", e.admin, 400, inv, "sender"),
			g("a misspelt parameter", "?recipeint=did:bob", e.admin, 400, inv, "recipeint"),
			f("flush malformed JSON", `{"recipient"`, e.admin, 400, inv, ""),
			g("recipient not a DID", "?recipient=did%20x", e.admin, 400, inv, "recipient"),
			f("flush recipient not a DID", `{"recipient":"did x"}`, e.admin, 400, inv, "recipient"),
			f("flush unknown field", `{"all":true}`, e.admin, 400, inv, "all"),
			f("flush recipient wrong type", `{"recipient":["did:bob"]}`, e.admin, 400, inv, "recipient"),
			f("agent flushes", `{}`, e.alice, 403, wire.CodeForbidden, ""),
			f("tunnel flushes", nil, e.tunnel, 403, wire.CodeForbidden, ""),
		})
	})

	t.Run("flush", func(t *testing.T) {
		res := ok[wire.FlushResult](t, e.do(t, "POST", "/v1/scheduled/flush", e.admin, wire.FlushRequest{Recipient: didBob}))
		if res.Flushed != 2 {
			t.Fatalf("flush bob: %+v", res)
		}
		bob := e.syncAll(t, e.bob, didBob, model.Inbox)
		if len(bob) != 2 || bob[0].Record.MsgID != p1.MsgID || bob[1].Record.MsgID != p2.MsgID {
			t.Fatalf("bob's inbox after flush, want due order: %+v", bob)
		}
		if n := len(e.syncAll(t, e.alice, didAlice, model.Outbox)); n != 2 {
			t.Fatalf("alice's outbox has %d records", n)
		}
		if left := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled", e.admin, nil)); left.Count != 1 || left.Items[0].MsgID != d1.MsgID {
			t.Fatalf("left %+v", left)
		}
		if res = ok[wire.FlushResult](t, e.do(t, "POST", "/v1/scheduled/flush", e.admin, nil)); res.Flushed != 1 {
			t.Fatalf("flush all: %+v", res)
		}
		carol := e.syncAll(t, e.carol, didCarol, model.Inbox)
		if !reflect.DeepEqual(msgIDsOf(carol), sortedCopy([]string{p2.MsgID, d1.MsgID})) {
			t.Fatalf("carol's inbox %+v", carol)
		}
		if res = ok[wire.FlushResult](t, e.do(t, "POST", "/v1/scheduled/flush", e.admin, `{}`)); res.Flushed != 0 {
			t.Fatalf("nothing left: %+v", res)
		}
	})
}

func TestHTTPTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("created tokens work with their role", func(t *testing.T) {
		dave := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:dave", Role: model.RoleAgent}))
		if !strings.HasPrefix(dave.Token, "mct_") || dave.DID != "did:dave" || dave.Role != model.RoleAgent {
			t.Fatalf("token %+v", dave)
		}
		ps := e.postSend(t, dave.Token, chat("did:dave", []string{didAlice}, "hi from dave"))
		e.record(t, model.RecordID(didAlice, model.Inbox, ps.MsgID, ""))
		wantErr(t, e.do(t, "POST", boxPath(didAlice, model.Inbox, "next"), dave.Token, nil), 403, wire.CodeForbidden, "")
		wantErr(t, e.do(t, "POST", "/v1/dispatch", dave.Token, wire.DispatchRequest{Msg: chat("did:x", []string{didAlice}, "x")}), 403, wire.CodeForbidden, "")

		tun := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:tunnel:slack", Role: model.RoleTunnel}))
		ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", tun.Token, wire.DispatchRequest{Msg: chat("did:slack:u", []string{didBob}, "from slack")}))

		adm := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:ops", Role: model.RoleAdmin}))
		ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled", adm.Token, nil))
		if adm.Token == dave.Token || adm.Token == tun.Token {
			t.Fatal("tokens repeat")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: "/v1/tokens", token: token, body: body, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			c("empty body", e.admin, "", 400, inv, ""),
			c("malformed JSON", e.admin, `{"did":"did:x",`, 400, inv, ""),
			c("unknown field", e.admin, `{"did":"did:x","role":"agent","ttl":1}`, 400, inv, "ttl"),
			c("unknown role", e.admin, `{"did":"did:x","role":"root"}`, 400, inv, "role"),
			c("missing role", e.admin, `{"did":"did:x"}`, 400, inv, "role"),
			c("role wrong type", e.admin, `{"did":"did:x","role":1}`, 400, inv, "role"),
			c("role in upper case", e.admin, `{"did":"did:x","role":"ADMIN"}`, 400, inv, "role"),
			c("missing did", e.admin, `{"role":"agent"}`, 400, inv, "did"),
			c("did with space", e.admin, `{"did":"did x","role":"agent"}`, 400, inv, "did"),
			c("agent creates a token", e.alice, `{"did":"did:alice","role":"admin"}`, 403, wire.CodeForbidden, ""),
			c("tunnel creates a token", e.tunnel, `{"did":"did:x","role":"agent"}`, 403, wire.CodeForbidden, ""),
		})
	})

	t.Run("listed and revoked", func(t *testing.T) {
		mk := func(did string) wire.TokenResult {
			return ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: did, Role: model.RoleAgent}))
		}
		erin1, erin2, fay := mk("did:erin"), mk("did:erin"), mk("did:fay")
		if len(erin1.TokenID) != 16 || erin1.TokenID == erin2.TokenID || strings.Contains(erin1.Token, erin1.TokenID) {
			t.Fatalf("token ids %q %q", erin1.TokenID, erin2.TokenID)
		}
		ids := func(res wire.TokensResult) []string {
			var out []string
			for _, it := range res.Items {
				out = append(out, it.TokenID)
			}
			return out
		}
		// Anyone lists its own; an admin anyone's.
		// (made in the same millisecond they may come in either order)
		if got := ids(ok[wire.TokensResult](t, e.do(t, "GET", "/v1/tokens", erin1.Token, nil))); len(got) != 2 || !slices.Contains(got, erin1.TokenID) || !slices.Contains(got, erin2.TokenID) {
			t.Fatalf("erin's own list %v", got)
		}
		if got := ids(ok[wire.TokensResult](t, e.do(t, "GET", "/v1/tokens?did=did:fay", e.admin, nil))); !slices.Equal(got, []string{fay.TokenID}) {
			t.Fatalf("admin's list of fay's %v", got)
		}
		e.runBad(t, []badCase{
			{name: "erin lists fay's", method: "GET", path: "/v1/tokens?did=did:fay", token: erin1.Token, status: 403, code: wire.CodeForbidden},
			{name: "erin revokes fay's", method: "DELETE", path: "/v1/tokens/" + fay.TokenID, token: erin1.Token, status: 404, code: wire.CodeNotFound},
			{name: "not an id", method: "DELETE", path: "/v1/tokens/" + fay.TokenID[:8], token: e.admin, status: 400, code: wire.CodeInvalid, field: "token_id"},
			{name: "an id in upper case", method: "DELETE", path: "/v1/tokens/" + strings.ToUpper(fay.TokenID), token: e.admin, status: 400, code: wire.CodeInvalid, field: "token_id"},
			{name: "unknown id", method: "DELETE", path: "/v1/tokens/0000000000000000", token: e.admin, status: 404, code: wire.CodeNotFound},
		})
		ok[wire.EventsResult](t, e.do(t, "GET", "/v1/events", fay.Token, nil)) // fay's still works

		// erin revokes her second token with her first; an admin revokes fay's.
		if r := e.do(t, "DELETE", "/v1/tokens/"+erin2.TokenID, erin1.Token, nil); r.status != 204 {
			t.Fatalf("erin revokes her own: %s", r)
		}
		if r := e.do(t, "DELETE", "/v1/tokens/"+fay.TokenID, e.admin, nil); r.status != 204 {
			t.Fatalf("admin revokes fay's: %s", r)
		}
		wantErr(t, e.do(t, "GET", "/v1/events", erin2.Token, nil), 401, wire.CodeUnauthorized, "")
		wantErr(t, e.do(t, "GET", "/v1/events", fay.Token, nil), 401, wire.CodeUnauthorized, "")
		ok[wire.EventsResult](t, e.do(t, "GET", "/v1/events", erin1.Token, nil))
		wantErr(t, e.do(t, "DELETE", "/v1/tokens/"+fay.TokenID, e.admin, nil), 404, wire.CodeNotFound, "")
		if got := ids(ok[wire.TokensResult](t, e.do(t, "GET", "/v1/tokens?did=did:erin", e.admin, nil))); !slices.Equal(got, []string{erin1.TokenID}) {
			t.Fatalf("erin's tokens after the revoke %v", got)
		}
	})
}

func TestHTTPHealthz(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tok := range []string{"", "mct_not_a_token", e.alice} {
		if got := ok[map[string]string](t, e.do(t, "GET", "/healthz", tok, nil)); !reflect.DeepEqual(got, map[string]string{"status": "ok"}) {
			t.Fatalf("healthz %v", got)
		}
	}
}

func TestHTTPMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.dispatch(t, chat("did:tg:u1", []string{didAlice, didBob}, "count me"))
	e.claim(t, e.alice, didAlice, model.Inbox)
	wantErr(t, e.do(t, "POST", "/v1/dispatch", e.tunnel, `{`), 400, wire.CodeInvalid, "")
	ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice,
		wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "later"), DelayMS: ptr(int64(60_000))}))

	r := e.do(t, "GET", "/metrics", "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %q", r.status, r.header.Get("Content-Type"))
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(r.body), "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		"# TYPE msgcenter_records gauge",
		`msgcenter_records{box="INBOX",state="READING"} 1`,
		`msgcenter_records{box="INBOX",state="UNREAD"} 1`,
		"msgcenter_scheduled 1",
		"# TYPE msgcenter_http_request_duration_seconds histogram",
		`msgcenter_http_request_duration_seconds_count{code="200",route="POST /v1/dispatch"} 1`,
		`msgcenter_http_request_duration_seconds_count{code="400",route="POST /v1/dispatch"} 1`,
		`msgcenter_http_request_duration_seconds_count{code="200",route="POST /v1/boxes/{owner}/{box}/next"} 1`,
		`msgcenter_records_created_total{box="INBOX"} 2`,
		`msgcenter_claims_total{box="INBOX"} 1`,
		"msgcenter_scheduled_total 1",
	} {
		if !lines[want] {
			t.Errorf("metrics lack the line %q", want)
		}
	}
	if !strings.Contains(string(r.body), `msgcenter_http_request_duration_seconds_bucket{code="200",route="POST /v1/dispatch",le="+Inf"} 1`) {
		t.Errorf("no latency buckets for dispatch")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", r.body)
	}
}

func TestHTTPPprofAdminOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantErr(t, e.do(t, "GET", "/debug/pprof/heap", "", nil), 401, wire.CodeUnauthorized, "")
	wantErr(t, e.do(t, "GET", "/debug/pprof/heap", e.alice, nil), 403, wire.CodeForbidden, "")
	wantErr(t, e.do(t, "GET", "/debug/pprof/nosuch", e.admin, nil), 404, wire.CodeNotFound, "")
	for _, p := range []string{"heap", "allocs", "goroutine", "mutex", "profile?seconds=1"} {
		r := e.do(t, "GET", "/debug/pprof/"+p, e.admin, nil)
		// A pprof protobuf is gzipped: it starts with the gzip magic.
		if r.status != 200 || len(r.body) < 2 || r.body[0] != 0x1f || r.body[1] != 0x8b {
			t.Errorf("%s: status %d, %d bytes", p, r.status, len(r.body))
		}
	}
}

// TestHTTPCancelScheduled: DELETE /v1/scheduled/{id} by the author; others
// get 404; a bad id is 400.
func TestHTTPCancelScheduled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	delay := int64(3_600_000)
	ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice,
		wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "later"), DelayMS: &delay}))
	list := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled", e.admin, nil))
	if len(list.Items) != 1 {
		t.Fatalf("scheduled: %+v", list)
	}
	path := fmt.Sprintf("/v1/scheduled/%d", list.Items[0].ID)
	inv := wire.CodeInvalid
	e.runBad(t, []badCase{
		{name: "id not a number", method: "DELETE", path: "/v1/scheduled/x", token: e.alice, status: 400, code: inv, field: "id"},
		{name: "id zero", method: "DELETE", path: "/v1/scheduled/0", token: e.alice, status: 400, code: inv, field: "id"},
		{name: "the recipient cancels", method: "DELETE", path: path, token: e.bob, status: 404, code: wire.CodeNotFound},
	})
	got := ok[wire.ScheduledItem](t, e.do(t, "DELETE", path, e.alice, nil))
	if got.ID != list.Items[0].ID || got.MsgID != list.Items[0].MsgID {
		t.Fatalf("cancelled %+v, want %+v", got, list.Items[0])
	}
	if left := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled", e.admin, nil)); left.Count != 0 {
		t.Fatalf("scheduled after the cancel: %+v", left)
	}
	e.runBad(t, []badCase{{name: "a second cancel", method: "DELETE", path: path, token: e.alice, status: 404, code: wire.CodeNotFound}})
}
