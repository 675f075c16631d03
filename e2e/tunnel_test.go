package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel/webhook"
	"github.com/msgcenter/msgcenter/wire"
)

var inboundRE = regexp.MustCompile(`inbound posts to (http://\S+)`)

// The webhook tunnel as a user runs it: `msgcenter tunnel webhook` beside
// `msgcenter serve`, a signed post in, an agent's answer posted out to the
// reply URL, and a clean stop on SIGTERM.
func TestWebhookTunnel(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	tok, err := admin.CreateToken(ctx, &wire.TokenRequest{DID: "did:tunnel:hook", Role: model.RoleTunnel})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("e2e-shared-secret-0123456789")
	secretFile := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan webhookPost, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- webhookPost{path: r.URL.Path, body: string(body), sigErr: webhook.Verify(secret, r.Header, body, time.Now())}
		_, _ = w.Write([]byte(`{"id":"ext-7"}`))
	}))
	defer recv.Close()

	tun, inbound := startTunnel(t, []string{"MSGCENTER_SERVER=" + srv.URL, "MSGCENTER_TOKEN=" + tok.Token}, inboundRE,
		"tunnel", "webhook", "--did", "did:tunnel:hook", "--secret-file", secretFile,
		"--listen", "127.0.0.1:0", "--to", "did:agent:helper", "--log-level", "warn")

	// In: a signed post from "alice" lands in the agent's inbox.
	body := `{"id":"m-1","from":"alice","chat_id":"c-9","text":"hello","reply_url":"` + recv.URL + `/alice"}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, inbound, strings.NewReader(body))
	webhook.SignRequest(req, secret, time.Now(), []byte(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("inbound post answered %d", resp.StatusCode)
	}
	inbox := syncAll(ctx, t, admin, "did:agent:helper", model.Inbox)
	if len(inbox) != 1 {
		t.Fatalf("inbox has %d records", len(inbox))
	}
	m, err := message.Decode(inbox[0].Msg)
	if err != nil || m.From != "did:webhook:alice" || m.Content.Content != "hello" {
		t.Fatalf("inbound message %+v, %v", m, err)
	}

	// Out: the agent answers alice; the tunnel posts it to her reply URL.
	agent := client.New(srv.URL, mustToken(ctx, t, admin, "did:agent:helper", model.RoleAgent))
	res, err := agent.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:agent:helper",
		To: []string{"did:webhook:alice"}, Content: message.Content{Content: "hi alice"}}})
	if err != nil || len(res.Deliveries) != 1 {
		t.Fatalf("post_send %+v, %v", res, err)
	}
	select {
	case p := <-got:
		if p.sigErr != nil || p.path != "/alice" || !strings.Contains(p.body, `"hi alice"`) || !strings.Contains(p.body, res.Deliveries[0].RecordID) {
			t.Fatalf("outbound post %+v", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no outbound post within 20s\n%s", tun.logs.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := admin.GetRecord(ctx, res.Deliveries[0].RecordID, false)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Record.State == model.Sent && rec.Record.Delivery.ExternalMsgID == "ext-7" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery record %s %+v", rec.Record.State, rec.Record.Delivery)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The agent hears that its answer went out from its own event log.
	evs, err := agent.Events(ctx, wire.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var told []model.Event
	for _, e := range evs.Items {
		if e.Type == model.EventDeliverySent {
			told = append(told, e)
		}
	}
	if len(told) != 1 || told[0].RecordID != res.Deliveries[0].RecordID || told[0].Owner != "did:agent:helper" ||
		!strings.Contains(told[0].Detail, "ext-7") {
		t.Fatalf("the agent's delivery.sent events: %+v", told)
	}

	tun.stop(t)
}

type webhookPost struct {
	path, body string
	sigErr     error
}

func mustToken(ctx context.Context, t *testing.T, admin *client.Client, did string, role model.Role) string {
	t.Helper()
	res, err := admin.CreateToken(ctx, &wire.TokenRequest{DID: did, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return res.Token
}

// The Telegram tunnel as a user runs it, against a stand-in for the Bot
// API: a person's message reaches the agent, the agent's answer goes back
// to the person's chat.
func TestTelegramTunnel(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	tok := mustToken(ctx, t, admin, "did:tunnel:tg", model.RoleTunnel)
	sent := make(chan string, 4)
	var served atomic.Bool
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.TrimPrefix(r.URL.Path, "/bot42:abc/") {
		case "getMe":
			_, _ = io.WriteString(w, `{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"bot"}}`)
		case "getUpdates":
			if served.Swap(true) {
				time.Sleep(100 * time.Millisecond)
				_, _ = io.WriteString(w, `{"ok":true,"result":[]}`)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true,"result":[{"update_id":5,"message":{"message_id":9,"date":1790000000,`+
				`"text":"hi bot","from":{"id":77,"is_bot":false,"first_name":"ann"},"chat":{"id":77,"type":"private"}}}]}`)
		case "sendMessage":
			_ = r.ParseMultipartForm(1 << 20)
			sent <- r.FormValue("chat_id") + ":" + r.FormValue("text")
			_, _ = io.WriteString(w, `{"ok":true,"result":{"message_id":10,"date":1,"chat":{"id":77,"type":"private"}}}`)
		default:
			http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
		}
	}))
	defer api.Close()

	tun, _ := startTunnel(t, []string{"MSGCENTER_SERVER=" + srv.URL, "MSGCENTER_TOKEN=" + tok, "MSGCENTER_TELEGRAM_TOKEN=42:abc"}, nil,
		"tunnel", "telegram", "--did", "did:tunnel:tg", "--to", "did:agent:helper", "--api-url", api.URL, "--log-level", "warn")

	deadline := time.Now().Add(20 * time.Second)
	var inbox []wire.RecordWithMsg
	for len(inbox) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing in the agent's inbox after 20s\n%s", tun.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
		res, err := admin.Sync(ctx, wire.SyncQuery{Owner: "did:agent:helper", Box: model.Inbox, WithObject: true})
		if err != nil {
			t.Fatal(err)
		}
		inbox = res.Items
	}
	m, err := message.Decode(inbox[0].Msg)
	if err != nil || m.From != "did:telegram:77" || m.Content.Content != "hi bot" {
		t.Fatalf("inbound %+v, %v", m, err)
	}
	if _, err := admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:agent:helper",
		To: []string{"did:telegram:77"}, Content: message.Content{Content: "hello ann"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-sent:
		if got != "77:hello ann" {
			t.Fatalf("sendMessage %q", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no sendMessage within 20s\n%s", tun.logs.String())
	}
	tun.stop(t)
}

var slackEventsRE = regexp.MustCompile(`events to (http://\S+)`)

// The Slack tunnel as a user runs it, against a stand-in for Slack's Web
// API: an event posted (signed) to the tunnel reaches the agent, and the
// agent's answer is posted to the channel.
func TestSlackTunnel(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	ctx := testCtx(t, time.Minute)
	admin := srv.Client()
	tok := mustToken(ctx, t, admin, "did:tunnel:slack", model.RoleTunnel)
	posted := make(chan string, 4)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		switch r.URL.Path {
		case "/api/auth.test":
			_, _ = io.WriteString(w, `{"ok":true,"team_id":"T1","user_id":"UB"}`)
		case "/api/chat.postMessage":
			posted <- r.FormValue("channel") + ":" + r.FormValue("text")
			_, _ = io.WriteString(w, `{"ok":true,"channel":"C9","ts":"1700000100.000001"}`)
		default:
			_, _ = io.WriteString(w, `{"ok":false,"error":"unknown_method"}`)
		}
	}))
	defer api.Close()

	const signing = "e2e-signing-secret"
	tun, events := startTunnel(t, []string{"MSGCENTER_SERVER=" + srv.URL, "MSGCENTER_TOKEN=" + tok,
		"MSGCENTER_SLACK_TOKEN=xoxb-e2e", "MSGCENTER_SLACK_SIGNING_SECRET=" + signing}, slackEventsRE,
		"tunnel", "slack", "--did", "did:tunnel:slack", "--to", "did:agent:helper",
		"--listen", "127.0.0.1:0", "--api-url", api.URL+"/api", "--log-level", "warn")

	body := `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"type":"message","user":"U7","channel":"C9","ts":"1700000000.000100","text":"hi app"}}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(signing))
	_, _ = io.WriteString(mac, "v0:"+ts+":"+body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, events, strings.NewReader(body))
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("event answered %d\n%s", resp.StatusCode, tun.logs.String())
	}
	inbox := syncAll(ctx, t, admin, "did:agent:helper", model.Inbox)
	if len(inbox) != 1 {
		t.Fatalf("inbox has %d records", len(inbox))
	}
	if m, err := message.Decode(inbox[0].Msg); err != nil || m.From != "did:slack:T1:U7" || m.Content.Content != "hi app" {
		t.Fatalf("inbound %+v, %v", m, err)
	}
	if _, err := admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:agent:helper",
		To: []string{"did:slack:T1:U7"}, Content: message.Content{Content: "hello U7"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-posted:
		if got != "C9:hello U7" {
			t.Fatalf("chat.postMessage %q", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no chat.postMessage within 20s\n%s", tun.logs.String())
	}
	tun.stop(t)
}
