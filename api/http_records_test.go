package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestHTTPGetRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sent := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "get me"))
	id := model.RecordID(didBob, model.Inbox, sent.MsgID, "")

	got := ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(id, ""), e.bob, nil))
	if got.Record.RecordID != id || got.Record.Owner != didBob || got.Record.MsgID != sent.MsgID ||
		got.Record.State != model.Unread || contentOf(t, got.Msg) != "get me" {
		t.Fatalf("record %+v", got)
	}
	bare := ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(id, "")+"?with_object=false", e.bob, nil))
	if bare.Msg != nil || bare.Record.RecordID != id {
		t.Fatalf("with_object=false: %+v", bare)
	}
	out := ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(sent.OutboxRecordID, ""), e.alice, nil))
	if out.Record.BoxKind != model.Outbox || out.Record.State != model.Sent {
		t.Fatalf("outbox record %+v", out.Record)
	}

	e.runBad(t, []badCase{
		{name: "with_object not a bool", method: "GET", path: recPath(id, "") + "?with_object=perhaps", token: e.bob, status: 400, code: wire.CodeInvalid, field: "with_object"},
		{name: "unknown record", method: "GET", path: recPath("cyrec:0000", ""), token: e.admin, status: 404, code: wire.CodeNotFound},
		{name: "alice reads bob's record", method: "GET", path: recPath(id, ""), token: e.alice, status: 404, code: wire.CodeNotFound},
		{name: "carol reads alice's outbox", method: "GET", path: recPath(sent.OutboxRecordID, ""), token: e.carol, status: 404, code: wire.CodeNotFound},
	})
}

func TestHTTPSetState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setRoutes(t, didExt, extRoute)
	sent := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "state"))
	id := model.RecordID(didBob, model.Inbox, sent.MsgID, "")
	tun := e.tunnelRecord(t, "outbound")
	path := recPath(id, "state")

	set := func(t *testing.T, token, id string, st model.State) wire.RecordWithMsg {
		t.Helper()
		return ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(id, "state"), token, wire.StateRequest{NewState: st, Reason: "test"}))
	}

	t.Run("allowed transitions", func(t *testing.T) {
		got := set(t, e.bob, id, "readed") // any letter case
		if got.Record.State != model.Readed || contentOf(t, got.Msg) != "state" {
			t.Fatalf("set READED: %+v", got)
		}
		if rec := e.record(t, id); rec.State != model.Readed {
			t.Fatalf("stored %+v", rec)
		}
		if got = set(t, e.bob, id, model.Unread); got.Record.State != model.Unread {
			t.Fatalf("back to UNREAD: %+v", got.Record)
		}
		if got = set(t, e.bob, id, model.Reading); got.Record.State != model.Reading || got.Record.Lease == nil || got.Record.Lease.Holder != didBob {
			t.Fatalf("READING via state carries a lease: %+v", got.Record)
		}
		lease := got.Record.Lease.ID
		got = ok[wire.RecordWithMsg](t, e.do(t, "POST", path, e.bob, wire.StateRequest{NewState: model.Readed, LeaseID: lease}))
		if got.Record.State != model.Readed || got.Record.Lease != nil {
			t.Fatalf("READED with the lease: %+v", got.Record)
		}
		if got = set(t, e.admin, tun, model.Archived); got.Record.State != model.Archived {
			t.Fatalf("admin archives the tunnel record: %+v", got.Record)
		}
		if got = set(t, e.tunnel, tun, model.Wait); got.Record.State != model.Wait {
			t.Fatalf("tunnel un-archives: %+v", got.Record)
		}
	})

	t.Run("bad input and refused transitions", func(t *testing.T) {
		deleted := model.RecordID(didAlice, model.Outbox, sent.MsgID, "")
		set(t, e.alice, deleted, model.Deleted)
		held := e.claim(t, e.tunnel, didTunnel, model.TunnelOutbox).Record
		c := func(name, path, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: path, token: token, body: body, status: status, code: code, field: field}
		}
		inv, conflict := wire.CodeInvalid, wire.CodeInvalidTransition
		e.runBad(t, []badCase{
			c("empty body", path, e.bob, "", 400, inv, ""),
			c("malformed JSON", path, e.bob, `{"new_state"`, 400, inv, ""),
			c("missing new_state", path, e.bob, `{}`, 400, inv, "new_state"),
			c("unknown new_state", path, e.bob, `{"new_state":"SHREDDED"}`, 400, inv, "new_state"),
			c("new_state wrong type", path, e.bob, `{"new_state":5}`, 400, inv, "new_state"),
			c("unknown field", path, e.bob, `{"new_state":"UNREAD","why":"x"}`, 400, inv, "why"),
			c("READED to READING", path, e.bob, wire.StateRequest{NewState: model.Reading}, 409, conflict, "new_state"),
			c("inbox state on a tunnel record", recPath(held.RecordID, "state"), e.tunnel, wire.StateRequest{NewState: model.Readed}, 409, conflict, "new_state"),
			c("SENDING to UNREAD", recPath(held.RecordID, "state"), e.tunnel, wire.StateRequest{NewState: model.Unread}, 409, conflict, "new_state"),
			c("DELETED is final", recPath(deleted, "state"), e.alice, wire.StateRequest{NewState: model.Archived}, 409, conflict, "new_state"),
			c("stale lease", recPath(held.RecordID, "state"), e.tunnel, wire.StateRequest{NewState: model.Sent, LeaseID: "lease:nope"}, 409, wire.CodeLeaseLost, "lease_id"),
			c("unknown record", recPath("cyrec:ffff", "state"), e.admin, wire.StateRequest{NewState: model.Readed}, 404, wire.CodeNotFound, ""),
			c("alice changes bob's record", path, e.alice, wire.StateRequest{NewState: model.Unread}, 404, wire.CodeNotFound, ""),
			c("bob changes the tunnel's record", recPath(held.RecordID, "state"), e.bob, wire.StateRequest{NewState: model.Sent}, 404, wire.CodeNotFound, ""),
		})
	})
}

func TestHTTPReportDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setRoutes(t, didExt, extRoute)
	claim := func(t *testing.T, want string) wire.RecordWithMsg {
		t.Helper()
		got := e.claim(t, e.tunnel, didTunnel, model.TunnelOutbox)
		if got.Record.RecordID != want || got.Record.State != model.Sending {
			t.Fatalf("claimed %+v, want %s", got.Record, want)
		}
		return got
	}

	t.Run("ok is SENT", func(t *testing.T) {
		id := e.tunnelRecord(t, "deliver ok")
		lease := claim(t, id).Record.Lease.ID
		before := e.clock.NowMS()
		got := ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(id, "delivery"), e.tunnel,
			wire.DeliveryRequest{LeaseID: lease, Result: &wire.DeliveryResult{OK: true, ExternalMsgID: "tg:777"}}))
		r := got.Record
		if r.State != model.Sent || r.Lease != nil || r.Delivery.ExternalMsgID != "tg:777" || r.Delivery.Attempts != 1 ||
			r.Delivery.DeliveredAtMS < before || r.Delivery.NextRetryAtMS != 0 || contentOf(t, got.Msg) != "deliver ok" {
			t.Fatalf("after ok: %+v", r)
		}
		if stored := e.record(t, id); stored.State != model.Sent || stored.Delivery.ExternalMsgID != "tg:777" {
			t.Fatalf("stored %+v", stored)
		}
	})

	t.Run("retryable failures back off, then DEAD", func(t *testing.T) {
		id := e.tunnelRecord(t, "flaky")
		for attempt, backoff := range []time.Duration{time.Second, 2 * time.Second} {
			claim(t, id)
			now := e.clock.NowMS()
			r := e.deliver(t, e.tunnel, id, wire.DeliveryResult{Retryable: true, ErrorCode: "rate_limited", ErrorMessage: "slow down"})
			d := r.Delivery
			if r.State != model.Wait || r.Lease != nil || d.Attempts != attempt+1 || d.ErrorCode != "rate_limited" ||
				d.LastError != "rate_limited: slow down" || d.NextRetryAtMS < now+backoff.Milliseconds() ||
				d.NextRetryAtMS > e.clock.NowMS()+backoff.Milliseconds() {
				t.Fatalf("attempt %d: %+v, want WAIT retrying %v after %d", attempt+1, r, backoff, now)
			}
			if left := d.NextRetryAtMS - e.clock.NowMS(); left > 500 {
				if res := e.do(t, "POST", boxPath(didTunnel, model.TunnelOutbox, "next"), e.tunnel, nil); res.status != http.StatusNoContent {
					t.Fatalf("claimed before next_retry_at_ms: %s", res)
				}
			}
			e.clock.Advance(backoff + 100*time.Millisecond)
		}
		claim(t, id)
		r := e.deliver(t, e.tunnel, id, wire.DeliveryResult{Retryable: true, ErrorCode: "rate_limited"})
		if r.State != model.Dead || r.Delivery.Attempts != 3 || r.Delivery.NextRetryAtMS != 0 {
			t.Fatalf("after max attempts: %+v", r)
		}
		dead := ok[wire.ListResult](t, e.do(t, "GET", boxPath(didTunnel, model.TunnelOutbox, "records")+"?state=DEAD", e.tunnel, nil))
		if len(dead.Items) != 1 || dead.Items[0].Record.RecordID != id {
			t.Fatalf("DEAD listing %+v", dead.Items)
		}
	})

	t.Run("retry_after_ms and non-retryable", func(t *testing.T) {
		id := e.tunnelRecord(t, "retry later")
		claim(t, id)
		now := e.clock.NowMS()
		r := e.deliver(t, e.tunnel, id, wire.DeliveryResult{Retryable: true, RetryAfterMS: 30_000, ErrorCode: "429"})
		if r.State != model.Wait || r.Delivery.NextRetryAtMS < now+30_000 || r.Delivery.RetryAfterMS != 30_000 {
			t.Fatalf("retry_after_ms not honoured: %+v", r)
		}
		e.clock.Advance(31 * time.Second)
		claim(t, id)
		if r = e.deliver(t, e.tunnel, id, wire.DeliveryResult{ErrorCode: "blocked_by_user"}); r.State != model.Dead || r.Delivery.Attempts != 2 {
			t.Fatalf("non-retryable failure: %+v", r)
		}
	})

	t.Run("inbox ack is READED", func(t *testing.T) {
		e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "ack me"))
		held := e.claim(t, e.alice, didAlice, model.Inbox)
		if r := e.deliver(t, e.alice, held.Record.RecordID, wire.DeliveryResult{OK: true}); r.State != model.Readed {
			t.Fatalf("inbox ack: %+v", r)
		}
	})

	t.Run("with_object false leaves the body out", func(t *testing.T) {
		e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "bare ack"))
		held := e.claim(t, e.alice, didAlice, model.Inbox).Record
		res := e.do(t, "POST", recPath(held.RecordID, "delivery"), e.alice, `{"result":{"ok":true},"with_object":false,"lease_id":"`+held.Lease.ID+`"}`)
		got := ok[wire.RecordWithMsg](t, res)
		if got.Record.State != model.Readed || got.Msg != nil || strings.Contains(string(res.body), "bare ack") {
			t.Fatalf("ack with with_object false: %s", res)
		}
		res = e.do(t, "POST", recPath(held.RecordID, "state"), e.alice, `{"new_state":"UNREAD","with_object":false}`)
		if got := ok[wire.RecordWithMsg](t, res); got.Record.State != model.Unread || got.Msg != nil {
			t.Fatalf("state change with with_object false: %s", res)
		}
		res = e.do(t, "POST", recPath(held.RecordID, "state"), e.alice, `{"new_state":"READED","with_object":"no"}`)
		if res.status != 400 || !strings.Contains(string(res.body), `"with_object"`) {
			t.Fatalf("with_object not a bool: %s", res)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		waiting := e.tunnelRecord(t, "waiting")
		held := e.tunnelRecord(t, "held")
		claim(t, waiting) // oldest first: take waiting, put it back, then take held
		e.deliver(t, e.tunnel, waiting, wire.DeliveryResult{Retryable: true, RetryAfterMS: 3_600_000})
		claim(t, held)
		path := recPath(held, "delivery")
		c := func(name, path, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: path, token: token, body: body, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			c("empty body", path, e.tunnel, "", 400, inv, ""),
			c("malformed JSON", path, e.tunnel, `{"result":{`, 400, inv, ""),
			c("missing result", path, e.tunnel, `{}`, 400, inv, "result"),
			c("result wrong type", path, e.tunnel, `{"result":true}`, 400, inv, "result"),
			c("ok wrong type", path, e.tunnel, `{"result":{"ok":"yes"}}`, 400, inv, "result.ok"),
			c("retry_after_ms wrong type", path, e.tunnel, `{"result":{"retryable":true,"retry_after_ms":"1s"}}`, 400, inv, "result.retry_after_ms"),
			c("negative retry_after_ms", path, e.tunnel, `{"result":{"ok":false,"retryable":true,"retry_after_ms":-1}}`, 400, inv, "result.retry_after_ms"),
			c("retry_after_ms over 7 days", path, e.tunnel, `{"result":{"ok":false,"retryable":true,"retry_after_ms":604800001}}`, 400, inv, "result.retry_after_ms"),
			c("a success with an error_code", path, e.tunnel, `{"result":{"ok":true,"error_code":"rate_limited"}}`, 400, inv, "result.error_code"),
			c("a success with retry_after_ms", path, e.tunnel, `{"result":{"ok":true,"retry_after_ms":1000}}`, 400, inv, "result.retry_after_ms"),
			c("a failure with an external_msg_id", path, e.tunnel, `{"result":{"ok":false,"external_msg_id":"tg:1"}}`, 400, inv, "result.external_msg_id"),
			c("retry_after_ms that would overflow", path, e.tunnel, `{"result":{"ok":false,"retryable":true,"retry_after_ms":9223372036854775}}`, 400, inv, "result.retry_after_ms"),
			c("ok left out", path, e.tunnel, `{"result":{"external_msg_id":"tg-123"}}`, 400, inv, "result.ok"),
			c("empty result", path, e.tunnel, `{"result":{}}`, 400, inv, "result.ok"),
			c("null ok", path, e.tunnel, `{"result":{"ok":null,"retryable":true}}`, 400, inv, "result.ok"),
			c("ok twice", path, e.tunnel, `{"result":{"ok":true,"ok":false}}`, 400, inv, "result.ok"),
			c("unknown field", path, e.tunnel, `{"result":{"ok":true},"attempt":2}`, 400, inv, "attempt"),
			c("stale lease", path, e.tunnel, `{"result":{"ok":true},"lease_id":"lease:old"}`, 409, wire.CodeLeaseLost, "lease_id"),
			c("record not held", recPath(waiting, "delivery"), e.tunnel, `{"result":{"ok":true}}`, 409, wire.CodeInvalidTransition, ""),
			c("unknown record", recPath("cyrec:abcd", "delivery"), e.admin, `{"result":{"ok":true}}`, 404, wire.CodeNotFound, ""),
			c("alice reports for the tunnel", path, e.alice, `{"result":{"ok":true}}`, 404, wire.CodeNotFound, ""),
		})
	})
}

func TestHTTPExtendLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setRoutes(t, didExt, extRoute)
	id := e.tunnelRecord(t, "long job")
	waiting := e.tunnelRecord(t, "not claimed")
	held := ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(didTunnel, model.TunnelOutbox, "next"), e.tunnel, wire.NextRequest{LeaseMS: 120_000})).Record
	if held.RecordID != id {
		t.Fatalf("claimed %s, want %s", held.RecordID, id)
	}
	path := recPath(id, "lease")

	t.Run("extend", func(t *testing.T) {
		now := e.clock.NowMS()
		got := ok[wire.RecordWithMsg](t, e.do(t, "POST", path, e.tunnel, wire.LeaseRequest{LeaseMS: 600_000, LeaseID: held.Lease.ID}))
		l := got.Record.Lease
		if got.Record.State != model.Sending || l == nil || l.ID != held.Lease.ID || l.ExpiresAtMS < now+595_000 || l.ExpiresAtMS > now+605_000 {
			t.Fatalf("extended %+v lease %+v", got.Record, l)
		}
		now = e.clock.NowMS()
		e.runBad(t, []badCase{{name: "extension without the lease", method: "POST", path: path, token: e.tunnel,
			status: 400, code: wire.CodeInvalid, field: "lease_id"}})
		got = ok[wire.RecordWithMsg](t, e.do(t, "POST", path, e.tunnel, wire.LeaseRequest{LeaseID: held.Lease.ID})) // the default lease
		if l = got.Record.Lease; l == nil || l.ExpiresAtMS < now+295_000 || l.ExpiresAtMS > now+305_000 {
			t.Fatalf("default extension %+v", l)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name, path, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: path, token: token, body: body, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			c("malformed JSON", path, e.tunnel, `{"lease_ms":}`, 400, inv, ""),
			c("unknown field", path, e.tunnel, `{"ttl":5}`, 400, inv, "ttl"),
			c("lease_ms wrong type", path, e.tunnel, `{"lease_ms":"1m"}`, 400, inv, "lease_ms"),
			c("negative lease_ms", path, e.tunnel, `{"lease_ms":-1}`, 400, inv, "lease_ms"),
			c("lease_ms over the maximum", path, e.tunnel, `{"lease_ms":43200001}`, 400, inv, "lease_ms"),
			c("lease_ms that would overflow", path, e.tunnel, `{"lease_ms":9999999999999}`, 400, inv, "lease_ms"),
			c("stale lease", path, e.tunnel, `{"lease_id":"lease:gone"}`, 409, wire.CodeLeaseLost, "lease_id"),
			c("not held", recPath(waiting, "lease"), e.tunnel, `{}`, 409, wire.CodeInvalidTransition, ""),
			c("unknown record", recPath("cyrec:1", "lease"), e.tunnel, `{}`, 404, wire.CodeNotFound, ""),
			c("alice extends the tunnel's lease", path, e.alice, `{}`, 404, wire.CodeNotFound, ""),
		})
	})
}

func TestHTTPRedriveRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setRoutes(t, didExt, extRoute)
	dead := e.deadRecord(t, "dead one")
	alive := e.tunnelRecord(t, "alive")
	e.dispatch(t, chat("did:tg:u1", []string{didBob}, "to bury"))
	held := e.claim(t, e.bob, didBob, model.Inbox).Record
	inbox := held.RecordID
	ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(inbox, "state"), e.bob, wire.StateRequest{NewState: model.Dead, LeaseID: held.Lease.ID}))

	t.Run("bad input", func(t *testing.T) {
		c := func(name, path, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: path, token: token, body: body, status: status, code: code, field: field}
		}
		e.runBad(t, []badCase{
			c("unknown field", recPath(dead, "redrive"), e.tunnel, `{"force":true}`, 400, wire.CodeInvalid, "force"),
			c("malformed JSON", recPath(dead, "redrive"), e.tunnel, `{`, 400, wire.CodeInvalid, ""),
			c("not DEAD", recPath(alive, "redrive"), e.tunnel, nil, 409, wire.CodeInvalidTransition, ""),
			c("unknown record", recPath("cyrec:2", "redrive"), e.admin, nil, 404, wire.CodeNotFound, ""),
			c("alice redrives the tunnel's record", recPath(dead, "redrive"), e.alice, nil, 404, wire.CodeNotFound, ""),
			c("tunnel redrives bob's record", recPath(inbox, "redrive"), e.tunnel, nil, 404, wire.CodeNotFound, ""),
		})
	})

	t.Run("redrive", func(t *testing.T) {
		got := ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(dead, "redrive"), e.tunnel, nil))
		if got.Record.State != model.Wait || got.Record.Delivery.Attempts != 0 || contentOf(t, got.Msg) != "dead one" {
			t.Fatalf("redriven %+v", got.Record)
		}
		got = ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(inbox, "redrive"), e.bob, `{}`))
		if got.Record.State != model.Unread {
			t.Fatalf("redriven inbox record %+v", got.Record)
		}
		if rec := e.claim(t, e.tunnel, didTunnel, model.TunnelOutbox).Record; rec.RecordID != dead {
			t.Fatalf("the redriven record is claimable again first: got %s", rec.RecordID)
		}
	})
}

