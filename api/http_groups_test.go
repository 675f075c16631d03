package api_test

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// groupMsg is a message alice (or author) writes in group.
func groupMsg(group, author, text string) *message.Message {
	return &message.Message{From: group, Source: author, Kind: message.KindGroupMsg, Content: message.Content{Content: text}}
}

func TestHTTPGroupSubscribers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := "/v1/groups/" + esc(didGroup) + "/subscribers"

	t.Run("set and get", func(t *testing.T) {
		res := ok[wire.SubscribersResult](t, e.do(t, "PUT", path, e.admin,
			wire.SubscribersRequest{Subscribers: []string{didCarol, didAlice, didBob, didAlice}}))
		want := []string{didAlice, didBob, didCarol} // sorted, deduplicated
		if res.Group != didGroup || !reflect.DeepEqual(res.Subscribers, want) {
			t.Fatalf("set: %+v", res)
		}
		for _, tok := range []string{e.admin, e.alice, e.carol} {
			got := ok[wire.SubscribersResult](t, e.do(t, "GET", path, tok, nil))
			if got.Group != didGroup || !reflect.DeepEqual(got.Subscribers, want) {
				t.Fatalf("get: %+v", got)
			}
		}
		e.setSubscribers(t, didGroup2, didBob)
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name, method, path, token string, body any, status int, code, field string) badCase {
			return badCase{name: name, method: method, path: path, token: token, body: body, status: status, code: code, field: field}
		}
		inv := wire.CodeInvalid
		e.runBad(t, []badCase{
			c("empty body", "PUT", path, e.admin, "", 400, inv, ""),
			c("malformed JSON", "PUT", path, e.admin, `{"subscribers":[`, 400, inv, ""),
			c("missing subscribers", "PUT", path, e.admin, `{}`, 400, inv, "subscribers"),
			c("subscribers null", "PUT", path, e.admin, `{"subscribers":null}`, 400, inv, "subscribers"),
			c("subscribers wrong type", "PUT", path, e.admin, `{"subscribers":"did:bob"}`, 400, inv, "subscribers"),
			c("subscriber wrong type", "PUT", path, e.admin, `{"subscribers":["did:bob",7]}`, 400, inv, "subscribers[1]"),
			c("subscriber with space", "PUT", path, e.admin, `{"subscribers":["did:bob","did x"]}`, 400, inv, "subscribers[1]"),
			c("empty subscriber", "PUT", path, e.admin, `{"subscribers":[""]}`, 400, inv, "subscribers[0]"),
			c("unknown field", "PUT", path, e.admin, `{"subscribers":[],"owner":"x"}`, 400, inv, "owner"),
			c("group with space", "PUT", "/v1/groups/did%20g/subscribers", e.admin, `{"subscribers":[]}`, 400, inv, "group"),
			c("group too long", "GET", "/v1/groups/did:"+longDID()+"/subscribers", e.admin, nil, 400, inv, "group"),
			c("agent sets a group", "PUT", path, e.alice, `{"subscribers":["did:alice"]}`, 403, wire.CodeForbidden, ""),
			c("non-member reads", "GET", "/v1/groups/"+esc(didGroup2)+"/subscribers", e.alice, nil, 403, wire.CodeForbidden, ""),
			c("agent deletes a group", "DELETE", "/v1/groups/"+esc(didGroup), e.alice, nil, 403, wire.CodeForbidden, ""),
			c("delete a DID that is no group", "DELETE", "/v1/groups/"+esc(didCarol), e.admin, nil, 404, wire.CodeNotFound, ""),
			c("delete a group with a space", "DELETE", "/v1/groups/did%20g", e.admin, nil, 400, inv, "group"),
		})
	})

	// Deleting a group undoes making it one: its subscribers go, and a
	// message to the DID lands in its own INBOX again.
	t.Run("delete", func(t *testing.T) {
		m := chat(didAlice, []string{didGroup2}, "to the DID")
		wantErr(t, e.do(t, "POST", "/v1/post_send", e.alice, &wire.PostSendRequest{Msg: m}), 400, wire.CodeInvalid, "msg.to[0]")
		if r := e.do(t, "DELETE", "/v1/groups/"+esc(didGroup2), e.admin, nil); r.status != 204 {
			t.Fatalf("delete: %s", r)
		}
		wantErr(t, e.do(t, "GET", "/v1/groups/"+esc(didGroup2)+"/subscribers", e.admin, nil), 404, wire.CodeNotFound, "")
		wantErr(t, e.do(t, "DELETE", "/v1/groups/"+esc(didGroup2), e.admin, nil), 404, wire.CodeNotFound, "")
		if res := e.postSend(t, e.alice, m); len(res.LocalRecipients) != 1 || res.LocalRecipients[0] != didGroup2 {
			t.Fatalf("post_send to the former group: %+v", res)
		}
		evs := e.allEvents(t, e.admin, didGroup2)
		if last := evs[len(evs)-1]; evs[len(evs)-2].Type != model.EventGroupDeleted || last.Type != model.EventRecordCreated {
			t.Fatalf("the former group's events end %+v, %+v; want group.deleted, then its record", evs[len(evs)-2], last)
		}
	})
}

