package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Durable consumers and retention over HTTP: fan-out with filters, claims
// and acks per consumer, the consumer's cursor on streams (WebSocket acks,
// resuming without a cursor), bad input and the admin retention routes.

// topicMsg is a direct message in a topic thread.
func topicMsg(from, to, topic, text string) *message.Message {
	m := chat(from, []string{to}, text)
	if topic != "" {
		m.Thread = &message.Thread{Topic: topic}
	}
	return m
}

func consumerPath(owner, name, rest string) string {
	p := "/v1/consumers/" + esc(owner) + "/" + esc(name)
	if rest != "" {
		p += "/" + rest
	}
	return p
}

// createConsumer creates a consumer as token and asserts 201.
func (e *env) createConsumer(t testing.TB, token string, req wire.ConsumerRequest) wire.ConsumerInfo {
	t.Helper()
	r := e.do(t, "POST", "/v1/consumers", token, req)
	if r.status != http.StatusCreated {
		t.Fatalf("create consumer %q: want 201, got %s", req.Name, r)
	}
	if loc := r.header.Get("Location"); req.Name != "" && !strings.HasSuffix(loc, "/"+req.Name) {
		t.Fatalf("create consumer %q: Location %q", req.Name, loc)
	}
	r.status = http.StatusOK // ok[] checks the body strictly
	return ok[wire.ConsumerInfo](t, r)
}

// pump runs fan-out until every consumer has examined its whole source.
func (e *env) pump(t testing.TB) {
	t.Helper()
	if err := e.svc.PumpConsumers(context.Background()); err != nil {
		t.Fatalf("pump consumers: %v", err)
	}
}

func (e *env) consumer(t testing.TB, token, owner, name string) wire.ConsumerInfo {
	t.Helper()
	return ok[wire.ConsumerInfo](t, e.do(t, "GET", consumerPath(owner, name, ""), token, nil))
}

// byMsg indexes a box's records by message id.
func byMsg(items []wire.RecordWithMsg) map[string]model.Record {
	out := make(map[string]model.Record, len(items))
	for _, it := range items {
		out[it.Record.MsgID] = it.Record
	}
	return out
}

func TestHTTPConsumersFanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.postSend(t, e.carol, topicMsg(didCarol, didAlice, "work", "old work"))

	work := e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "work", SourceOwner: didAlice, SourceBox: "inbox",
		Filter: model.ConsumerFilter{Topic: []string{"work"}}})
	if work.Owner != didAlice || work.Box != "CONSUMER:work" || work.SourceBox != model.Inbox || work.AckedSeq != 0 ||
		work.Filter.Topic[0] != "work" || work.CreatedAtMS == 0 {
		t.Fatalf("created %+v", work)
	}
	fromCarol := e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "from-carol", SourceOwner: didAlice,
		SourceBox: "INBOX", Filter: model.ConsumerFilter{From: []string{didCarol}}, Start: wire.StartNow})
	if fromCarol.SourceSeq != 1 {
		t.Fatalf("start now: source_seq %d, want 1 (the source's last seq)", fromCarol.SourceSeq)
	}

	w1 := e.postSend(t, e.bob, topicMsg(didBob, didAlice, "work", "w1"))
	w2 := e.postSend(t, e.carol, topicMsg(didCarol, didAlice, "work", "w2"))
	c1 := e.postSend(t, e.carol, topicMsg(didCarol, didAlice, "chat", "c1"))
	b1 := e.postSend(t, e.bob, topicMsg(didBob, didAlice, "", "b1"))
	tail := e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "tail", SourceOwner: didAlice, SourceBox: "INBOX",
		AfterSeq: ptr(int64(3))})
	e.pump(t)

	workBox := e.syncAll(t, e.alice, didAlice, model.ConsumerBox("work"))
	carolBox := e.syncAll(t, e.alice, didAlice, model.ConsumerBox("from-carol"))
	tailBox := e.syncAll(t, e.alice, didAlice, model.ConsumerBox("tail"))
	for _, c := range []struct {
		name string
		got  []wire.RecordWithMsg
		want []string
	}{
		{"work", workBox, []string{old.MsgID, w1.MsgID, w2.MsgID}},
		{"from-carol", carolBox, []string{w2.MsgID, c1.MsgID}},
		{"tail", tailBox, []string{c1.MsgID, b1.MsgID}},
	} {
		if !equalSet(msgIDsOf(c.got), c.want) {
			t.Fatalf("consumer %s got %v, want %v", c.name, msgIDsOf(c.got), c.want)
		}
		for i, it := range c.got {
			r := it.Record
			if r.Owner != didAlice || r.BoxKind != model.ConsumerBox(c.name) || r.State != model.Unread || r.Seq != int64(i+1) {
				t.Fatalf("consumer %s record %d: %+v", c.name, i, r)
			}
		}
	}
	_ = tail

	t.Run("progress and listing", func(t *testing.T) {
		got := e.consumer(t, e.alice, didAlice, "work")
		if got.SourceSeq != 5 || got.SourceLastSeq != 5 || got.LastSeq != 3 || got.AckedSeq != 0 {
			t.Fatalf("work after fan-out: %+v", got)
		}
		list := ok[wire.ConsumersResult](t, e.do(t, "GET", "/v1/consumers", e.alice, nil))
		var names []string
		for _, c := range list.Consumers {
			names = append(names, c.Name)
		}
		if strings.Join(names, ",") != "from-carol,tail,work" {
			t.Fatalf("alice's consumers %v", names)
		}
		if n := len(ok[wire.ConsumersResult](t, e.do(t, "GET", "/v1/consumers", e.bob, nil)).Consumers); n != 0 {
			t.Fatalf("bob sees %d consumers", n)
		}
		if n := len(ok[wire.ConsumersResult](t, e.do(t, "GET", "/v1/consumers", e.admin, nil)).Consumers); n != 3 {
			t.Fatalf("admin sees %d consumers, want all 3", n)
		}
		if n := len(ok[wire.ConsumersResult](t, e.do(t, "GET", "/v1/consumers?owner="+esc(didAlice), e.alice, nil)).Consumers); n != 3 {
			t.Fatalf("alice's own with ?owner: %d", n)
		}
	})

	t.Run("claims and failures are per consumer", func(t *testing.T) {
		// w2 is in both boxes. Fail it for good in one and ack it in the other.
		x := byMsg(carolBox)[w2.MsgID]
		y := byMsg(workBox)[w2.MsgID]
		var held []wire.RecordWithMsg
		for {
			h := e.claim(t, e.alice, didAlice, model.ConsumerBox("work"))
			held = append(held, h)
			if h.Record.RecordID == y.RecordID {
				break
			}
			if len(held) > 3 {
				t.Fatalf("never claimed %s from work: %+v", y.RecordID, held)
			}
		}
		if got := e.claim(t, e.alice, didAlice, model.ConsumerBox("from-carol")); got.Record.RecordID != x.RecordID {
			t.Fatalf("from-carol claimed %+v, want w2's record %s first", got.Record, x.RecordID)
		}
		if rec := e.deliver(t, e.alice, x.RecordID, wire.DeliveryResult{ErrorCode: "broken"}); rec.State != model.Dead {
			t.Fatalf("failed for good: %+v", rec)
		}
		if rec := e.deliver(t, e.alice, y.RecordID, wire.DeliveryResult{OK: true}); rec.State != model.Readed {
			t.Fatalf("acked: %+v", rec)
		}
		if rec := e.record(t, x.RecordID); rec.State != model.Dead {
			t.Fatalf("from-carol's record after work's ack: %+v", rec)
		}
		// The source and the third consumer never noticed.
		for _, it := range e.syncAll(t, e.alice, didAlice, model.Inbox) {
			if it.Record.State != model.Unread {
				t.Fatalf("source record %+v changed", it.Record)
			}
		}
		for _, it := range e.syncAll(t, e.alice, didAlice, model.ConsumerBox("tail")) {
			if it.Record.State != model.Unread {
				t.Fatalf("tail's record %+v changed", it.Record)
			}
		}
		// A retryable failure in from-carol leaves work's records alone.
		c1x := e.claim(t, e.alice, didAlice, model.ConsumerBox("from-carol"))
		if rec := e.deliver(t, e.alice, c1x.Record.RecordID, wire.DeliveryResult{ErrorCode: "later", Retryable: true}); rec.State != model.Unread || rec.Delivery.Attempts != 1 {
			t.Fatalf("retryable failure: %+v", rec)
		}
		for _, h := range held {
			if h.Record.RecordID == y.RecordID {
				continue
			}
			if rec := e.record(t, h.Record.RecordID); rec.State != model.Reading {
				t.Fatalf("work's held record %+v", rec)
			}
		}
	})

	t.Run("delete and re-create", func(t *testing.T) {
		r := e.do(t, "DELETE", consumerPath(didAlice, "work", ""), e.alice, nil)
		if r.status != http.StatusNoContent || len(r.body) != 0 {
			t.Fatalf("delete: %s", r)
		}
		wantErr(t, e.do(t, "GET", consumerPath(didAlice, "work", ""), e.alice, nil), http.StatusNotFound, wire.CodeNotFound, "")
		wantErr(t, e.do(t, "DELETE", consumerPath(didAlice, "work", ""), e.alice, nil), http.StatusNotFound, wire.CodeNotFound, "")
		wantErr(t, e.do(t, "GET", "/v1/boxes/"+esc(didAlice)+"/consumer:work/sync", e.alice, nil), http.StatusNotFound, wire.CodeNotFound, "")
		if n := len(e.syncAll(t, e.alice, didAlice, model.Inbox)); n != 5 {
			t.Fatalf("source has %d records after the delete, want 5", n)
		}
		again := e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "work", SourceOwner: didAlice, SourceBox: "INBOX",
			Filter: model.ConsumerFilter{Topic: []string{"work"}}})
		e.pump(t)
		if got := e.syncAll(t, e.alice, didAlice, again.Box); !equalSet(msgIDsOf(got), []string{old.MsgID, w1.MsgID, w2.MsgID}) {
			t.Fatalf("re-created consumer got %v", msgIDsOf(got))
		}
		// An admin makes one for bob, on alice's box.
		forBob := e.createConsumer(t, e.admin, wire.ConsumerRequest{Owner: didBob, Name: "audit", SourceOwner: didAlice, SourceBox: "INBOX"})
		e.pump(t)
		if forBob.Owner != didBob || len(e.syncAll(t, e.bob, didBob, forBob.Box)) != 5 {
			t.Fatalf("admin-made consumer %+v", forBob)
		}
	})
}