// An expired lease returns the record (the reaper runs inside the server);
// the old holder's late report is then refused as lease_lost, whether the
// record waits, was claimed again, or is done.
func TestHTTPLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setRoutes(t, didExt, extRoute)
	id := e.tunnelRecord(t, "slow worker")
	old := ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(didTunnel, model.TunnelOutbox, "next"), e.tunnel, wire.NextRequest{LeaseMS: 150})).Record
	if old.RecordID != id {
		t.Fatalf("claimed %s", old.RecordID)
	}
	var rec model.Record
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if rec = e.record(t, id); rec.State != model.Sending || time.Now().After(deadline) {
			break
		}
	}
	if rec.State != model.Wait || rec.Lease != nil || rec.Delivery.Attempts != 1 || rec.Delivery.ErrorCode != "lease_expired" || rec.Delivery.NextRetryAtMS == 0 {
		t.Fatalf("after the lease expired: %+v", rec)
	}
	late := wire.DeliveryRequest{LeaseID: old.Lease.ID, Result: &wire.DeliveryResult{OK: true}}
	e.runBad(t, []badCase{{name: "late report while waiting", method: "POST", path: recPath(id, "delivery"), token: e.tunnel,
		body: late, status: 409, code: wire.CodeLeaseLost, field: "lease_id"}})
	e.clock.Advance(2 * time.Second)
	again := e.claim(t, e.tunnel, didTunnel, model.TunnelOutbox).Record
	if again.RecordID != id || again.Lease.ID == old.Lease.ID {
		t.Fatalf("re-claim %+v", again)
	}
	e.runBad(t, []badCase{
		{name: "late report after a new claim", method: "POST", path: recPath(id, "delivery"), token: e.tunnel,
			body: late, status: 409, code: wire.CodeLeaseLost, field: "lease_id"},
		{name: "late lease extension", method: "POST", path: recPath(id, "lease"), token: e.tunnel,
			body: wire.LeaseRequest{LeaseID: old.Lease.ID}, status: 409, code: wire.CodeLeaseLost, field: "lease_id"},
	})
	if r := e.deliver(t, e.tunnel, id, wire.DeliveryResult{OK: true, ExternalMsgID: "x"}); r.State != model.Sent || r.Delivery.Attempts != 2 {
		t.Fatalf("the new holder's ack: %+v", r)
	}
	e.runBad(t, []badCase{{name: "late report after the new holder's ack", method: "POST", path: recPath(id, "delivery"), token: e.tunnel,
		body: late, status: 409, code: wire.CodeLeaseLost, field: "lease_id"}})
}