func longDID() string { return strings.Repeat("x", 300) }

func TestHTTPGroupDispatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setSubscribers(t, didGroup, didAlice, didBob, didCarol)
	e.setSubscribers(t, didGroup2, didBob)

	t.Run("dispatch fans out to every subscriber but the author", func(t *testing.T) {
		res := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.admin, wire.DispatchRequest{Msg: groupMsg(didGroup, didAlice, "hello group")}))
		if !res.OK || res.DeliveredGroup != didGroup || !equalSet(res.DeliveredAgents, []string{didBob, didCarol}) ||
			!equalSet(res.DeliveredRecipients, []string{didBob, didCarol}) || len(res.DroppedRecipients) != 0 {
			t.Fatalf("result %+v", res)
		}
		g := e.record(t, model.RecordID(didGroup, model.GroupInbox, res.MsgID, ""))
		if g.Owner != didGroup || g.BoxKind != model.GroupInbox || g.State != model.Unread || g.ThreadKey != "group:"+didGroup {
			t.Fatalf("group record %+v", g)
		}
		for _, d := range []string{didBob, didCarol} {
			r := e.record(t, model.RecordID(d, model.Inbox, res.MsgID, ""))
			if r.Owner != d || !reflect.DeepEqual(r.Tags, []string{"group:" + didGroup}) || r.ThreadKey != "group:"+didGroup {
				t.Fatalf("subscriber record %+v", r)
			}
			tagged := ok[wire.ListResult](t, e.do(t, "GET", boxPath(d, model.Inbox, "records")+"?tag=group:"+didGroup, e.admin, nil))
			if len(tagged.Items) != 1 || tagged.Items[0].Record.MsgID != res.MsgID {
				t.Fatalf("tag filter for %s: %+v", d, tagged.Items)
			}
		}
		if n := len(e.syncAll(t, e.admin, didAlice, model.Inbox)); n != 0 {
			t.Fatalf("the author got %d inbox records", n)
		}
	})

	t.Run("group message without an author", func(t *testing.T) {
		e.runBad(t, []badCase{{name: "no source", method: "POST", path: "/v1/dispatch", token: e.tunnel,
			body:   wire.DispatchRequest{Msg: &message.Message{From: didGroup, Content: message.Content{Content: "who?"}}},
			status: 400, code: wire.CodeInvalid, field: "msg.source"}})
	})

	t.Run("post_send to a group", func(t *testing.T) {
		res := e.postSend(t, e.bob, groupMsg(didGroup, didBob, "bob writes"))
		if !res.OK || !equalSet(res.LocalRecipients, []string{didAlice, didCarol}) || len(res.Deliveries) != 0 ||
			res.OutboxRecordID != model.RecordID(didBob, model.Outbox, res.MsgID, "") {
			t.Fatalf("result %+v", res)
		}
		e.record(t, model.RecordID(didGroup, model.GroupInbox, res.MsgID, ""))
		e.record(t, model.RecordID(didAlice, model.Inbox, res.MsgID, ""))
	})

	t.Run("members read the group inbox", func(t *testing.T) {
		for _, p := range []string{boxPath(didGroup, model.GroupInbox, "records"), boxPath(didGroup, "group_inbox", "sync")} {
			r := e.do(t, "GET", p, e.alice, nil)
			var items []wire.RecordWithMsg
			if strings.HasSuffix(p, "sync") {
				items = ok[wire.SyncResult](t, r).Items
			} else {
				items = ok[wire.ListResult](t, r).Items
			}
			if len(items) != 2 {
				t.Fatalf("%s: %d items, want 2", p, len(items))
			}
		}
		peek := ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(didGroup, model.GroupInbox, "next"), e.alice, wire.NextRequest{LockOnTake: ptr(false)}))
		if peek.Record.Owner != didGroup || contentOf(t, peek.Msg) != "hello group" {
			t.Fatalf("peek %+v", peek)
		}
		ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(peek.Record.RecordID, ""), e.carol, nil))
	})

	t.Run("non-members and claims are refused", func(t *testing.T) {
		e.postSend(t, e.bob, groupMsg(didGroup2, didBob, "private"))
		g2 := boxPath(didGroup2, model.GroupInbox, "")
		g2rec := model.RecordID(didGroup2, model.GroupInbox, e.syncAll(t, e.admin, didGroup2, model.GroupInbox)[0].Record.MsgID, "")
		forbidden := func(name, method, path string, body any) badCase {
			return badCase{name: name, method: method, path: path, token: e.alice, body: body, status: 403, code: wire.CodeForbidden}
		}
		e.runBad(t, []badCase{
			forbidden("list", "GET", g2+"records", nil),
			forbidden("sync", "GET", g2+"sync", nil),
			forbidden("peek", "POST", g2+"next", wire.NextRequest{LockOnTake: ptr(false)}),
			{name: "get record", method: "GET", path: recPath(g2rec, ""), token: e.alice, status: 404, code: wire.CodeNotFound},
			forbidden("claim own group's inbox", "POST", boxPath(didGroup, model.GroupInbox, "next"), nil),
			{name: "change a group record", method: "POST", path: recPath(g2rec, "state"), token: e.alice, body: wire.StateRequest{NewState: model.Readed}, status: 404, code: wire.CodeNotFound},
			// a member reads its group's records but does not change them
			forbidden("change own group's record", "POST", recPath(model.RecordID(didGroup, model.GroupInbox,
				e.syncAll(t, e.admin, didGroup, model.GroupInbox)[0].Record.MsgID, ""), "state"), wire.StateRequest{NewState: model.Readed}),
			forbidden("redrive a group inbox", "POST", boxPath(didGroup, model.GroupInbox, "redrive"), nil),
		})
	})
}

