package telegram_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/telegram"
	"github.com/msgcenter/msgcenter/wire"
)

func inboxOf(t *testing.T, srv *testserver.Server) []wire.RecordWithMsg {
	t.Helper()
	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: agentDID, Box: model.Inbox, WithObject: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.Items
}

// An update the library's models could not decode (a forward from a
// MessageOrigin type go-telegram/bot v1.19.0 does not know; Telegram adds
// such types) holds back no later update: the poller reads updates with
// types of its own.
func TestUnknownShapesDoNotBlockLaterUpdates(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	fake := &fakeBot{}
	api := httptest.NewServer(fake)
	defer api.Close()
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	odd := textMsg(1, 42, "forwarded")
	odd["forward_origin"] = map[string]any{"type": "some_future_origin", "date": 1}
	fake.add(10, odd)
	fake.add(11, textMsg(2, 43, "a plain message after it"))
	stop := runPoller(t, api.URL, tun)
	defer stop()
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		for _, it := range inboxOf(t, srv) {
			if m, _ := message.Decode(it.Msg); m != nil && m.Content.Content == "a plain message after it" {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	t.Fatalf("update 11 never dispatched (confirmed offset %d): update 10 wedges the poller", fake.confirmed)
}

// A 408 from a proxy in front of msgcenter (or a 404 while it is being
// redeployed) is not msgcenter refusing the message: the update is not
// confirmed, and is dispatched when the proxy lets it through.
func TestTransientProxy4xxKeepsTheUpdate(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	fake := &fakeBot{}
	api := httptest.NewServer(fake)
	defer api.Close()
	tok, err := srv.Admin.CreateToken(context.Background(), &wire.TokenRequest{DID: tunnelDID, Role: model.RoleTunnel})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var failed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/dispatch" && !failed.Swap(true) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusRequestTimeout)
			fmt.Fprint(w, "<html>408 Request Time-out</html>")
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	fake.add(10, textMsg(1, 42, "hello"))
	stop := runPoller(t, api.URL, client.New(proxy.URL, tok.Token))
	defer stop()
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if len(inboxOf(t, srv)) == 1 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	t.Fatalf("the message never reached the inbox; Telegram was told offset %d (update confirmed)", fake.confirmed)
}

// A long text goes as several sendMessage calls; after a retryable
// failure on a later piece (a 429 is the usual one: bursts to one chat)
// the retry sends only the pieces that had not gone out.
func TestRetriedLongMessageSendsTheRest(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	fake := &fakeBot{}
	api := httptest.NewServer(fake)
	defer api.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := telegram.NewBot(ctx, botToken, api.URL)
	if err != nil {
		t.Fatal(err)
	}
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	if _, err := tun.SetRoutes(ctx, "did:telegram:42", []model.ContactRoute{{ChatID: "42"}}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.answers = []string{
		`{"ok":true,"result":{"message_id":500,"date":1,"chat":{"id":42,"type":"private"}}}`,
		`{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1","parameters":{"retry_after":1}}`,
	}
	fake.mu.Unlock()
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Sender: &telegram.Sender{Bot: b}, Lease: 5 * time.Second,
		Wait: 200 * time.Millisecond, Logger: quiet}
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() { cancel(); <-done }()
	first := strings.Repeat("a", 4000)
	res, err := srv.Admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: agentDID, To: []string{"did:telegram:42"},
		Content: message.Content{Content: first + "\n" + strings.Repeat("b", 500)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Deliveries[0].RecordID
	testserver.WaitFor(t, "SENT", func() bool {
		rec, err := srv.Admin.GetRecord(ctx, id, false)
		return err == nil && rec.Record.State == model.Sent
	})
	fake.mu.Lock()
	defer fake.mu.Unlock()
	n := 0
	for _, s := range fake.sent {
		if strings.HasPrefix(s.text, "aaaa") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the first piece reached the chat %d times (of %d sendMessage calls)", n, len(fake.sent))
	}
}

// With a webhook set on the bot (or another poller running), getUpdates
// answers 409 Conflict for good: the poller fails rather than run deaf.
func TestWebhookActiveEndsThePoll(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"ok":false,"error_code":409,"description":"Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}`)
	}))
	defer api.Close()
	in := &tunnel.Inbound{Client: srv.Client(t, tunnelDID, model.RoleTunnel), DID: tunnelDID, Platform: telegram.Platform, To: []string{agentDID}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := (&telegram.Poller{Token: botToken, APIURL: api.URL, In: in, Timeout: time.Second, Logger: quiet}).Run(ctx)
	if err == nil {
		t.Fatal("Run kept polling for 5s against a bot whose webhook is set, and returned nil")
	}
}
