package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// validMsg is a message body every bad-input case below starts from.
const validMsg = `{"from":"did:tg:u1","to":["did:alice"],"content":{"content":"hi"}}`

// sendBadCases are the bad bodies shared by dispatch and post_send (sent by
// a caller allowed to use the endpoint, so only the input is wrong).
func sendBadCases(path, token, from string) []badCase {
	msg := strings.Replace(validMsg, "did:tg:u1", from, 1)
	big := strings.Repeat("a", 1<<20+100)      // message over 1 MiB, body under the limit
	huge := strings.Repeat("a", 1<<20+128<<10) // body over the limit
	bigBody := fmt.Sprintf(`{"msg":{"from":%q,"to":["did:alice"],"content":{"content":%q}}}`, from, big)
	hugeBody := fmt.Sprintf(`{"msg":{"from":%q,"to":["did:alice"],"content":{"content":%q}}}`, from, huge)
	c := func(name, body string, status int, code, field string) badCase {
		return badCase{name: name, method: "POST", path: path, token: token, body: body, status: status, code: code, field: field}
	}
	bad := http.StatusBadRequest
	inv := wire.CodeInvalid
	return []badCase{
		c("empty body", "", bad, inv, ""),
		c("malformed JSON", `{"msg":`, bad, inv, ""),
		c("not JSON", `hello`, bad, inv, ""),
		c("JSON array", `[]`, bad, inv, "body"),
		c("trailing data", `{"msg":`+msg+`} {}`, bad, inv, ""),
		c("trailing brace", `{"msg":`+msg+`}}`, bad, inv, ""),
		c("trailing bracket", `{"msg":`+msg+`} ]`, bad, inv, ""),
		c("unknown field", `{"msg":`+msg+`,"bogus":1}`, bad, inv, "bogus"),
		c("delay_ms wrong type", `{"msg":`+msg+`,"delay_ms":"soon"}`, bad, inv, "delay_ms"),
		c("deliver_at_ms wrong type", `{"msg":`+msg+`,"deliver_at_ms":true}`, bad, inv, "deliver_at_ms"),
		c("delay_ms and deliver_at_ms", `{"msg":`+msg+`,"delay_ms":1000,"deliver_at_ms":99999999999999}`, bad, inv, "delay_ms"),
		c("delay_ms too long", `{"msg":`+msg+`,"delay_ms":999999999999999}`, bad, inv, "delay_ms"),
		c("idempotency_key wrong type", `{"msg":`+msg+`,"idempotency_key":7}`, bad, inv, "idempotency_key"),
		c("idempotency_key too long", `{"msg":`+msg+`,"idempotency_key":"`+strings.Repeat("k", 257)+`"}`, bad, inv, "idempotency_key"),
		c("idempotency_key with a control character", `{"msg":`+msg+`,"idempotency_key":"a\u0007b"}`, bad, inv, "idempotency_key"),
		c("missing msg", `{}`, bad, inv, "msg"),
		c("msg null", `{"msg":null}`, bad, inv, "msg"),
		c("msg wrong type", `{"msg":"hi"}`, bad, inv, "msg"),
		c("msg.to wrong type", `{"msg":{"from":"`+from+`","to":"did:alice"}}`, bad, inv, "msg.to"),
		c("msg.created_at_ms wrong type", `{"msg":{"from":"`+from+`","to":["did:alice"],"created_at_ms":"now"}}`, bad, inv, "msg.created_at_ms"),
		c("missing msg.from", `{"msg":{"to":["did:alice"],"content":{"content":"x"}}}`, bad, inv, "msg.from"),
		c("missing msg.to", `{"msg":{"from":"`+from+`","content":{"content":"x"}}}`, bad, inv, "msg.to"),
		c("empty msg.to", `{"msg":{"from":"`+from+`","to":[]}}`, bad, inv, "msg.to"),
		c("recipient with space", `{"msg":{"from":"`+from+`","to":["did:alice","did bob"]}}`, bad, inv, "msg.to[1]"),
		c("unknown kind", `{"msg":{"from":"`+from+`","to":["did:alice"],"kind":"shout"}}`, bad, inv, "msg.kind"),
		c("negative created_at_ms", `{"msg":{"from":"`+from+`","to":["did:alice"],"created_at_ms":-1}}`, bad, inv, "msg.created_at_ms"),
		c("expires before created", `{"msg":{"from":"`+from+`","to":["did:alice"],"created_at_ms":10,"expires_at_ms":5}}`, bad, inv, "msg.expires_at_ms"),
		c("message over 1 MiB", bigBody, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "msg"),
		c("body over the limit", hugeBody, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, ""),
	}
}

func TestHTTPDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("tunnel delivers to each recipient's inbox", func(t *testing.T) {
		m := chat("did:tg:u1", []string{didAlice, didBob, didAlice}, "hello")
		m.CreatedAtMS = 1_700_000_000_123
		ingress := &model.Route{TunnelDID: didTunnel, Platform: "telegram", ChatID: "42"}
		res := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel,
			wire.DispatchRequest{Msg: m, IngressCtx: ingress}))
		wantID, _ := m.ID()
		if !res.OK || res.MsgID != wantID || !strings.HasPrefix(res.MsgID, "cymsg:") {
			t.Fatalf("result %+v, want ok with msg_id %s", res, wantID)
		}
		if !equalSet(res.DeliveredRecipients, []string{didAlice, didBob}) || len(res.DroppedRecipients) != 0 ||
			len(res.DeliveredAgents) != 0 || res.DeliveredGroup != "" || res.ScheduledDeliveryTime != "" {
			t.Fatalf("result %+v", res)
		}
		// A conversation of three: each one's thread names the other two.
		for owner, thread := range map[string]string{didAlice: "dm:did:bob,did:tg:u1", didBob: "dm:did:alice,did:tg:u1"} {
			rec := e.record(t, model.RecordID(owner, model.Inbox, res.MsgID, ""))
			if rec.Owner != owner || rec.BoxKind != model.Inbox || rec.MsgID != res.MsgID || rec.State != model.Unread ||
				rec.Seq != 1 || rec.SortKey != m.CreatedAtMS || rec.ThreadKey != thread || rec.Lease != nil {
				t.Fatalf("record of %s: %+v", owner, rec)
			}
			if rec.Route == nil || !reflect.DeepEqual(*rec.Route, *ingress) {
				t.Fatalf("ingress_ctx not stored on the record: %+v", rec.Route)
			}
		}
		if n := len(e.syncAll(t, e.admin, didCarol, model.Inbox)); n != 0 {
			t.Fatalf("carol got %d records", n)
		}
	})

	t.Run("admin may dispatch too", func(t *testing.T) {
		res := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.admin, wire.DispatchRequest{Msg: chat("did:x", []string{didCarol}, "from admin")}))
		if !res.OK || !equalSet(res.DeliveredRecipients, []string{didCarol}) {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("zero delay is immediate", func(t *testing.T) {
		res := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel,
			wire.DispatchRequest{Msg: chat("did:x", []string{didCarol}, "no delay"), DelayMS: ptr(int64(0))}))
		if res.ScheduledDeliveryTime != "" {
			t.Fatalf("zero delay was scheduled: %+v", res)
		}
		e.record(t, model.RecordID(didCarol, model.Inbox, res.MsgID, ""))
	})

	t.Run("deliver_at_ms in the past is immediate", func(t *testing.T) {
		res := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel,
			wire.DispatchRequest{Msg: chat("did:x", []string{didCarol}, "overdue"), DeliverAtMS: ptr(e.clock.NowMS() - 1000)}))
		if res.ScheduledDeliveryTime != "" || !equalSet(res.DeliveredRecipients, []string{didCarol}) {
			t.Fatalf("past deliver_at_ms: %+v", res)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		e.runBad(t, sendBadCases("/v1/dispatch", e.tunnel, "did:tg:u1"))
	})

	t.Run("agent may not dispatch", func(t *testing.T) {
		e.runBad(t, []badCase{{name: "agent", method: "POST", path: "/v1/dispatch", token: e.alice,
			body: wire.DispatchRequest{Msg: chat(didAlice, []string{didBob}, "sneaky")}, status: 403, code: wire.CodeForbidden}})
	})
}

func TestHTTPIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := chat("did:tg:u1", []string{didAlice}, "once")
	first := e.dispatch(t, m)
	before := e.snap(t)

	t.Run("same message twice", func(t *testing.T) {
		again := e.dispatch(t, m)
		if again.MsgID != first.MsgID {
			t.Fatalf("msg_id %s then %s", first.MsgID, again.MsgID)
		}
		e.assertUnchanged(t, before)
		if n := len(e.syncAll(t, e.alice, didAlice, model.Inbox)); n != 1 {
			t.Fatalf("alice has %d records, want 1", n)
		}
	})

	t.Run("same post_send twice", func(t *testing.T) {
		pm := chat(didAlice, []string{didBob}, "out once")
		p1 := e.postSend(t, e.alice, pm)
		snap := e.snap(t)
		p2 := e.postSend(t, e.alice, pm)
		if p1.MsgID != p2.MsgID || p1.OutboxRecordID != p2.OutboxRecordID {
			t.Fatalf("first %+v, second %+v", p1, p2)
		}
		e.assertUnchanged(t, snap)
	})

	t.Run("idempotency key", func(t *testing.T) {
		req := wire.DispatchRequest{Msg: chat("did:tg:u1", []string{didBob}, "keyed"), IdempotencyKey: "k-1"}
		r1 := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel, req))
		snap := e.snap(t)
		r2 := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel, req))
		if r1.MsgID != r2.MsgID {
			t.Fatalf("same key and message gave %s then %s", r1.MsgID, r2.MsgID)
		}
		e.assertUnchanged(t, snap)
		other := wire.DispatchRequest{Msg: chat("did:tg:u1", []string{didBob}, "different"), IdempotencyKey: "k-1"}
		e.runBad(t, []badCase{
			{name: "dispatch key reused", method: "POST", path: "/v1/dispatch", token: e.tunnel, body: other,
				status: http.StatusConflict, code: wire.CodeConflict, field: "idempotency_key"},
			{name: "delayed dispatch key reused", method: "POST", path: "/v1/dispatch", token: e.tunnel,
				body:   wire.DispatchRequest{Msg: other.Msg, IdempotencyKey: "k-1", DelayMS: ptr(int64(60_000))},
				status: http.StatusConflict, code: wire.CodeConflict, field: "idempotency_key"},
		})
	})

	t.Run("post_send idempotency key", func(t *testing.T) {
		req := wire.PostSendRequest{Msg: chat(didAlice, []string{didCarol}, "keyed out"), IdempotencyKey: "p-1"}
		ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice, req))
		// Keys are scoped to the caller: bob's "p-1" is his own.
		ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.bob,
			wire.PostSendRequest{Msg: chat(didBob, []string{didCarol}, "bob's own"), IdempotencyKey: "p-1"}))
		e.runBad(t, []badCase{{name: "key reused", method: "POST", path: "/v1/post_send", token: e.alice,
			body:   wire.PostSendRequest{Msg: chat(didAlice, []string{didCarol}, "other"), IdempotencyKey: "p-1"},
			status: http.StatusConflict, code: wire.CodeConflict, field: "idempotency_key"}})
	})
}

func TestHTTPPostSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("local recipients", func(t *testing.T) {
		m := chat(didAlice, []string{didBob, didCarol}, "hi both")
		res := e.postSend(t, e.alice, m)
		wantID, _ := m.ID()
		if !res.OK || res.MsgID != wantID || res.OutboxRecordID != model.RecordID(didAlice, model.Outbox, wantID, "") ||
			!equalSet(res.LocalRecipients, []string{didBob, didCarol}) || len(res.Deliveries) != 0 || len(res.DroppedRecipients) != 0 {
			t.Fatalf("result %+v", res)
		}
		out := e.record(t, res.OutboxRecordID)
		if out.Owner != didAlice || out.BoxKind != model.Outbox || out.State != model.Sent || out.ThreadKey != "dm:did:bob,did:carol" {
			t.Fatalf("outbox record %+v", out)
		}
		// Each one's thread is everyone else in the conversation.
		for to, thread := range map[string]string{didBob: "dm:did:alice,did:carol", didCarol: "dm:did:alice,did:bob"} {
			rec := e.record(t, model.RecordID(to, model.Inbox, wantID, ""))
			if rec.State != model.Unread || rec.Owner != to || rec.ThreadKey != thread {
				t.Fatalf("inbox record of %s: %+v, want thread %s", to, rec, thread)
			}
		}
	})

	t.Run("admin may send as anyone", func(t *testing.T) {
		res := e.postSend(t, e.admin, chat(didBob, []string{didAlice}, "admin as bob"))
		if res.OutboxRecordID != model.RecordID(didBob, model.Outbox, res.MsgID, "") {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("meta keys that differ in case are two keys", func(t *testing.T) {
		body := `{"msg":{"from":"` + didAlice + `","to":["` + didBob + `"],"content":{"content":"m"},"meta":{"k":1,"K":2}}}`
		res := ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", e.alice, body))
		var got struct{ Meta map[string]int }
		if err := json.Unmarshal(e.do(t, "GET", "/v1/messages/"+res.MsgID, e.alice, nil).body, &got); err != nil || got.Meta["k"] != 1 || got.Meta["K"] != 2 {
			t.Fatalf("stored meta %v, %v; want both keys", got.Meta, err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		cases := sendBadCases("/v1/post_send", e.alice, didAlice)
		for i := range cases {
			if cases[i].field == "msg.from" {
				// Only an admin gets as far as validation: to an agent a
				// message without from is not its own (see below).
				cases[i].token = e.admin
			}
		}
		cases = append(cases,
			badCase{name: "agent without msg.from", method: "POST", path: "/v1/post_send", token: e.alice,
				body: `{"msg":{"to":["did:bob"]}}`, status: 403, code: wire.CodeForbidden},
			badCase{name: "send_ctx unknown field", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":` + strings.Replace(validMsg, "did:tg:u1", didAlice, 1) + `,"send_ctx":{"tunnel":"x"}}`,
				status: 400, code: wire.CodeInvalid, field: "send_ctx.tunnel"},
			// send_ctx.mode is stored on every TUNNEL_OUTBOX record the
			// send makes, as a route's mode is.
			badCase{name: "send_ctx.mode with a control character", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":` + strings.Replace(validMsg, "did:tg:u1", didAlice, 1) + `,"send_ctx":{"mode":"a\u0001b"}}`,
				status: 400, code: wire.CodeInvalid, field: "send_ctx.mode"},
			badCase{name: "send_ctx.mode too long", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":` + strings.Replace(validMsg, "did:tg:u1", didAlice, 1) + `,"send_ctx":{"mode":"` + strings.Repeat("m", 513) + `"}}`,
				status: 400, code: wire.CodeInvalid, field: "send_ctx.mode"},
			badCase{name: "send_ctx.tunnel_did not a DID", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":` + strings.Replace(validMsg, "did:tg:u1", didAlice, 1) + `,"send_ctx":{"tunnel_did":"a b"}}`,
				status: 400, code: wire.CodeInvalid, field: "send_ctx.tunnel_did"},
			badCase{name: "send_ctx.all_routes wrong type", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":` + strings.Replace(validMsg, "did:tg:u1", didAlice, 1) + `,"send_ctx":{"all_routes":"yes"}}`,
				status: 400, code: wire.CodeInvalid, field: "send_ctx.all_routes"},
			// encoding/json would store these as U+FFFD, under an id the
			// sender cannot work out from what it sent.
			badCase{name: "a lone surrogate in the content", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":{"from":"` + didAlice + `","to":["did:bob"],"content":{"content":"\ud800x"}}}`,
				status: 400, code: wire.CodeInvalid},
			badCase{name: "a lone surrogate in a recipient", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":{"from":"` + didAlice + `","to":["did:bob\udc00"]}}`,
				status: 400, code: wire.CodeInvalid},
			badCase{name: "bytes that are not UTF-8", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   "{\"msg\":{\"from\":\"" + didAlice + "\",\"to\":[\"did:bob\"],\"content\":{\"content\":\"\xff\"}}}",
				status: 400, code: wire.CodeInvalid},
			// encoding/json keeps the last of a key given twice: a reader of
			// the first saw another message than the one stored.
			badCase{name: "msg given twice", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":{"from":"` + didAlice + `","to":["did:bob"]},"msg":{"from":"did:carol"}}`,
				status: 400, code: wire.CodeInvalid, field: "msg"},
			badCase{name: "msg.to given twice", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":{"from":"` + didAlice + `","to":["did:bob"],"to":["did:carol"]}}`,
				status: 400, code: wire.CodeInvalid, field: "msg.to"},
			// encoding/json fills a field from either spelling: the last wins.
			badCase{name: "msg.from and msg.From", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":{"from":"` + didAlice + `","to":["did:bob"],"From":"did:carol"}}`,
				status: 400, code: wire.CodeInvalid, field: "msg.From"},
			badCase{name: "a meta key given twice", method: "POST", path: "/v1/post_send", token: e.alice,
				body:   `{"msg":{"from":"` + didAlice + `","to":["did:bob"],"meta":{"k":1,"\u006b":2}}}`,
				status: 400, code: wire.CodeInvalid, field: "msg.meta.k"},
		)
		e.runBad(t, cases)
	})

	t.Run("acting for someone else", func(t *testing.T) {
		e.setSubscribers(t, didGroup2, didBob)
		e.runBad(t, []badCase{
			{name: "from bob", method: "POST", path: "/v1/post_send", token: e.alice,
				body: wire.PostSendRequest{Msg: chat(didBob, []string{didCarol}, "forged")}, status: 403, code: wire.CodeForbidden},
			{name: "tunnel as alice", method: "POST", path: "/v1/post_send", token: e.tunnel,
				body: wire.PostSendRequest{Msg: chat(didAlice, []string{didCarol}, "forged")}, status: 403, code: wire.CodeForbidden},
			// source names a group message's author; on a direct message it
			// must not let alice put words in bob's mouth.
			{name: "from bob with source alice", method: "POST", path: "/v1/post_send", token: e.alice,
				body: wire.PostSendRequest{Msg: &message.Message{From: didBob, Source: didAlice, To: []string{didCarol},
					Content: message.Content{Content: "forged via source"}}}, status: 403, code: wire.CodeForbidden},
			// alice is not a member of group 2.
			{name: "into a group she is not in", method: "POST", path: "/v1/post_send", token: e.alice,
				body: wire.PostSendRequest{Msg: &message.Message{From: didGroup2, Source: didAlice, Kind: message.KindGroupMsg,
					Content: message.Content{Content: "intruder"}}}, status: 403, code: wire.CodeForbidden},
		})
	})
}

func TestHTTPGetMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := chat(didAlice, []string{didBob}, "read me")
	m.Meta = []byte(`{"n":1.50,"b":[true]}`)
	res := e.postSend(t, e.alice, m)

	for _, tc := range []struct {
		who, token string
	}{{"author", e.alice}, {"recipient", e.bob}, {"admin", e.admin}} {
		t.Run(tc.who, func(t *testing.T) {
			r := e.do(t, "GET", "/v1/messages/"+esc(res.MsgID), tc.token, nil)
			if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Fatalf("got %s", r)
			}
			sum := sha256.Sum256(r.body)
			if got := message.IDPrefix + hex.EncodeToString(sum[:]); got != res.MsgID {
				t.Fatalf("body hashes to %s, want %s: %s", got, res.MsgID, r.body)
			}
			if contentOf(t, r.body) != "read me" {
				t.Fatalf("body %s", r.body)
			}
		})
	}
	t.Run("group member who joined later", func(t *testing.T) {
		e.setSubscribers(t, didGroup, didBob)
		gm := e.postSend(t, e.bob, groupMsg(didGroup, didBob, "before carol joined")).MsgID
		e.setSubscribers(t, didGroup, didBob, didCarol)
		// carol may read the group's inbox, body included ...
		rec := ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(model.RecordID(didGroup, model.GroupInbox, gm, ""), ""), e.carol, nil))
		if contentOf(t, rec.Msg) != "before carol joined" {
			t.Fatalf("group record %+v", rec)
		}
		// ... so the message endpoint must not deny that the message exists.
		if r := e.do(t, "GET", "/v1/messages/"+esc(gm), e.carol, nil); r.status != http.StatusOK || contentOf(t, r.body) != "before carol joined" {
			t.Fatalf("a member reading a group message: %s", r)
		}
	})

	e.runBad(t, []badCase{
		// Someone holding no record of it gets the same answer as for a
		// missing message: existence is not revealed.
		{name: "not a party", method: "GET", path: "/v1/messages/" + esc(res.MsgID), token: e.carol, status: 404, code: wire.CodeNotFound},
		{name: "unknown id", method: "GET", path: "/v1/messages/cymsg:00", token: e.admin, status: 404, code: wire.CodeNotFound},
	})
}
