package api_test

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestHTTPBoxParamCase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sent := e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "case"))
	var first []wire.RecordWithMsg
	for _, box := range []string{"INBOX", "inbox", "Inbox", "iNbOx"} {
		list := ok[wire.ListResult](t, e.do(t, "GET", boxPath(didAlice, model.BoxKind(box), "records"), e.alice, nil))
		sync := ok[wire.SyncResult](t, e.do(t, "GET", boxPath(didAlice, model.BoxKind(box), "sync"), e.alice, nil))
		if len(list.Items) != 1 || list.Items[0].Record.MsgID != sent.MsgID || list.Items[0].Record.BoxKind != model.Inbox ||
			!reflect.DeepEqual(list.Items, sync.Items) {
			t.Fatalf("box %q: list %+v sync %+v", box, list.Items, sync.Items)
		}
		if first == nil {
			first = list.Items
		} else if !reflect.DeepEqual(first, list.Items) {
			t.Fatalf("box %q differs from INBOX", box)
		}
	}
	got := ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(didAlice, "inbox", "next"), e.alice, nil))
	if got.Record.MsgID != sent.MsgID || got.Record.BoxKind != model.Inbox {
		t.Fatalf("claim via lower-case box: %+v", got.Record)
	}
	ok[wire.RedriveResult](t, e.do(t, "POST", boxPath(didAlice, "Inbox", "redrive"), e.alice, nil))
}

// DIDs carry ':' and may carry '/': escaped with url.PathEscape they stay
// one path segment everywhere.
func TestHTTPSlashDIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ann := "did:web:example.com:users/ann"
	spam := "did:web:spam.example/x:y"
	team := "did:grp:team/a:b"
	far := "did:ext:far/away"
	ctx := context.Background()

	tok := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: ann, Role: model.RoleAgent}))
	if tok.DID != ann {
		t.Fatalf("token %+v", tok)
	}
	annC := client.New(e.url, tok.Token)
	adminC := client.New(e.url, e.admin)

	d := e.dispatch(t, chat("did:tg:u1", []string{ann}, "for ann"))
	rec := model.RecordID(ann, model.Inbox, d.MsgID, "")

	t.Run("boxes and records", func(t *testing.T) {
		list := ok[wire.ListResult](t, e.do(t, "GET", boxPath(ann, model.Inbox, "records"), tok.Token, nil))
		if len(list.Items) != 1 || list.Items[0].Record.Owner != ann || list.Items[0].Record.RecordID != rec {
			t.Fatalf("list %+v", list.Items)
		}
		sync, err := annC.Sync(ctx, wire.SyncQuery{Owner: ann, Box: model.Inbox})
		if err != nil || len(sync.Items) != 1 || sync.LastSeq != 1 {
			t.Fatalf("SDK sync %+v %v", sync, err)
		}
		held, err := annC.Next(ctx, ann, model.Inbox, nil)
		if err != nil || held == nil || held.Record.RecordID != rec || held.Record.Lease.Holder != ann {
			t.Fatalf("SDK next %+v %v", held, err)
		}
		if _, err := annC.Ack(ctx, rec, held.Record.Lease.ID, ""); err != nil {
			t.Fatal(err)
		}
		if got := ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(rec, ""), tok.Token, nil)); got.Record.State != model.Readed {
			t.Fatalf("record %+v", got.Record)
		}
		conv := ok[wire.ConversationsResult](t, e.do(t, "GET", "/v1/owners/"+esc(ann)+"/conversations", tok.Token, nil))
		if len(conv.Items) != 1 || conv.Items[0].Owner != ann || conv.Items[0].UnreadCount != 0 {
			t.Fatalf("conversations %+v", conv.Items)
		}
		evs := e.allEvents(t, e.admin, ann) // her token's, then her record's
		if len(evs) != 4 || evs[0].Type != model.EventTokenCreated || evs[1].Owner != ann {
			t.Fatalf("events of ann %+v", evs)
		}
		// Unescaped, the slash splits the DID and no route matches.
		wantErr(t, e.do(t, "GET", "/v1/boxes/"+ann+"/INBOX/records", tok.Token, nil), 404, wire.CodeNotFound, "")
	})

	t.Run("blocks", func(t *testing.T) {
		res, err := annC.Block(ctx, ann, spam)
		if err != nil || *res != (wire.BlockResult{Owner: ann, DID: spam, Blocked: true}) {
			t.Fatalf("SDK block %+v %v", res, err)
		}
		if got := e.dispatch(t, chat(spam, []string{ann}, "spam")); got.OK || !reflect.DeepEqual(got.DroppedRecipients, []string{ann}) {
			t.Fatalf("dispatch from a blocked slash DID %+v", got)
		}
		un := ok[wire.BlockResult](t, e.do(t, "DELETE", "/v1/contacts/"+esc(ann)+"/blocks/"+esc(spam), tok.Token, nil))
		if un != (wire.BlockResult{Owner: ann, DID: spam, Blocked: false}) {
			t.Fatalf("unblock %+v", un)
		}
	})

	t.Run("groups", func(t *testing.T) {
		if _, err := adminC.SetSubscribers(ctx, team, []string{ann, didBob}); err != nil {
			t.Fatal(err)
		}
		subs := ok[wire.SubscribersResult](t, e.do(t, "GET", "/v1/groups/"+esc(team)+"/subscribers", tok.Token, nil))
		if subs.Group != team || !reflect.DeepEqual(subs.Subscribers, []string{didBob, ann}) {
			t.Fatalf("subscribers %+v", subs)
		}
		gd := e.postSend(t, tok.Token, groupMsg(team, ann, "to the team"))
		if !reflect.DeepEqual(gd.LocalRecipients, []string{didBob}) {
			t.Fatalf("group post %+v", gd)
		}
		g := ok[wire.ListResult](t, e.do(t, "GET", boxPath(team, model.GroupInbox, "records")+"?tag=", tok.Token, nil))
		if len(g.Items) != 1 || g.Items[0].Record.Owner != team {
			t.Fatalf("group inbox %+v", g.Items)
		}
		tagged := ok[wire.ListResult](t, e.do(t, "GET", boxPath(didBob, model.Inbox, "records")+"?tag="+url.QueryEscape("group:"+team), e.bob, nil))
		if len(tagged.Items) != 1 {
			t.Fatalf("bob's tagged records %+v", tagged.Items)
		}
	})

	t.Run("routes", func(t *testing.T) {
		routes := []model.ContactRoute{{TunnelDID: "did:tunnel:x/y", Address: "a/b:c"}}
		res, err := adminC.SetRoutes(ctx, far, routes)
		if err != nil || res.DID != far || !reflect.DeepEqual(res.Routes, routes) {
			t.Fatalf("SDK set routes %+v %v", res, err)
		}
		got := ok[wire.RoutesResult](t, e.do(t, "GET", "/v1/routes/"+esc(far), e.admin, nil))
		if got.DID != far || !reflect.DeepEqual(got.Routes, routes) {
			t.Fatalf("routes %+v", got)
		}
		ps := e.postSend(t, tok.Token, chat(ann, []string{far}, "far away"))
		if len(ps.Deliveries) != 1 || ps.Deliveries[0].TunnelDID != "did:tunnel:x/y" {
			t.Fatalf("post_send %+v", ps)
		}
		box := ok[wire.ListResult](t, e.do(t, "GET", boxPath("did:tunnel:x/y", "tunnel_outbox", "records"), e.admin, nil))
		if len(box.Items) != 1 || box.Items[0].Record.Route.TargetDID != far {
			t.Fatalf("tunnel box %+v", box.Items)
		}
	})
}

func TestHTTPUnknownRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/nothing"},
		{"GET", "/"},
		{"POST", "/v1/boxes/did:alice/INBOX"},
		{"GET", "/v1/records/"},
	} {
		wantErr(t, e.do(t, c.method, c.path, e.admin, nil), 404, wire.CodeNotFound, "")
	}
	// A known path with the wrong method is a 405 naming the allowed
	// methods, with the JSON error body.
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/dispatch", "POST"},
		{"DELETE", "/v1/routes/did:x", "GET, HEAD, PUT"},
		{"PATCH", "/v1/records/cyrec:1/state", "POST"},
	} {
		req, err := http.NewRequest(c.method, e.url+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.admin)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != c.allow {
			t.Fatalf("%s %s: %d Allow=%q, want 405 Allow=%q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow)
		}
		r := e.do(t, c.method, c.path, e.admin, nil)
		wantErr(t, r, 405, wire.CodeMethodNotAllowed, "")
	}
}

// A query parameter a route does not take is a 400 naming it, and changes
// nothing: a misspelt filter must not answer with everything.
func TestHTTPUnknownQueryParameter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ method, path, token, field, says string }{
		{"GET", "/v1/owners/" + didBob + "/conversations?limt=5", e.bob, "limt", "takes limit"},
		{"GET", "/v1/boxes/" + didBob + "/INBOX/sync?after=3", e.bob, "after", "takes after_seq, limit, thread_key, with_object"},
		{"POST", "/v1/post_send?dry_run=1", e.alice, "dry_run", "takes none"},
		{"GET", "/v1/events?limit=5&ownr=x", e.admin, "ownr", "takes after, owner, limit"},
	} {
		var body any
		if c.method == "POST" {
			body = wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "not sent")}
		}
		err := wantErr(t, e.do(t, c.method, c.path, c.token, body), 400, wire.CodeInvalid, c.field)
		if !strings.Contains(err.Message, c.says) {
			t.Errorf("%s %s: %q does not say what it %s", c.method, c.path, err.Message, c.says)
		}
	}
	if n := len(e.syncAll(t, e.bob, didBob, model.Inbox)); n != 0 {
		t.Fatalf("a refused post_send delivered: bob has %d records", n)
	}
	// Probes, scrapers and EventSource polyfills add parameters of their
	// own (a cache buster, lastEventId on reconnect): the public routes and
	// the streams take them.
	for _, path := range []string{"/healthz?_=1", "/metrics?x=1"} {
		resp, err := e.client.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.url+"/v1/events/stream?after=0&lastEventId=3&_=123&access_token="+e.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a stream with access_token: %d", resp.StatusCode)
	}
}
