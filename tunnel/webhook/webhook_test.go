package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/webhook"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	tunnelDID = "did:tunnel:hook"
	agentDID  = "did:agent:helper"
)

var secret = []byte("0123456789abcdef-shared")

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rig is a live msgcenter, the webhook tunnel's inbound handler on a
// listening server, and clients for the tunnel and the agent.
type rig struct {
	srv    *testserver.Server
	tun    *client.Client
	agent  *client.Client
	hook   *httptest.Server
	inbox  func(t *testing.T) []wire.RecordWithMsg
	routes func(t *testing.T, did string) []model.ContactRoute
}

func newRig(t *testing.T, cfg core.Config) *rig {
	t.Helper()
	r := &rig{srv: testserver.Start(t, cfg)}
	r.tun = r.srv.Client(t, tunnelDID, model.RoleTunnel)
	r.agent = r.srv.Client(t, agentDID, model.RoleAgent)
	in := &tunnel.Inbound{Client: r.tun, DID: tunnelDID, Platform: "hook", To: []string{agentDID}, Logger: quiet}
	r.hook = httptest.NewServer(&webhook.Handler{In: in, Secret: secret})
	t.Cleanup(r.hook.Close)
	r.inbox = func(t *testing.T) []wire.RecordWithMsg {
		t.Helper()
		res, err := r.agent.Sync(context.Background(), wire.SyncQuery{Owner: agentDID, Box: model.Inbox, WithObject: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Items
	}
	r.routes = func(t *testing.T, did string) []model.ContactRoute {
		t.Helper()
		res, err := r.srv.Admin.GetRoutes(context.Background(), did)
		if err != nil {
			t.Fatal(err)
		}
		return res.Routes
	}
	return r
}

// post sends body to the tunnel's inbound handler, signed at ts with key.
func (r *rig) post(t *testing.T, body string, key []byte, ts time.Time) (int, wire.ErrorDetail) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.hook.URL+webhook.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		webhook.SignRequest(req, key, ts, []byte(body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e wire.ErrorBody
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%d answer is not a JSON error: %s", resp.StatusCode, b)
		}
	}
	return resp.StatusCode, e.Error
}

func TestInbound(t *testing.T) {
	t.Parallel()
	r := newRig(t, core.Config{})
	now := time.Now()
	first := `{"id":"m-1","from":"alice","chat_id":"c-9","text":"hello","reply_url":"https://example.com/hook"}`
	if st, e := r.post(t, first, secret, now); st != 200 {
		t.Fatalf("post: %d %+v", st, e)
	}
	// A retried post, and the same text under a new id.
	if st, e := r.post(t, first, secret, now); st != 200 {
		t.Fatalf("repeat: %d %+v", st, e)
	}
	if st, e := r.post(t, `{"id":"m-2","from":"alice","chat_id":"c-9","text":"hello","reply_url":"https://example.com/hook"}`, secret, now); st != 200 {
		t.Fatalf("second: %d %+v", st, e)
	}
	got := r.inbox(t)
	if len(got) != 2 {
		t.Fatalf("inbox has %d records, want 2 (a repeated post makes nothing new; the same text under a new id does)", len(got))
	}
	m, err := message.Decode(got[0].Msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "did:hook:alice" || m.Content.Content != "hello" || !reflect.DeepEqual(m.To, []string{agentDID}) {
		t.Fatalf("message %+v", m)
	}
	if rt := got[0].Record.Route; rt == nil || rt.TunnelDID != tunnelDID || rt.ChatID != "c-9" || rt.Platform != "hook" {
		t.Fatalf("record route %+v", got[0].Record.Route)
	}
	want := []model.ContactRoute{{TunnelDID: tunnelDID, Platform: "hook", ChatID: "c-9", Address: "https://example.com/hook"}}
	if rts := r.routes(t, "did:hook:alice"); !reflect.DeepEqual(rts, want) {
		t.Fatalf("alice's routes %+v, want %+v", rts, want)
	}

	// A post without a reply_url leaves the sender's route as it was.
	if st, e := r.post(t, `{"id":"m-3","from":"alice","chat_id":"c-9","text":"again"}`, secret, now); st != 200 {
		t.Fatalf("without reply_url: %d %+v", st, e)
	}
	if rts := r.routes(t, "did:hook:alice"); !reflect.DeepEqual(rts, want) {
		t.Fatalf("alice's routes after a post without reply_url: %+v", rts)
	}

	// A sender another tunnel reaches keeps its routes (only an admin may
	// change them), and its message still gets through.
	other := model.ContactRoute{TunnelDID: "did:tunnel:mail", Address: "bob@example.com"}
	if _, err := r.srv.Admin.SetRoutes(context.Background(), "did:hook:bob", []model.ContactRoute{other}); err != nil {
		t.Fatal(err)
	}
	if st, e := r.post(t, `{"id":"b-1","from":"bob","chat_id":"c-1","text":"hey","reply_url":"http://127.0.0.1:1/x"}`, secret, now); st != 200 {
		t.Fatalf("bob: %d %+v", st, e)
	}
	if rts := r.routes(t, "did:hook:bob"); len(rts) != 1 || rts[0] != other {
		t.Fatalf("bob's routes %+v", rts)
	}
	// Without a chat, each sender is a conversation of its own: the same
	// id from two people is two messages.
	for _, from := range []string{"carol", "dave"} {
		if st, e := r.post(t, `{"id":"1","from":"`+from+`","text":"same id"}`, secret, now); st != 200 {
			t.Fatalf("%s: %d %+v", from, st, e)
		}
	}
	if got := r.inbox(t); len(got) != 6 {
		t.Fatalf("inbox has %d records, want 6", len(got))
	}
}

func TestInboundRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t, core.Config{})
	now := time.Now()
	good := `{"id":"m-1","from":"alice","text":"hi"}`
	for _, c := range []struct {
		name   string
		body   string
		key    []byte
		ts     time.Time
		status int
		field  string
	}{
		{"unsigned", good, nil, now, 401, ""},
		{"another secret", good, []byte("not-the-shared-secret"), now, 401, ""},
		{"stale timestamp", good, secret, now.Add(-10 * time.Minute), 401, ""},
		{"future timestamp", good, secret, now.Add(10 * time.Minute), 401, ""},
		{"not JSON", `hi`, secret, now, 400, ""},
		{"unknown field", `{"id":"m-1","from":"alice","text":"hi","txt":"x"}`, secret, now, 400, "txt"},
		{"wrong type", `{"id":"m-1","from":"alice","text":7}`, secret, now, 400, "text"},
		{"no id", `{"from":"alice","text":"hi"}`, secret, now, 400, "id"},
		{"no sender", `{"id":"m-1","text":"hi"}`, secret, now, 400, "from"},
		{"empty", `{"id":"m-1","from":"alice"}`, secret, now, 400, "text"},
		{"reply_url not http", `{"id":"m-1","from":"alice","text":"hi","reply_url":"ftp://x/y"}`, secret, now, 400, "reply_url"},
		{"bad recipient", `{"id":"m-1","from":"alice","text":"hi","to":["no spaces allowed"],"reply_url":"https://e/x"}`, secret, now, 400, "to[0]"},
		{"only blanks", `{"id":"m-1","from":"alice","text":"   "}`, secret, now, 400, "text"},
		{"a null machine payload only", `{"id":"m-1","from":"alice","machine":null}`, secret, now, 400, "text"},
		{"a recipient that is no DID", `{"id":"m-1","from":"alice","text":"hi","to":["did:agent:a","bob"]}`, secret, now, 400, "to[1]"},
		{"a bare did: recipient", `{"id":"m-1","from":"alice","text":"hi","to":["did:"]}`, secret, now, 400, "to[0]"},
		{"sent_at_ms in the year 3 million", `{"id":"m-1","from":"alice","text":"hi","sent_at_ms":99999999999999999}`, secret, now, 400, "sent_at_ms"},
		{"bad sender DID", `{"id":"m-1","from":"did:hook:x y","text":"hi"}`, secret, now, 400, "from"},
		{"an agent's DID", `{"id":"m-1","from":"did:agent:helper","text":"hi","reply_url":"https://evil.example/x"}`, secret, now, 400, "from"},
		{"the platform's bare prefix", `{"id":"m-1","from":"did:hook:","text":"hi"}`, secret, now, 400, "from"},
		{"reply_url too long", `{"id":"m-1","from":"alice","text":"hi","reply_url":"https://e/` + strings.Repeat("x", 600) + `"}`, secret, now, 400, "reply_url"},
		{"trailing junk", `{"id":"m-1","from":"alice","text":"hi"}]x`, secret, now, 400, ""},
		{"two objects", `{"id":"m-1","from":"alice","text":"hi"} {}`, secret, now, 400, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, e := r.post(t, c.body, c.key, c.ts)
			if st != c.status || e.Field != c.field {
				t.Fatalf("got %d %+v, want %d naming %q", st, e, c.status, c.field)
			}
		})
	}
	if got := r.inbox(t); len(got) != 0 {
		t.Fatalf("refused posts stored %d records", len(got))
	}
	if rts := r.routes(t, "did:hook:alice"); len(rts) != 0 {
		t.Fatalf("refused posts set routes %+v", rts)
	}
}

