package api_test

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestHTTPReadReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setSubscribers(t, didGroup, didAlice, didBob, didCarol)
	e.setSubscribers(t, didGroup2, didBob)
	gm := e.postSend(t, e.carol, groupMsg(didGroup, didCarol, "read me, all")).MsgID
	g2m := e.postSend(t, e.bob, groupMsg(didGroup2, didBob, "g2 only")).MsgID
	dm := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "direct")).MsgID
	aliceRec := model.RecordID(didAlice, model.Inbox, gm, "")

	put := func(t *testing.T, token string, req wire.ReceiptRequest) model.Receipt {
		t.Helper()
		return ok[model.Receipt](t, e.do(t, "POST", "/v1/read_receipts", token, req))
	}
	list := func(t *testing.T, token string, q url.Values) []model.Receipt {
		t.Helper()
		return ok[wire.ReceiptsResult](t, e.do(t, "GET", "/v1/read_receipts?"+q.Encode(), token, nil)).Items
	}

	t.Run("latest wins by at_ms", func(t *testing.T) {
		want := model.Receipt{MsgID: gm, Iss: didAlice, Reader: didAlice, GroupID: didGroup, AtMS: 2000, Status: model.ReceiptReaded}
		if got := put(t, e.alice, wire.ReceiptRequest{MsgID: gm, ReaderDID: didAlice, GroupID: didGroup, Status: model.ReceiptReaded, AtMS: 2000}); got != want {
			t.Fatalf("first receipt %+v, want %+v", got, want)
		}
		if got := put(t, e.alice, wire.ReceiptRequest{MsgID: gm, ReaderDID: didAlice, GroupID: didGroup, Status: model.ReceiptReading, AtMS: 1000}); got != want {
			t.Fatalf("an older receipt replaced a newer one: %+v", got)
		}
		want = model.Receipt{MsgID: gm, Iss: didAlice, Reader: didAlice, GroupID: didGroup, AtMS: 3000, Status: model.ReceiptAccepted, Reason: "fine"}
		if got := put(t, e.alice, wire.ReceiptRequest{MsgID: gm, ReaderDID: didAlice, GroupID: didGroup, Status: model.ReceiptAccepted, AtMS: 3000, Reason: "fine"}); got != want {
			t.Fatalf("newer receipt %+v, want %+v", got, want)
		}
		if got := list(t, e.alice, url.Values{"reader": {didAlice}}); !reflect.DeepEqual(got, []model.Receipt{want}) {
			t.Fatalf("alice's receipts %+v", got)
		}
	})

	t.Run("one reader does not touch another", func(t *testing.T) {
		aliceBefore := list(t, e.alice, url.Values{"reader": {didAlice}})
		recBefore := e.record(t, aliceRec)
		now := e.clock.NowMS()
		got := put(t, e.bob, wire.ReceiptRequest{MsgID: gm, ReaderDID: didBob, GroupID: didGroup, Status: model.ReceiptReaded})
		if got.Reader != didBob || got.Iss != didBob || got.AtMS < now || got.Status != model.ReceiptReaded {
			t.Fatalf("bob's receipt %+v (at_ms defaults to now %d)", got, now)
		}
		if after := list(t, e.alice, url.Values{"reader": {didAlice}}); !reflect.DeepEqual(after, aliceBefore) {
			t.Fatalf("alice's receipts changed: %+v -> %+v", aliceBefore, after)
		}
		if after := e.record(t, aliceRec); !reflect.DeepEqual(after, recBefore) {
			t.Fatalf("alice's record changed: %+v -> %+v", recBefore, after)
		}
		if got := list(t, e.carol, url.Values{"reader": {didCarol}}); len(got) != 0 {
			t.Fatalf("carol has receipts %+v", got)
		}
	})

	t.Run("a group message's receipt is the group's", func(t *testing.T) {
		// Without group_id it still belongs to the group, and replaces
		// the reader's group receipt rather than taking it out of the
		// group's list.
		got := put(t, e.alice, wire.ReceiptRequest{MsgID: gm, ReaderDID: didAlice, Status: model.ReceiptAccepted, AtMS: 4000, Reason: "fine"})
		if got.GroupID != didGroup {
			t.Fatalf("receipt without group_id: %+v", got)
		}
		found := false
		for _, r := range list(t, e.carol, url.Values{"group_id": {didGroup}, "reader": {didAlice}}) {
			found = found || r.MsgID == gm && r.AtMS == 4000
		}
		if !found {
			t.Fatal("the group no longer lists alice's receipt")
		}
	})

	t.Run("pages", func(t *testing.T) {
		all := list(t, e.admin, url.Values{"msg_id": {gm}})
		if len(all) < 2 {
			t.Fatalf("receipts of gm: %+v", all)
		}
		var paged []model.Receipt
		q := url.Values{"msg_id": {gm}, "limit": {"1"}}
		for range len(all) + 1 {
			res := ok[wire.ReceiptsResult](t, e.do(t, "GET", "/v1/read_receipts?"+q.Encode(), e.admin, nil))
			paged = append(paged, res.Items...)
			if res.NextCursorMsgID == "" {
				break
			}
			q.Set("cursor_at_ms", fmt.Sprint(res.NextCursorAtMS))
			q.Set("cursor_msg_id", res.NextCursorMsgID)
			q.Set("cursor_reader", res.NextCursorReader)
		}
		if !reflect.DeepEqual(paged, all) {
			t.Fatalf("pages of one %+v, want %+v", paged, all)
		}
		wantErr(t, e.do(t, "GET", "/v1/read_receipts?msg_id="+url.QueryEscape(gm)+"&cursor_msg_id=x", e.admin, nil), 400, wire.CodeInvalid, "cursor_msg_id")
	})

	t.Run("list by message, group, reader", func(t *testing.T) {
		put(t, e.bob, wire.ReceiptRequest{MsgID: dm, ReaderDID: didBob, Status: model.ReceiptReaded, AtMS: 10})
		for _, c := range []struct {
			token   string
			q       url.Values
			readers []string
		}{
			{e.alice, url.Values{"msg_id": {gm}}, []string{didAlice, didBob}},
			{e.carol, url.Values{"group_id": {didGroup}}, []string{didAlice, didBob}},
			{e.bob, url.Values{"reader": {didBob}}, []string{didBob, didBob}},
			{e.admin, url.Values{"reader": {didBob}, "msg_id": {dm}}, []string{didBob}},
			{e.alice, url.Values{"msg_id": {dm}}, []string{didBob}}, // alice holds an outbox record of dm
			{e.admin, url.Values{"msg_id": {gm}, "limit": {"1"}}, []string{didAlice}},
			{e.admin, url.Values{"msg_id": {g2m}}, nil},
		} {
			var readers []string
			for _, r := range list(t, c.token, c.q) {
				readers = append(readers, r.Reader)
			}
			if !equalSet(readers, c.readers) {
				t.Fatalf("%v: readers %v, want %v", c.q, readers, c.readers)
			}
		}
	})

	t.Run("bad input and others' receipts", func(t *testing.T) {
		c := func(name, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: "POST", path: "/v1/read_receipts", token: token, body: body, status: status, code: code, field: field}
		}
		g := func(name, token, q string, status int, code, field string) badCase {
			return badCase{name: name, method: "GET", path: "/v1/read_receipts?" + q, token: token, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		base := `"msg_id":"` + gm + `","reader_did":"did:alice","status":"READED"`
		e.runBad(t, []badCase{
			c("empty body", e.alice, "", 400, inv, ""),
			c("malformed JSON", e.alice, `{"msg_id":`, 400, inv, ""),
			c("unknown field", e.alice, `{`+base+`,"seen":true}`, 400, inv, "seen"),
			c("missing msg_id", e.alice, `{"reader_did":"did:alice","status":"READED"}`, 400, inv, "msg_id"),
			c("missing reader_did", e.alice, `{"msg_id":"`+gm+`","status":"READED"}`, 400, inv, "reader_did"),
			c("unknown status", e.alice, `{"msg_id":"`+gm+`","reader_did":"did:alice","status":"SEEN"}`, 400, inv, "status"),
			c("status wrong type", e.alice, `{"msg_id":"`+gm+`","reader_did":"did:alice","status":1}`, 400, inv, "status"),
			c("at_ms wrong type", e.alice, `{`+base+`,"at_ms":"now"}`, 400, inv, "at_ms"),
			c("negative at_ms", e.alice, `{`+base+`,"at_ms":-1}`, 400, inv, "at_ms"),
			c("group_id with space", e.alice, `{`+base+`,"group_id":"did g"}`, 400, inv, "group_id"),
			// bob is in group2, but alice's direct message did not go there:
			// group2's members would read the receipt and its reason.
			c("group_id of a group the message did not go to", e.bob, `{"msg_id":"`+dm+`","reader_did":"did:bob","group_id":"`+didGroup2+`","status":"REJECTED","reason":"spam"}`, 400, inv, "group_id"),
			c("at_ms far ahead", e.alice, `{`+base+`,"at_ms":9999999999999}`, 400, inv, "at_ms"),
			c("unknown message", e.alice, `{"msg_id":"cymsg:00","reader_did":"did:alice","status":"READED"}`, 404, wire.CodeNotFound, ""),
			c("alice as reader bob", e.alice, `{"msg_id":"`+gm+`","reader_did":"did:bob","status":"READED"}`, 403, wire.CodeForbidden, ""),
			c("tunnel as reader bob", e.tunnel, `{"msg_id":"`+gm+`","reader_did":"did:bob","status":"READED"}`, 403, wire.CodeForbidden, ""),
			// carol holds no record of alice's direct message to bob: she
			// must not add a receipt to it (others list it by msg_id), nor
			// learn that it exists.
			c("receipt on a message carol cannot read", e.carol, `{"msg_id":"`+dm+`","reader_did":"did:carol","status":"READED"}`, 404, wire.CodeNotFound, ""),
			c("a group alice is not in", e.alice, `{"msg_id":"`+gm+`","reader_did":"did:alice","group_id":"`+didGroup2+`","status":"READED"}`, 403, wire.CodeForbidden, ""),
			g("no filter", e.admin, "", 400, inv, "msg_id"),
			g("limit too big", e.admin, "reader=did:bob&limit=1001", 400, inv, "limit"),
			g("negative limit", e.admin, "reader=did:bob&limit=-1", 400, inv, "limit"),
			g("limit not a number", e.admin, "reader=did:bob&limit=x", 400, inv, "limit"),
			g("alice lists bob's", e.alice, "reader=did:bob", 403, wire.CodeForbidden, ""),
			g("reader not a DID", e.admin, "reader=did%20x%00", 400, inv, "reader"),
			g("group_id not a DID", e.admin, "group_id=did%20g", 400, inv, "group_id"),
			g("alice lists a group she is not in", e.alice, "group_id="+url.QueryEscape(didGroup2), 403, wire.CodeForbidden, ""),
			g("carol lists a message she does not hold", e.carol, "msg_id="+url.QueryEscape(dm), 403, wire.CodeForbidden, ""),
		})
		// The largest at_ms is said to be ahead, not a negative duration.
		d := wantErr(t, e.do(t, "POST", "/v1/read_receipts", e.alice, `{`+base+`,"at_ms":9223372036854775807}`), 400, inv, "at_ms")
		if !strings.Contains(d.Message, "ms ahead") || strings.Contains(d.Message, "is -") {
			t.Errorf("at_ms at the int64 limit: %q", d.Message)
		}
	})
}

func TestHTTPBlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setSubscribers(t, didGroup, didAlice, didBob, didCarol)
	block := "/v1/contacts/" + esc(didBob) + "/blocks/" + esc(didAlice)

	t.Run("blocked sender is dropped", func(t *testing.T) {
		res := ok[wire.BlockResult](t, e.do(t, "PUT", block, e.bob, nil))
		if res != (wire.BlockResult{Owner: didBob, DID: didAlice, Blocked: true}) {
			t.Fatalf("block %+v", res)
		}
		ps := e.postSend(t, e.alice, chat(didAlice, []string{didBob, didCarol}, "hi both"))
		if !ps.OK || !reflect.DeepEqual(ps.DroppedRecipients, []string{didBob}) || !reflect.DeepEqual(ps.LocalRecipients, []string{didCarol}) {
			t.Fatalf("post_send %+v", ps)
		}
		ps = e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "only bob"))
		if ps.OK || ps.Reason != "blocked" || !reflect.DeepEqual(ps.DroppedRecipients, []string{didBob}) {
			t.Fatalf("post_send to a blocker only %+v", ps)
		}
		d := e.adminDispatch(t, chat(didAlice, []string{didBob}, "dispatched"))
		if d.OK || d.Reason != "blocked" || !reflect.DeepEqual(d.DroppedRecipients, []string{didBob}) || len(d.DeliveredRecipients) != 0 {
			t.Fatalf("dispatch %+v", d)
		}
		gd := e.adminDispatch(t, groupMsg(didGroup, didAlice, "group hi"))
		if !reflect.DeepEqual(gd.DroppedRecipients, []string{didBob}) || !reflect.DeepEqual(gd.DeliveredAgents, []string{didCarol}) {
			t.Fatalf("group dispatch %+v", gd)
		}
		if n := len(e.syncAll(t, e.bob, didBob, model.Inbox)); n != 0 {
			t.Fatalf("bob got %d records from a blocked sender", n)
		}
	})

	t.Run("listed", func(t *testing.T) {
		got := ok[wire.BlocksResult](t, e.do(t, "GET", "/v1/contacts/"+esc(didBob)+"/blocks", e.bob, nil))
		if len(got.Items) != 1 || got.Items[0].Owner != didBob || got.Items[0].DID != didAlice || got.Items[0].AtMS == 0 {
			t.Fatalf("bob's blocks %+v", got)
		}
		if got := ok[wire.BlocksResult](t, e.do(t, "GET", "/v1/contacts/"+esc(didCarol)+"/blocks", e.admin, nil)); len(got.Items) != 0 {
			t.Fatalf("carol's blocks %+v", got)
		}
	})

	t.Run("bad input and others' blocks", func(t *testing.T) {
		c := func(name, method, path, token string, status int, code, field string) badCase {
			return badCase{name: name, method: method, path: path, token: token, status: status, code: code, field: field}
		}
		e.runBad(t, []badCase{
			c("did with space", "PUT", "/v1/contacts/did:bob/blocks/did%20x", e.bob, 400, wire.CodeInvalid, "did"),
			c("owner with space", "PUT", "/v1/contacts/did%20bob/blocks/did:x", e.admin, 400, wire.CodeInvalid, "owner"),
			c("did too long", "DELETE", "/v1/contacts/did:bob/blocks/did:"+longDID(), e.bob, 400, wire.CodeInvalid, "did"),
			c("alice blocks for bob", "PUT", "/v1/contacts/did:bob/blocks/did:carol", e.alice, 403, wire.CodeForbidden, ""),
			c("alice unblocks for bob", "DELETE", block, e.alice, 403, wire.CodeForbidden, ""),
			c("tunnel blocks for bob", "PUT", "/v1/contacts/did:bob/blocks/did:carol", e.tunnel, 403, wire.CodeForbidden, ""),
			c("alice lists bob's blocks", "GET", "/v1/contacts/did:bob/blocks", e.alice, 403, wire.CodeForbidden, ""),
			c("bob blocks himself", "PUT", "/v1/contacts/did:bob/blocks/did:bob", e.bob, 400, wire.CodeInvalid, "did"),
			{name: "a body that is not JSON", method: "PUT", path: "/v1/contacts/did:bob/blocks/did:carol", token: e.bob,
				body: "not json at all", status: 400, code: wire.CodeInvalid},
			{name: "a body with a field", method: "DELETE", path: block, token: e.bob,
				body: `{"reason":"x"}`, status: 400, code: wire.CodeInvalid, field: "reason"},
		})
		// The refused block did not take and the refused unblock did not
		// lift bob's block.
		if ps := e.postSend(t, e.carol, chat(didCarol, []string{didBob}, "still open")); !reflect.DeepEqual(ps.LocalRecipients, []string{didBob}) {
			t.Fatalf("a refused block took effect: %+v", ps)
		}
		if ps := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "still blocked")); ps.OK {
			t.Fatalf("a refused unblock took effect: %+v", ps)
		}
	})

	t.Run("unblock", func(t *testing.T) {
		res := ok[wire.BlockResult](t, e.do(t, "DELETE", block, e.bob, nil))
		if res != (wire.BlockResult{Owner: didBob, DID: didAlice, Blocked: false}) {
			t.Fatalf("unblock %+v", res)
		}
		ok[wire.BlockResult](t, e.do(t, "DELETE", block, e.admin, nil)) // idempotent, admin may
		ps := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "friends again"))
		if !ps.OK || !reflect.DeepEqual(ps.LocalRecipients, []string{didBob}) || len(ps.DroppedRecipients) != 0 {
			t.Fatalf("after unblock %+v", ps)
		}
	})
}