// TestHTTPAckNext: a state change or a delivery report with next also
// claims the box's next record (JetStream's AckNext); bad next input is
// refused with the field named and changes nothing.
func TestHTTPAckNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "one"))
	second := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "two"))
	held := e.claim(t, e.bob, didBob, model.Inbox)
	if held.Record.MsgID != first.MsgID {
		t.Fatalf("claimed %s, want the first message", held.Record.MsgID)
	}
	path := recPath(held.Record.RecordID, "state")
	e.runBad(t, []badCase{
		{name: "next wait too long", method: "POST", path: path, token: e.bob, status: 400, code: wire.CodeInvalid, field: "next.wait_ms",
			body: wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID, Next: &wire.NextRequest{WaitMS: 10_000_000}}},
		{name: "next peeks", method: "POST", path: path, token: e.bob, status: 400, code: wire.CodeInvalid, field: "next.lock_on_take",
			body: wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID, Next: &wire.NextRequest{LockOnTake: ptr(false)}}},
		{name: "next state filter", method: "POST", path: recPath(held.Record.RecordID, "delivery"), token: e.bob, status: 400, code: wire.CodeInvalid, field: "next.state_filter",
			body: wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, LeaseID: held.Record.Lease.ID, Next: &wire.NextRequest{StateFilter: []model.State{model.Readed}}}},
		{name: "ack without the lease", method: "POST", path: path, token: e.bob, status: 400, code: wire.CodeInvalid, field: "lease_id",
			body: wire.StateRequest{NewState: model.Readed}},
		{name: "report without the lease", method: "POST", path: recPath(held.Record.RecordID, "delivery"), token: e.bob, status: 400, code: wire.CodeInvalid, field: "lease_id",
			body: wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}}},
	})
	if rec := e.record(t, held.Record.RecordID); rec.State != model.Reading {
		t.Fatalf("a refused request changed the record: %s", rec.State)
	}

	noBody := false
	got := ok[wire.StateResult](t, e.do(t, "POST", path, e.bob,
		wire.StateRequest{NewState: model.Readed, LeaseID: held.Record.Lease.ID, WithObject: &noBody, Next: &wire.NextRequest{LeaseMS: 60_000}}))
	if got.Record.State != model.Readed || got.Msg != nil {
		t.Fatalf("acked record %+v", got.RecordWithMsg)
	}
	if got.Next == nil || got.Next.Record.MsgID != second.MsgID || got.Next.Record.State != model.Reading ||
		got.Next.Record.Lease == nil || contentOf(t, got.Next.Msg) != "two" {
		t.Fatalf("next = %+v, want the second message claimed with its body", got.Next)
	}

	// The box is empty now: a report with next waits for the next send.
	sent := make(chan resp, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		sent <- e.do(t, "POST", "/v1/post_send", e.alice, wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "three")})
	}()
	done := ok[wire.StateResult](t, e.do(t, "POST", recPath(got.Next.Record.RecordID, "delivery"), e.bob,
		wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, LeaseID: got.Next.Record.Lease.ID, Next: &wire.NextRequest{WaitMS: 10_000}}))
	third := ok[wire.PostSendResult](t, <-sent)
	if done.Record.State != model.Readed || done.Next == nil || done.Next.Record.MsgID != third.MsgID {
		t.Fatalf("report with next: %+v, next %+v", done.Record, done.Next)
	}
	// Nothing within next.wait_ms: no next.
	last := ok[wire.StateResult](t, e.do(t, "POST", recPath(done.Next.Record.RecordID, "delivery"), e.bob,
		wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, LeaseID: done.Next.Record.Lease.ID, Next: &wire.NextRequest{WaitMS: 50}}))
	if last.Record.State != model.Readed || last.Next != nil {
		t.Fatalf("last report: %+v, next %+v", last.Record, last.Next)
	}

	// Shutdown ends next's long poll as it ends get_next's: the ack
	// stands and is answered, with no next.
	e2 := newEnv(t)
	e2.postSend(t, e2.alice, chat(didAlice, []string{didBob}, "before the close"))
	h := e2.claim(t, e2.bob, didBob, model.Inbox)
	closed := make(chan resp, 1)
	go func() {
		r, err := e2.try("POST", recPath(h.Record.RecordID, "state"), e2.bob,
			wire.StateRequest{NewState: model.Readed, LeaseID: h.Record.Lease.ID, Next: &wire.NextRequest{WaitMS: 60_000}})
		if err != nil {
			r = resp{status: -1, body: []byte(err.Error())}
		}
		closed <- r
	}()
	time.Sleep(200 * time.Millisecond)
	e2.api.Close()
	select {
	case r := <-closed:
		got := ok[wire.StateResult](t, r)
		if got.Record.State != model.Readed || got.Next != nil || got.NextError != nil {
			t.Fatalf("ack+next at close: %s", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end next's long poll")
	}
}
