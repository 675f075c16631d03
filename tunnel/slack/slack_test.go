package slack_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/slack"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	tunnelDID     = "did:tunnel:slack"
	agentDID      = "did:agent:helper"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// post sends an Events API body to h, signed as Slack signs (v0) at ts.
func post(t *testing.T, url, body, secret string, ts time.Time) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	sec := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", sec, body)
	req.Header.Set("X-Slack-Request-Timestamp", sec)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func callback(inner string) string {
	return `{"token":"x","team_id":"T1","api_app_id":"A1","type":"event_callback","event_id":"Ev1","event_time":1,"event":` + inner + `}`
}

func msgEvent(user, channel, ts, text string) string {
	return fmt.Sprintf(`{"type":"message","user":%q,"channel":%q,"ts":%q,"text":%q,"channel_type":"channel"}`, user, channel, ts, text)
}

// What people write in Slack reaches the agent once: Slack's retries, and
// the same message as an app_mention, make nothing new; edits and bots'
// messages are not messages; an unsigned post is refused.
func TestInbound(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	in := &tunnel.Inbound{Client: tun, DID: tunnelDID, Platform: slack.Platform, To: []string{agentDID}, Logger: quiet}
	h := httptest.NewServer(&slack.Handler{In: in, SigningSecret: signingSecret, Logger: quiet})
	defer h.Close()
	now := time.Now()

	if st, body := post(t, h.URL, `{"token":"x","challenge":"abc123","type":"url_verification"}`, signingSecret, now); st != 200 || !strings.Contains(body, `"abc123"`) {
		t.Fatalf("url_verification: %d %s", st, body)
	}
	msg := callback(msgEvent("U7", "C9", "1700000000.000100", "hello from slack"))
	for i := range 2 { // Slack retries what it got no 200 for
		if st, body := post(t, h.URL, msg, signingSecret, now); st != 200 {
			t.Fatalf("message, try %d: %d %s", i, st, body)
		}
	}
	mention := callback(`{"type":"app_mention","user":"U7","channel":"C9","ts":"1700000000.000100","text":"hello from slack"}`)
	if st, body := post(t, h.URL, mention, signingSecret, now); st != 200 {
		t.Fatalf("mention: %d %s", st, body)
	}
	me := callback(`{"type":"message","subtype":"me_message","user":"U7","channel":"C9","ts":"1700000004.000100","text":"waves"}`)
	if st, body := post(t, h.URL, me, signingSecret, now); st != 200 {
		t.Fatalf("/me: %d %s", st, body)
	}
	for _, ignored := range []string{
		`{"type":"message","user":"U7","channel":"C9","ts":"1700000005.000100","text":"  "}`,
		`{"type":"message","subtype":"message_changed","channel":"C9","ts":"1700000001.000100","message":{"type":"message","user":"U7","text":"edited","ts":"1700000000.000100"}}`,
		`{"type":"message","subtype":"bot_message","bot_id":"B1","channel":"C9","ts":"1700000002.000100","text":"i am a bot"}`,
		`{"type":"message","subtype":"channel_join","user":"U8","channel":"C9","ts":"1700000003.000100","text":"joined"}`,
	} {
		if st, body := post(t, h.URL, callback(ignored), signingSecret, now); st != 200 {
			t.Fatalf("ignored event: %d %s", st, body)
		}
	}
	for _, bad := range []struct {
		name, secret string
		at           time.Time
		status       int
	}{
		{"another secret", "not-the-signing-secret", now, 401},
		{"stale", signingSecret, now.Add(-10 * time.Minute), 401},
	} {
		if st, body := post(t, h.URL, callback(msgEvent("U7", "C9", "1700000009.000100", "forged")), bad.secret, bad.at); st != bad.status {
			t.Fatalf("%s: %d %s", bad.name, st, body)
		}
	}
	if st, body := post(t, h.URL, `{"type":"nonsense"`, signingSecret, now); st != 400 {
		t.Fatalf("not JSON: %d %s", st, body)
	}

	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: agentDID, Box: model.Inbox, WithObject: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 2 {
		t.Fatalf("inbox has %d records, want the message and the /me", len(res.Items))
	}
	m, err := message.Decode(res.Items[0].Msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "did:slack:T1:U7" || m.Content.Content != "hello from slack" || m.CreatedAtMS != 1_700_000_000_000 {
		t.Fatalf("message %+v", m)
	}
	var machine struct {
		Slack map[string]any `json:"slack"`
	}
	if err := json.Unmarshal(m.Content.Machine, &machine); err != nil || len(machine.Slack) != 6 || machine.Slack["channel_type"] != "channel" {
		t.Fatalf("machine %s, want Slack's event as it came (six fields), %v", m.Content.Machine, err)
	}
	routes, err := srv.Admin.GetRoutes(context.Background(), "did:slack:T1:U7")
	if err != nil {
		t.Fatal(err)
	}
	// The answer goes into a thread under the person's last message.
	if len(routes.Routes) != 1 || routes.Routes[0] != (model.ContactRoute{TunnelDID: tunnelDID, Platform: "slack", ChatID: "C9/1700000004.000100"}) {
		t.Fatalf("routes %+v", routes.Routes)
	}

	// In a thread: into that thread. In a direct message: directly.
	for _, tc := range []struct{ event, user, route string }{
		{`{"type":"message","user":"U8","channel":"C9","ts":"1700000020.000100","thread_ts":"1700000010.000100","text":"in a thread","channel_type":"channel"}`,
			"did:slack:T1:U8", "C9/1700000010.000100"},
		{`{"type":"app_mention","user":"U10","channel":"C9","ts":"1700000030.000100","thread_ts":"1700000010.000100","text":"<@UB> in a thread"}`,
			"did:slack:T1:U10", "C9/1700000010.000100"},
		{`{"type":"message","user":"U9","channel":"D4","ts":"1700000021.000100","text":"direct","channel_type":"im"}`,
			"did:slack:T1:U9", "D4"},
	} {
		if st, body := post(t, h.URL, callback(tc.event), signingSecret, now); st != 200 {
			t.Fatalf("%s: %d %s", tc.event, st, body)
		}
		routes, err := srv.Admin.GetRoutes(context.Background(), tc.user)
		if err != nil {
			t.Fatal(err)
		}
		if len(routes.Routes) != 1 || routes.Routes[0].ChatID != tc.route {
			t.Fatalf("after %s: routes %+v, want chat_id %s", tc.event, routes.Routes, tc.route)
		}
	}

	// Slack redelivering an older message does not take the route back
	// to that message's thread.
	for _, ts := range []string{"1700000040.000100", "1700000050.000100", "1700000040.000100"} {
		if st, body := post(t, h.URL, callback(msgEvent("U11", "C9", ts, "m "+ts)), signingSecret, now); st != 200 {
			t.Fatalf("message %s: %d %s", ts, st, body)
		}
	}
	routes, err = srv.Admin.GetRoutes(context.Background(), "did:slack:T1:U11")
	if err != nil {
		t.Fatal(err)
	}
	if len(routes.Routes) != 1 || routes.Routes[0].ChatID != "C9/1700000050.000100" {
		t.Fatalf("after a redelivery of an older message: routes %+v, want the newer thread", routes.Routes)
	}
}

// fakeAPI is Slack's Web API as far as the tunnel uses it.
type fakeAPI struct {
	mu      sync.Mutex
	posted  []string // channel ["/" thread_ts] ":" text
	answers []func(w http.ResponseWriter)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	if r.FormValue("token") != "xoxb-good" && r.Header.Get("Authorization") != "Bearer xoxb-good" {
		fmt.Fprint(w, `{"ok":false,"error":"invalid_auth"}`)
		return
	}
	switch strings.TrimPrefix(r.URL.Path, "/api/") {
	case "auth.test":
		fmt.Fprint(w, `{"ok":true,"team_id":"T1","user_id":"UB","url":"https://x.slack.com/"}`)
	case "chat.postMessage":
		f.mu.Lock()
		defer f.mu.Unlock()
		where := r.FormValue("channel")
		if ts := r.FormValue("thread_ts"); ts != "" {
			where += "/" + ts
		}
		f.posted = append(f.posted, where+":"+r.FormValue("text"))
		if len(f.answers) > 0 {
			a := f.answers[0]
			f.answers = f.answers[1:]
			a(w)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": r.FormValue("channel"), "ts": fmt.Sprintf("1700000100.%06d", len(f.posted))})
	default:
		fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

// Agents' answers go to the person's channel; a rate limit is retried after
// Slack's wait, a channel that is gone is DEAD.
func TestOutbound(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	fake := &fakeAPI{}
	api := httptest.NewServer(fake)
	defer api.Close()
	ctx := context.Background()
	if _, _, err := slack.NewClient(ctx, "xoxb-bad", api.URL+"/api"); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("a refused token: %v", err)
	}
	c, team, err := slack.NewClient(ctx, "xoxb-good", api.URL+"/api")
	if err != nil || team != "T1" {
		t.Fatalf("NewClient: team %q, %v", team, err)
	}
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	if _, err := tun.SetRoutes(ctx, "did:slack:T1:U7", []model.ContactRoute{{ChatID: "C9"}}); err != nil {
		t.Fatal(err)
	}
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Sender: &slack.Sender{API: c}, Lease: 5 * time.Second,
		Wait: 500 * time.Millisecond, Logger: quiet}
	testserver.Run(t, ob.Run)

	id := srv.Reply(t, agentDID, "did:slack:T1:U7", "Build", "it is green")
	testserver.WaitFor(t, "SENT", func() bool { return srv.Record(t, id).State == model.Sent })
	fake.mu.Lock()
	posted := fake.posted
	fake.posted = nil
	fake.answers = []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "9")
			w.WriteHeader(http.StatusTooManyRequests)
		},
		func(w http.ResponseWriter) { fmt.Fprint(w, `{"ok":false,"error":"channel_not_found"}`) },
	}
	fake.mu.Unlock()
	if len(posted) != 1 || posted[0] != "C9:*Build*\nit is green" || srv.Record(t, id).Delivery.ExternalMsgID != "1700000100.000001" {
		t.Fatalf("posted %q, external id %q", posted, srv.Record(t, id).Delivery.ExternalMsgID)
	}
	slow := srv.Reply(t, agentDID, "did:slack:T1:U7", "", "one")
	testserver.WaitFor(t, "rate-limited back in WAIT", func() bool { r := srv.Record(t, slow); return r.State == model.Wait && r.Delivery.Attempts == 1 })
	if d := srv.Record(t, slow).Delivery; d.ErrorCode != "429" || d.RetryAfterMS != 9000 {
		t.Fatalf("rate-limited record %+v", d)
	}
	gone := srv.Reply(t, agentDID, "did:slack:T1:U7", "", "two")
	testserver.WaitFor(t, "DEAD", func() bool { return srv.Record(t, gone).State == model.Dead })
	if d := srv.Record(t, gone).Delivery; d.ErrorCode != "channel_not_found" {
		t.Fatalf("dead record %+v", d)
	}
	// A scope the app lacks is named, and retried (it may be added).
	fake.mu.Lock()
	fake.answers = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		fmt.Fprint(w, `{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:history"}`)
	}}
	fake.mu.Unlock()
	scope := srv.Reply(t, agentDID, "did:slack:T1:U7", "", "three")
	testserver.WaitFor(t, "the scope-less send back in WAIT", func() bool { r := srv.Record(t, scope); return r.State == model.Wait && r.Delivery.Attempts == 1 })
	if d := srv.Record(t, scope).Delivery; d.ErrorCode != "missing_scope" || !strings.Contains(d.ErrorMessage, "lacks the scope chat:write (it has channels:history)") {
		t.Fatalf("record refused for a scope %+v", d)
	}
	testserver.WaitFor(t, "the scope-less send SENT on its retry", func() bool { return srv.Record(t, scope).State == model.Sent })

	// A route into a thread posts into it; a thread that is gone gets the
	// answer in its channel.
	if _, err := tun.SetRoutes(ctx, "did:slack:T1:U8", []model.ContactRoute{{ChatID: "C9/1700000010.000100"}}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.posted = nil
	fake.answers = []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C9", "ts": "1700000200.000001"})
		},
		func(w http.ResponseWriter) { fmt.Fprint(w, `{"ok":false,"error":"thread_not_found"}`) },
	}
	fake.mu.Unlock()
	inThread := srv.Reply(t, agentDID, "did:slack:T1:U8", "", "three")
	testserver.WaitFor(t, "SENT into the thread", func() bool { return srv.Record(t, inThread).State == model.Sent })
	orphan := srv.Reply(t, agentDID, "did:slack:T1:U8", "", "four")
	testserver.WaitFor(t, "SENT without its thread", func() bool { return srv.Record(t, orphan).State == model.Sent })
	fake.mu.Lock()
	defer fake.mu.Unlock()
	want := []string{"C9/1700000010.000100:three", "C9/1700000010.000100:four", "C9:four"}
	if !slices.Equal(fake.posted, want) {
		t.Fatalf("posted %q, want %q", fake.posted, want)
	}
}