func TestHTTPConversations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	send := func(token, from, to, text string) string {
		e.clock.Advance(10 * time.Millisecond) // distinct updated_at_ms
		return e.postSend(t, token, chat(from, []string{to}, text)).MsgID
	}
	var fromBob []string
	for _, s := range []string{"b1", "b2", "b3"} {
		fromBob = append(fromBob, send(e.bob, didBob, didAlice, s))
	}
	send(e.carol, didCarol, didAlice, "c1")
	lastCarol := send(e.carol, didCarol, didAlice, "c2")
	path := "/v1/owners/" + esc(didAlice) + "/conversations"
	unread := func(t *testing.T) map[string]int64 {
		t.Helper()
		res := ok[wire.ConversationsResult](t, e.do(t, "GET", path, e.alice, nil))
		out := map[string]int64{}
		for _, c := range res.Items {
			if c.Owner != didAlice {
				t.Fatalf("conversation of %s", c.Owner)
			}
			out[c.ThreadKey] = c.UnreadCount
		}
		return out
	}

	t.Run("latest first with unread counts", func(t *testing.T) {
		res := ok[wire.ConversationsResult](t, e.do(t, "GET", path, e.alice, nil))
		if len(res.Items) != 2 {
			t.Fatalf("conversations %+v", res.Items)
		}
		c0, c1 := res.Items[0], res.Items[1]
		if c0.ThreadKey != "dm:did:carol" || c0.UnreadCount != 2 || c0.LastMsgID != lastCarol || c0.LastBox != model.Inbox ||
			c0.LastRecordID != model.RecordID(didAlice, model.Inbox, lastCarol, "") || c0.LastSeq != 5 ||
			c1.ThreadKey != "dm:did:bob" || c1.UnreadCount != 3 || c0.UpdatedAtMS <= c1.UpdatedAtMS {
			t.Fatalf("conversations %+v", res.Items)
		}
		reply := send(e.alice, didAlice, didBob, "reply") // the OUTBOX copy joins the thread, read
		res = ok[wire.ConversationsResult](t, e.do(t, "GET", path+"?limit=1", e.alice, nil))
		if len(res.Items) != 1 || res.Items[0].ThreadKey != "dm:did:bob" || res.Items[0].LastMsgID != reply ||
			res.Items[0].LastBox != model.Outbox || res.Items[0].UnreadCount != 3 {
			t.Fatalf("after alice's reply %+v", res.Items)
		}
		// the next page, from the cursor of the full one
		next := fmt.Sprintf("%s?limit=1&cursor_updated_at_ms=%d&cursor_thread_key=%s", path, res.NextCursorUpdatedAtMS, url.QueryEscape(res.NextCursorThreadKey))
		if res.NextCursorThreadKey != "dm:did:bob" {
			t.Fatalf("full page without its cursor: %+v", res)
		}
		res = ok[wire.ConversationsResult](t, e.do(t, "GET", next, e.alice, nil))
		if len(res.Items) != 1 || res.Items[0].ThreadKey != "dm:did:carol" {
			t.Fatalf("second page %+v", res.Items)
		}
		e.runBad(t, []badCase{
			{name: "cursor without its thread", method: "GET", path: path + "?cursor_updated_at_ms=5", token: e.alice, status: 400, code: wire.CodeInvalid, field: "cursor_thread_key"},
			{name: "cursor not a number", method: "GET", path: path + "?cursor_updated_at_ms=x&cursor_thread_key=a", token: e.alice, status: 400, code: wire.CodeInvalid, field: "cursor_updated_at_ms"},
		})
	})

	t.Run("unread count follows reads", func(t *testing.T) {
		rec := func(i int) string { return model.RecordID(didAlice, model.Inbox, fromBob[i], "") }
		ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(rec(1), "state"), e.alice, wire.StateRequest{NewState: model.Readed}))
		if u := unread(t); u["dm:did:bob"] != 2 || u["dm:did:carol"] != 2 {
			t.Fatalf("after one read: %v", u)
		}
		held := e.claim(t, e.alice, didAlice, model.Inbox) // b1: READING still counts as unread
		if u := unread(t); u["dm:did:bob"] != 2 {
			t.Fatalf("after a claim: %v", u)
		}
		e.deliver(t, e.alice, held.Record.RecordID, wire.DeliveryResult{OK: true})
		if u := unread(t); u["dm:did:bob"] != 1 {
			t.Fatalf("after an ack: %v", u)
		}
		ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(rec(1), "state"), e.alice, wire.StateRequest{NewState: model.Unread}))
		ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(rec(2), "state"), e.alice, wire.StateRequest{NewState: model.Archived}))
		if u := unread(t); u["dm:did:bob"] != 1 || u["dm:did:carol"] != 2 {
			t.Fatalf("after unread + archive: %v", u)
		}
	})

	t.Run("bad input and others' conversations", func(t *testing.T) {
		c := func(name, path, token string, status int, code, field string) badCase {
			return badCase{name: name, method: "GET", path: path, token: token, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			c("limit too big", path+"?limit=1001", e.alice, 400, inv, "limit"),
			c("negative limit", path+"?limit=-1", e.alice, 400, inv, "limit"),
			c("limit not a number", path+"?limit=1e3", e.alice, 400, inv, "limit"),
			c("owner with space", "/v1/owners/did%20a/conversations", e.admin, 400, inv, "owner"),
			c("alice reads bob's", "/v1/owners/did:bob/conversations", e.alice, 403, wire.CodeForbidden, ""),
			c("tunnel reads alice's", path, e.tunnel, 403, wire.CodeForbidden, ""),
		})
	})
}