// A group that delivers to itself stores each message once, in its
// GROUP_INBOX: members get no INBOX records, and read, stream, mark and
// consume the group's box instead.
func TestHTTPGroupDeliveredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := "/v1/groups/" + esc(didGroup) + "/subscribers"

	res := ok[wire.SubscribersResult](t, e.do(t, "PUT", path, e.admin,
		wire.SubscribersRequest{Subscribers: []string{didAlice, didBob, didCarol}, Delivery: model.DeliverToGroup}))
	if res.Delivery != model.DeliverToGroup {
		t.Fatalf("set: %+v", res)
	}
	// Replacing the subscribers without naming a delivery keeps it.
	res = ok[wire.SubscribersResult](t, e.do(t, "PUT", path, e.admin, wire.SubscribersRequest{Subscribers: []string{didAlice, didBob, didCarol}}))
	if got := ok[wire.SubscribersResult](t, e.do(t, "GET", path, e.carol, nil)); res.Delivery != model.DeliverToGroup || got.Delivery != model.DeliverToGroup {
		t.Fatalf("after a replace: %+v, get %+v", res, got)
	}
	e.setSubscribers(t, didGroup2, didBob)
	if got := ok[wire.SubscribersResult](t, e.do(t, "GET", "/v1/groups/"+esc(didGroup2)+"/subscribers", e.bob, nil)); got.Delivery != model.DeliverToMembers {
		t.Fatalf("a new group's delivery: %+v", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws := dialWS(t, ctx, e, boxPath(didGroup, model.GroupInbox, "stream"), e.bob, nil)

	d := ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.admin, wire.DispatchRequest{Msg: groupMsg(didGroup, didAlice, "once")}))
	if !d.OK || d.DeliveredGroup != didGroup || d.GroupDelivery != model.DeliverToGroup || len(d.DeliveredAgents) != 0 || len(d.DeliveredRecipients) != 0 {
		t.Fatalf("dispatch result %+v", d)
	}
	p := e.postSend(t, e.bob, groupMsg(didGroup, didBob, "twice"))
	if !p.OK || p.GroupDelivery != model.DeliverToGroup || len(p.LocalRecipients) != 0 || len(p.DroppedRecipients) != 0 {
		t.Fatalf("post_send result %+v", p)
	}
	for _, m := range []string{didAlice, didBob, didCarol} {
		if n := len(e.syncAll(t, e.admin, m, model.Inbox)); n != 0 {
			t.Fatalf("%s has %d INBOX records", m, n)
		}
	}
	// Bob, connected before either send, is pushed both from the group's box.
	for i, want := range []string{"once", "twice"} {
		f := readWSFrame(t, ctx, ws)
		if f.Record.Owner != didGroup || f.Record.BoxKind != model.GroupInbox || f.Seq != int64(i+1) || contentOf(t, f.Msg) != want {
			t.Fatalf("frame %d: %+v %s", i, f.Record, f.Msg)
		}
	}
	items := e.syncAll(t, e.carol, didGroup, model.GroupInbox)
	if len(items) != 2 || items[0].Record.MsgID != d.MsgID || items[1].Record.MsgID != p.MsgID {
		t.Fatalf("carol syncs the group: %+v", items)
	}
	// Read state is the reader's own.
	ok[model.Receipt](t, e.do(t, "POST", "/v1/read_receipts", e.carol,
		wire.ReceiptRequest{MsgID: d.MsgID, ReaderDID: didCarol, GroupID: didGroup, Status: model.ReceiptReaded}))
	got := ok[wire.ReceiptsResult](t, e.do(t, "GET", "/v1/read_receipts?group_id="+url.QueryEscape(didGroup), e.alice, nil)).Items
	if len(got) != 1 || got[0].Reader != didCarol || got[0].MsgID != d.MsgID {
		t.Fatalf("group receipts %+v", got)
	}

	// Back to members: the next message reaches the INBOXes again.
	ok[wire.SubscribersResult](t, e.do(t, "PUT", path, e.admin, wire.SubscribersRequest{Subscribers: []string{didAlice, didBob}, Delivery: model.DeliverToMembers}))
	d = e.adminDispatch(t, groupMsg(didGroup, didAlice, "thrice"))
	if d.GroupDelivery != model.DeliverToMembers || !reflect.DeepEqual(d.DeliveredAgents, []string{didBob}) {
		t.Fatalf("dispatch after switching back: %+v", d)
	}
	e.record(t, model.RecordID(didBob, model.Inbox, d.MsgID, ""))

	before := e.snap(t)
	inv := wire.CodeInvalid
	e.runBad(t, []badCase{
		{name: "unknown delivery", method: "PUT", path: path, token: e.admin, body: `{"subscribers":[],"delivery":"all"}`, status: 400, code: inv, field: "delivery"},
		{name: "delivery wrong type", method: "PUT", path: path, token: e.admin, body: `{"subscribers":[],"delivery":1}`, status: 400, code: inv, field: "delivery"},
	})
	e.assertUnchanged(t, before)
	if got := ok[wire.SubscribersResult](t, e.do(t, "GET", path, e.admin, nil)); got.Delivery != model.DeliverToMembers || len(got.Subscribers) != 2 {
		t.Fatalf("after bad input: %+v", got)
	}
}

