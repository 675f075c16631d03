package slack_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/slack"
	"github.com/msgcenter/msgcenter/wire"
)

// A transient 4xx between the tunnel and msgcenter (a proxy's 408, a 404
// while msgcenter is redeployed) is not a refusal: Slack is not answered
// 200 for a message that was not stored, so it retries.
func TestTransientProxy4xxIsNotAnswered200(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	tok, err := srv.Admin.CreateToken(context.Background(), &wire.TokenRequest{DID: tunnelDID, Role: model.RoleTunnel})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var failed atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/dispatch" && !failed.Swap(true) {
			w.WriteHeader(http.StatusRequestTimeout)
			fmt.Fprint(w, "<html>408 Request Time-out</html>")
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	in := &tunnel.Inbound{Client: client.New(proxy.URL, tok.Token), DID: tunnelDID, Platform: slack.Platform, To: []string{agentDID}, Logger: quiet}
	h := httptest.NewServer(&slack.Handler{In: in, SigningSecret: signingSecret, Logger: quiet})
	defer h.Close()
	st, _ := post(t, h.URL, callback(msgEvent("U7", "C9", "1700000000.000100", "hello")), signingSecret, time.Now())
	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: agentDID, Box: model.Inbox})
	if err != nil {
		t.Fatal(err)
	}
	if st == http.StatusOK && len(res.Items) == 0 {
		t.Fatal("Slack was answered 200 (no retry will come) but the message was not stored")
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The same message as message and as app_mention makes different machine
// content, so msgcenter answers the second with 409 (its id was used):
// that is the message stored already, not a refusal to log as a drop.
func TestMentionOfAStoredMessageIsNoRefusal(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	in := &tunnel.Inbound{Client: tun, DID: tunnelDID, Platform: slack.Platform, To: []string{agentDID}, Logger: log}
	h := httptest.NewServer(&slack.Handler{In: in, SigningSecret: signingSecret, Logger: log})
	defer h.Close()
	now := time.Now()
	post(t, h.URL, callback(msgEvent("U7", "C9", "1700000000.000100", "<@UB> hi")), signingSecret, now)
	post(t, h.URL, callback(`{"type":"app_mention","user":"U7","channel":"C9","ts":"1700000000.000100","text":"<@UB> hi"}`), signingSecret, now)
	if s := logs.String(); strings.Contains(s, "refused") {
		t.Fatalf("the app_mention of a stored message was handled as a refusal:\n%s", s)
	}
}

// A signed inner event of a type slack-go does not know is answered 200
// (nothing to store): a 4xx would make Slack retry it and count the
// failures toward disabling the app's event subscriptions.
func TestUnknownInnerEventIs200(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	in := &tunnel.Inbound{Client: srv.Client(t, tunnelDID, model.RoleTunnel), DID: tunnelDID, Platform: slack.Platform, To: []string{agentDID}, Logger: quiet}
	h := httptest.NewServer(&slack.Handler{In: in, SigningSecret: signingSecret, Logger: quiet})
	defer h.Close()
	if st, body := post(t, h.URL, callback(`{"type":"some_new_event","user":"U7"}`), signingSecret, time.Now()); st != http.StatusOK {
		t.Fatalf("a signed event of an unknown type: %d %s", st, body)
	}
}