// The box of a consumer is "consumer:NAME" in a path: ':' unescaped or
// escaped, the prefix in any case.
func TestHTTPConsumerBoxPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "a.b_c-1"
	e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: name, SourceOwner: didAlice, SourceBox: "INBOX"})
	d := e.dispatch(t, chat(didExt, []string{didAlice}, "pathy"))
	e.pump(t)
	canonical := model.ConsumerBox(name)
	for _, seg := range []string{"consumer:" + name, "CONSUMER:" + name, "Consumer:" + name, "consumer%3A" + name, "consumer%3a" + name} {
		base := "/v1/boxes/" + esc(didAlice) + "/" + seg + "/"
		list := ok[wire.ListResult](t, e.do(t, "GET", base+"records", e.alice, nil))
		sync := ok[wire.SyncResult](t, e.do(t, "GET", base+"sync", e.alice, nil))
		if len(list.Items) != 1 || len(sync.Items) != 1 || list.Items[0].Record.BoxKind != canonical ||
			list.Items[0].Record.MsgID != d.MsgID || sync.LastSeq != 1 {
			t.Fatalf("box segment %q: list %+v sync %+v", seg, list.Items, sync)
		}
	}
	got := ok[wire.RecordWithMsg](t, e.do(t, "POST", "/v1/boxes/"+esc(didAlice)+"/consumer:"+name+"/next", e.alice, wire.NextRequest{}))
	if got.Record.BoxKind != canonical || got.Record.State != model.Reading || contentOf(t, got.Msg) != "pathy" {
		t.Fatalf("claim via consumer:%s: %+v", name, got.Record)
	}
	ok[wire.RedriveResult](t, e.do(t, "POST", "/v1/boxes/"+esc(didAlice)+"/consumer:"+name+"/redrive", e.alice, nil))
	// The SDK builds the same paths.
	c := client.New(e.url, e.alice)
	res, err := c.Sync(context.Background(), wire.SyncQuery{Owner: didAlice, Box: canonical, WithObject: true})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("SDK sync of %s: %+v %v", canonical, res, err)
	}
	// Names are case-sensitive: another name is another consumer, which
	// does not exist, and its box's reads say so rather than answer empty.
	for _, op := range []struct{ method, path string }{
		{"GET", "/sync"}, {"GET", "/records"}, {"POST", "/next"}, {"POST", "/redrive"},
	} {
		wantErr(t, e.do(t, op.method, "/v1/boxes/"+esc(didAlice)+"/consumer:A.b_c-1"+op.path, e.alice, nil), http.StatusNotFound, wire.CodeNotFound, "")
	}
	wantErr(t, e.do(t, "GET", "/v1/boxes/"+esc(didAlice)+"/consumer:bad%20name/sync", e.alice, nil), http.StatusBadRequest, wire.CodeInvalid, "box")
	wantErr(t, e.do(t, "GET", "/v1/boxes/"+esc(didAlice)+"/consumer:/sync", e.alice, nil), http.StatusBadRequest, wire.CodeInvalid, "box")
	wantErr(t, e.do(t, "GET", "/v1/boxes/"+esc(didAlice)+"/consumer:"+name+"/sync", e.bob, nil), http.StatusForbidden, wire.CodeForbidden, "")
}

func TestHTTPConsumersBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "mine", SourceOwner: didAlice, SourceBox: "INBOX"})
	e.fill(t, "m", 2)
	e.pump(t)
	good := `"name":"n1","source_owner":"did:alice","source_box":"INBOX"`
	c := func(name, method, path, token string, body any, status int, code, field string) badCase {
		return badCase{name: name, method: method, path: path, token: token, body: body, status: status, code: code, field: field}
	}
	inv, forb, nf := wire.CodeInvalid, wire.CodeForbidden, wire.CodeNotFound
	e.runBad(t, []badCase{
		c("create: empty body", "POST", "/v1/consumers", e.alice, "", 400, inv, ""),
		c("create: malformed", "POST", "/v1/consumers", e.alice, `{"name":`, 400, inv, ""),
		c("create: unknown field", "POST", "/v1/consumers", e.alice, `{`+good+`,"durable":true}`, 400, inv, "durable"),
		c("create: unknown filter field", "POST", "/v1/consumers", e.alice, `{`+good+`,"filter":{"colour":["x"]}}`, 400, inv, "filter.colour"),
		c("create: filter wrong type", "POST", "/v1/consumers", e.alice, `{`+good+`,"filter":{"from":"did:bob"}}`, 400, inv, "filter.from"),
		c("create: empty filter value", "POST", "/v1/consumers", e.alice, `{`+good+`,"filter":{"topic":[""]}}`, 400, inv, "filter.topic[0]"),
		c("create: filter.to not a DID", "POST", "/v1/consumers", e.alice, `{`+good+`,"filter":{"to":["did:ok","a b"]}}`, 400, inv, "filter.to[1]"),
		c("create: blank text", "POST", "/v1/consumers", e.alice, `{`+good+`,"filter":{"text":"  "}}`, 400, inv, "filter.text"),
		c("create: no name", "POST", "/v1/consumers", e.alice, `{"source_owner":"did:alice","source_box":"INBOX"}`, 400, inv, "name"),
		c("create: bad name", "POST", "/v1/consumers", e.alice, `{"name":"my feed","source_owner":"did:alice","source_box":"INBOX"}`, 400, inv, "name"),
		c("create: name starts with a dot", "POST", "/v1/consumers", e.alice, `{"name":".x","source_owner":"did:alice","source_box":"INBOX"}`, 400, inv, "name"),
		c("create: name too long", "POST", "/v1/consumers", e.alice, `{"name":"`+strings.Repeat("x", 65)+`","source_owner":"did:alice","source_box":"INBOX"}`, 400, inv, "name"),
		c("create: no source owner", "POST", "/v1/consumers", e.alice, `{"name":"n1","source_box":"INBOX"}`, 400, inv, "source_owner"),
		c("create: unknown source box", "POST", "/v1/consumers", e.alice, `{"name":"n1","source_owner":"did:alice","source_box":"MAILBOX"}`, 400, inv, "source_box"),
		c("create: no source box", "POST", "/v1/consumers", e.alice, `{"name":"n1","source_owner":"did:alice"}`, 400, inv, "source_box"),
		c("create: a consumer's box as source", "POST", "/v1/consumers", e.alice, `{"name":"n1","source_owner":"did:alice","source_box":"consumer:mine"}`, 400, inv, "source_box"),
		c("create: start and after_seq", "POST", "/v1/consumers", e.alice, `{`+good+`,"start":"now","after_seq":1}`, 400, inv, "after_seq"),
		c("create: unknown start", "POST", "/v1/consumers", e.alice, `{`+good+`,"start":"end"}`, 400, inv, "start"),
		c("create: negative after_seq", "POST", "/v1/consumers", e.alice, `{`+good+`,"after_seq":-1}`, 400, inv, "after_seq"),
		c("create: taken name", "POST", "/v1/consumers", e.alice, `{"name":"mine","source_owner":"did:alice","source_box":"INBOX"}`, 409, wire.CodeConflict, "name"),
		c("create: for someone else", "POST", "/v1/consumers", e.alice, `{`+good+`,"owner":"did:bob"}`, 403, forb, ""),
		c("create: on another's box", "POST", "/v1/consumers", e.bob, `{`+good+`}`, 403, forb, ""),
		c("list: another owner", "GET", "/v1/consumers?owner=did:alice", e.bob, nil, 403, forb, ""),
		c("list: bad owner", "GET", "/v1/consumers?owner=did%20x", e.admin, nil, 400, inv, "owner"),
		c("get: another's", "GET", consumerPath(didAlice, "mine", ""), e.bob, nil, 403, forb, ""),
		c("get: unknown", "GET", consumerPath(didAlice, "nope", ""), e.alice, nil, 404, nf, ""),
		c("get: bad name", "GET", consumerPath(didAlice, "no pe", ""), e.alice, nil, 400, inv, "name"),
		c("get: bad owner", "GET", consumerPath("did x", "mine", ""), e.admin, nil, 400, inv, "owner"),
		c("delete: another's", "DELETE", consumerPath(didAlice, "mine", ""), e.bob, nil, 403, forb, ""),
		c("delete: unknown", "DELETE", consumerPath(didAlice, "nope", ""), e.alice, nil, 404, nf, ""),
		c("ack: another's", "POST", consumerPath(didAlice, "mine", "ack"), e.bob, `{"seq":1}`, 403, forb, ""),
		c("ack: unknown", "POST", consumerPath(didAlice, "nope", "ack"), e.alice, `{"seq":1}`, 404, nf, ""),
		c("ack: no body", "POST", consumerPath(didAlice, "mine", "ack"), e.alice, "", 400, inv, ""),
		c("ack: no seq", "POST", consumerPath(didAlice, "mine", "ack"), e.alice, `{}`, 400, inv, "seq"),
		c("ack: seq wrong type", "POST", consumerPath(didAlice, "mine", "ack"), e.alice, `{"seq":"1"}`, 400, inv, "seq"),
		c("ack: negative seq", "POST", consumerPath(didAlice, "mine", "ack"), e.alice, `{"seq":-1}`, 400, inv, "seq"),
		c("ack: beyond the box", "POST", consumerPath(didAlice, "mine", "ack"), e.alice, `{"seq":3}`, 400, inv, "seq"),
		c("stream: another's consumer box", "GET", boxPath(didAlice, model.ConsumerBox("mine"), "stream"), e.bob, nil, 403, forb, ""),
		c("retention: policy needs admin", "GET", "/v1/admin/retention", e.alice, nil, 403, forb, ""),
		c("retention: run needs admin", "POST", "/v1/admin/retention/run", e.alice, nil, 403, forb, ""),
		c("retention: run by a tunnel", "POST", "/v1/admin/retention/run", e.tunnel, `{}`, 403, forb, ""),
		c("retention: run with a body", "POST", "/v1/admin/retention/run", e.admin, `{"dry_run":true}`, 400, inv, "dry_run"),
		c("retention: wrong method", "DELETE", "/v1/admin/retention", e.admin, nil, 405, wire.CodeMethodNotAllowed, ""),
	})
}

func TestHTTPRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := ok[wire.RetentionPolicy](t, e.do(t, "GET", "/v1/admin/retention", e.admin, nil))
	month := (30 * 24 * time.Hour).Milliseconds()
	if len(p.TerminalMS) != 6 || p.TerminalMS[model.ConsumerFamily] != month || p.TerminalMS[model.Inbox] != month ||
		p.EventsMS != month || p.IntervalMS != time.Minute.Milliseconds() || !p.Enabled {
		t.Fatalf("default policy %+v", p)
	}

	e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "log", SourceOwner: didAlice, SourceBox: "INBOX"})
	e.fill(t, "m", 4)
	e.pump(t)
	// Nothing to purge yet.
	res := ok[wire.RetentionResult](t, e.do(t, "POST", "/v1/admin/retention/run", e.admin, nil))
	if len(res.Records) != 0 || res.Messages != 0 || res.Events != 0 {
		t.Fatalf("first pass purged %+v", res)
	}
	// Acknowledged consumer records go at the next pass.
	ok[wire.ConsumerInfo](t, e.do(t, "POST", consumerPath(didAlice, "log", "ack"), e.alice, wire.AckRequest{Seq: 2}))
	res = ok[wire.RetentionResult](t, e.do(t, "POST", "/v1/admin/retention/run", e.admin, `{}`))
	if res.Records[model.ConsumerFamily] != 2 || len(res.Records) != 1 || res.Messages != 0 {
		t.Fatalf("pass after ack 2: %+v", res)
	}
	left := e.syncAll(t, e.alice, didAlice, model.ConsumerBox("log"))
	if len(left) != 2 || left[0].Record.Seq != 3 {
		t.Fatalf("consumer box after purge: %+v", left)
	}
	if n := len(e.syncAll(t, e.alice, didAlice, model.Inbox)); n != 4 {
		t.Fatalf("source lost records: %d left", n)
	}
	if c := e.consumer(t, e.alice, didAlice, "log"); c.AckedSeq != 2 || c.LastSeq != 4 {
		t.Fatalf("consumer after purge %+v", c)
	}
	// A finished INBOX record goes once its retention has passed.
	held := e.claim(t, e.alice, didAlice, model.Inbox)
	e.deliver(t, e.alice, held.Record.RecordID, wire.DeliveryResult{OK: true})
	e.clock.Advance(31 * 24 * time.Hour)
	res = ok[wire.RetentionResult](t, e.do(t, "POST", "/v1/admin/retention/run", e.admin, nil))
	if res.Records[model.Inbox] != 1 || res.Events == 0 {
		t.Fatalf("pass a month later: %+v", res)
	}
	wantErr(t, e.do(t, "GET", recPath(held.Record.RecordID, ""), e.admin, nil), http.StatusNotFound, wire.CodeNotFound, "")
	metrics := string(e.do(t, "GET", "/metrics", "", nil).body)
	for _, want := range []string{`msgcenter_purged_records_total{box="CONSUMER"} 2`, `msgcenter_purged_records_total{box="INBOX"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