// Streams of several subscribers on one group's box share their reads
// (stream_share.go), but each keeps its own access: every member is pushed
// every message in order, and a member removed from the group loses its
// stream at the next message while the others go on.
func TestHTTPGroupStreamsShareReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := "/v1/groups/" + esc(didGroup) + "/subscribers"
	ok[wire.SubscribersResult](t, e.do(t, "PUT", path, e.admin,
		wire.SubscribersRequest{Subscribers: []string{didAlice, didBob, didCarol}, Delivery: model.DeliverToGroup}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream := boxPath(didGroup, model.GroupInbox, "stream")
	members := map[string]*websocket.Conn{}
	for did, token := range map[string]string{didAlice: e.alice, didBob: e.bob, didCarol: e.carol} {
		members[did] = dialWS(t, ctx, e, stream, token, nil)
	}
	texts := []string{"one", "two", "three"}
	for _, text := range texts {
		e.adminDispatch(t, groupMsg(didGroup, didAlice, text))
	}
	for did, ws := range members {
		for i, want := range texts {
			if f := readWSFrame(t, ctx, ws); f.Seq != int64(i+1) || contentOf(t, f.Msg) != want {
				t.Fatalf("%s frame %d: seq %d %s", did, i, f.Seq, f.Msg)
			}
		}
	}

	ok[wire.SubscribersResult](t, e.do(t, "PUT", path, e.admin, wire.SubscribersRequest{Subscribers: []string{didAlice, didBob}}))
	e.adminDispatch(t, groupMsg(didGroup, didAlice, "four"))
	for _, did := range []string{didAlice, didBob} {
		if f := readWSFrame(t, ctx, members[did]); f.Seq != 4 || contentOf(t, f.Msg) != "four" {
			t.Fatalf("%s after carol left: seq %d %s", did, f.Seq, f.Msg)
		}
	}
	_, b, err := members[didCarol].Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "may not read") {
		t.Fatalf("carol, no longer a member: frame %s, err %v (status %v); want the stream closed with 403's message", b, err, st)
	}
}