// receiver is an outside system taking the tunnel's posts: it checks each
// signature and answers from a script.
type receiver struct {
	mu      sync.Mutex
	got     []webhook.Outbound
	answers []func(w http.ResponseWriter)
	bad     []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := webhook.Verify(secret, r.Header, body, time.Now()); err != nil {
		rc.bad = append(rc.bad, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var o webhook.Outbound
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&o); err != nil {
		rc.bad = append(rc.bad, err.Error())
	}
	if r.Header.Get("Idempotency-Key") != o.DeliveryID {
		rc.bad = append(rc.bad, "Idempotency-Key "+r.Header.Get("Idempotency-Key")+" is not the delivery id")
	}
	rc.got = append(rc.got, o)
	if len(rc.answers) == 0 {
		_, _ = w.Write([]byte(`{"id":"ext-` + o.DeliveryID[len(o.DeliveryID)-4:] + `"}`))
		return
	}
	a := rc.answers[0]
	rc.answers = rc.answers[1:]
	a(w)
}

func (rc *receiver) posts() []webhook.Outbound {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]webhook.Outbound(nil), rc.got...)
}

func status(code int, hdr ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":"scripted"}`))
	}
}

func TestOutbound(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the server's retry backoff")
	}
	t.Parallel()
	r := newRig(t, core.Config{BackoffBase: 200 * time.Millisecond, MaxAttempts: 3})
	rc := &receiver{}
	out := httptest.NewServer(rc)
	defer out.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ob := &tunnel.Outbox{Client: r.tun, DID: tunnelDID, Sender: &webhook.Sender{Secret: secret}, Workers: 2, Logger: quiet,
		Lease: 5 * time.Second, Wait: time.Second}
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("outbox: %v", err)
		}
	}()

	reply := func(t *testing.T, to, text string) wire.PostSendResult {
		t.Helper()
		res, err := r.agent.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: agentDID, To: []string{to},
			Content: message.Content{Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Deliveries) != 1 {
			t.Fatalf("post_send %+v: want one delivery through the tunnel", res)
		}
		return *res
	}
	waitState := func(t *testing.T, id string, want model.State) model.Record {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			rec, err := r.srv.Admin.GetRecord(ctx, id, false)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Record.State == want {
				return rec.Record
			}
			if time.Now().After(deadline) {
				t.Fatalf("record %s is %s after 15s, want %s (%+v)", id, rec.Record.State, want, rec.Record.Delivery)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Alice writes in; the agent answers her through the tunnel.
	if st, e := r.post(t, `{"id":"m-1","from":"alice","chat_id":"c-9","text":"hi","reply_url":"`+out.URL+`/alice"}`, secret, time.Now()); st != 200 {
		t.Fatalf("inbound: %d %+v", st, e)
	}

	t.Run("delivered", func(t *testing.T) {
		res := reply(t, "did:hook:alice", "hello alice")
		rec := waitState(t, res.Deliveries[0].RecordID, model.Sent)
		posts := rc.posts()
		if len(posts) != 1 {
			t.Fatalf("receiver got %d posts", len(posts))
		}
		p := posts[0]
		if p.DeliveryID != rec.RecordID || p.MsgID != res.MsgID || p.To != "did:hook:alice" || p.ChatID != "c-9" ||
			p.Attempt != 1 || p.Msg == nil || p.Msg.Content.Content != "hello alice" {
			t.Fatalf("post %+v", p)
		}
		if want := "ext-" + rec.RecordID[len(rec.RecordID)-4:]; rec.Delivery.ExternalMsgID != want {
			t.Fatalf("external id %q, want %q", rec.Delivery.ExternalMsgID, want)
		}
	})

	t.Run("retried after Retry-After", func(t *testing.T) {
		rc.mu.Lock()
		rc.got, rc.answers = nil, []func(http.ResponseWriter){status(503, "Retry-After", "1"), status(500)}
		rc.mu.Unlock()
		start := time.Now()
		res := reply(t, "did:hook:alice", "try again")
		rec := waitState(t, res.Deliveries[0].RecordID, model.Sent)
		posts := rc.posts()
		if len(posts) != 3 || posts[0].Attempt != 1 || posts[1].Attempt != 2 || posts[2].Attempt != 3 {
			t.Fatalf("posts %+v, want attempts 1, 2, 3", posts)
		}
		for _, p := range posts {
			if p.DeliveryID != rec.RecordID {
				t.Fatalf("delivery id changed between attempts: %+v", posts)
			}
		}
		if time.Since(start) < time.Second {
			t.Fatalf("delivered %v after a 503 with Retry-After: 1", time.Since(start))
		}
	})

	t.Run("refused for good", func(t *testing.T) {
		rc.mu.Lock()
		rc.got, rc.answers = nil, []func(http.ResponseWriter){status(404)}
		rc.mu.Unlock()
		res := reply(t, "did:hook:alice", "nobody home")
		rec := waitState(t, res.Deliveries[0].RecordID, model.Dead)
		if rec.Delivery.ErrorCode != "http_404" || !strings.Contains(rec.Delivery.ErrorMessage, "scripted") || len(rc.posts()) != 1 {
			t.Fatalf("dead record %+v after %d posts", rec.Delivery, len(rc.posts()))
		}
	})

	t.Run("address that is not a URL", func(t *testing.T) {
		if _, err := r.srv.Admin.SetRoutes(ctx, "did:hook:carol", []model.ContactRoute{{TunnelDID: tunnelDID, Address: "carol@example.com"}}); err != nil {
			t.Fatal(err)
		}
		res := reply(t, "did:hook:carol", "hi carol")
		rec := waitState(t, res.Deliveries[0].RecordID, model.Dead)
		if rec.Delivery.ErrorCode != "bad_address" {
			t.Fatalf("dead record %+v", rec.Delivery)
		}
	})

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Fatalf("the receiver refused posts: %v", rc.bad)
	}
}
