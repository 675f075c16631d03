package telegram_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	"github.com/msgcenter/msgcenter/tunnel/telegram"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	botToken  = "123:secret-bot-token"
	tunnelDID = "did:tunnel:tg"
	agentDID  = "did:agent:helper"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeBot is Telegram's Bot API as far as the tunnel uses it: getMe,
// getUpdates (updates stay until an offset past them confirms them) and
// sendMessage (answered from a script).
type fakeBot struct {
	mu        sync.Mutex
	updates   []map[string]any
	confirmed int64 // the highest offset asked for
	sent      []sentMsg
	answers   []string // sendMessage answers, JSON; then ok
}

type sentMsg struct{ chatID, text, thread string }

func (f *fakeBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+botToken+"/")
	if !ok {
		http.Error(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "getMe":
		fmt.Fprint(w, `{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"bot"}}`)
	case "getUpdates":
		var p struct{ Offset int64 }
		_ = json.NewDecoder(r.Body).Decode(&p)
		f.mu.Lock()
		f.confirmed = max(f.confirmed, p.Offset)
		var out []map[string]any
		for _, u := range f.updates {
			if u["update_id"].(int64) >= p.Offset {
				out = append(out, u)
			}
		}
		f.mu.Unlock()
		if len(out) == 0 {
			time.Sleep(50 * time.Millisecond) // a short long poll
		}
		b, _ := json.Marshal(map[string]any{"ok": true, "result": out})
		_, _ = w.Write(b)
	case "sendMessage":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sent = append(f.sent, sentMsg{r.FormValue("chat_id"), r.FormValue("text"), r.FormValue("message_thread_id")})
		if len(f.answers) > 0 {
			a := f.answers[0]
			f.answers = f.answers[1:]
			fmt.Fprint(w, a)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"date":1,"chat":{"id":1,"type":"private"}}}`, 100+len(f.sent))
	default:
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
	}
}

func (f *fakeBot) add(id int64, msg map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, map[string]any{"update_id": id, "message": msg})
}

func textMsg(id, user int, text string) map[string]any {
	return map[string]any{"message_id": id, "date": 1_790_000_000, "text": text,
		"from": map[string]any{"id": user, "is_bot": false, "first_name": "u"},
		"chat": map[string]any{"id": user, "type": "private"}}
}

// runPoller runs a poller until stop is called.
func runPoller(t *testing.T, api string, c *client.Client) (stop func()) {
	t.Helper()
	in := &tunnel.Inbound{Client: c, DID: tunnelDID, Platform: telegram.Platform, To: []string{agentDID}, Logger: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&telegram.Poller{Token: botToken, APIURL: api, In: in, Timeout: time.Second, Logger: quiet}).Run(ctx)
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	}
}

// What people write the bot reaches the agent once, even when Telegram
// hands the updates out again (a tunnel that crashed before confirming
// them); nothing is confirmed that msgcenter did not store.
func TestInbound(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	fake := &fakeBot{}
	api := httptest.NewServer(fake)
	defer api.Close()
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	inbox := func() []wire.RecordWithMsg {
		res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: agentDID, Box: model.Inbox, WithObject: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Items
	}

	// msgcenter refuses the tunnel (a revoked token): nothing is confirmed.
	fake.add(10, textMsg(1, 42, "hello"))
	stop := runPoller(t, api.URL, client.New(srv.URL, "revoked"))
	time.Sleep(300 * time.Millisecond)
	stop()
	fake.mu.Lock()
	if fake.confirmed > 10 {
		t.Fatalf("update 10 confirmed (offset %d) though it was never stored", fake.confirmed)
	}
	fake.mu.Unlock()

	fake.add(11, textMsg(2, 42, "hello")) // the same text again: another message
	fake.add(12, map[string]any{"message_id": 3, "date": 1, "text": "i am a bot", "from": map[string]any{"id": 7, "is_bot": true}, "chat": map[string]any{"id": 7, "type": "private"}})
	fake.add(13, map[string]any{"message_id": 4, "date": 1, "sticker": map[string]any{"file_id": "s"}, "from": map[string]any{"id": 43, "is_bot": false}, "chat": map[string]any{"id": -5, "type": "group"}})
	stop = runPoller(t, api.URL, tun)
	testserver.WaitFor(t, "three messages in the inbox", func() bool { return len(inbox()) == 3 })
	testserver.WaitFor(t, "updates confirmed", func() bool { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.confirmed == 14 })
	stop()

	// Telegram hands them all out again: nothing new.
	fake.mu.Lock()
	fake.confirmed = 0
	fake.mu.Unlock()
	stop = runPoller(t, api.URL, tun)
	testserver.WaitFor(t, "updates confirmed again", func() bool { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.confirmed == 14 })
	stop()
	items := inbox()
	if len(items) != 3 {
		t.Fatalf("inbox has %d records after the updates came again, want 3", len(items))
	}
	var got []string
	for _, it := range items {
		m, err := message.Decode(it.Msg)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.From+" "+m.Content.Content)
		if !strings.Contains(string(m.Content.Machine), `"telegram"`) {
			t.Fatalf("machine content %s", m.Content.Machine)
		}
	}
	want := []string{"did:telegram:42 hello", "did:telegram:42 hello", "did:telegram:43 "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("inbox %q, want %q", got, want)
	}
	routes, err := srv.Admin.GetRoutes(context.Background(), "did:telegram:43")
	if err != nil {
		t.Fatal(err)
	}
	if len(routes.Routes) != 1 || routes.Routes[0] != (model.ContactRoute{TunnelDID: tunnelDID, Platform: "telegram", ChatID: "-5"}) {
		t.Fatalf("routes of did:telegram:43: %+v", routes.Routes)
	}
}

// Agents' answers go out through the bot to the chat: long texts in
// pieces, rate limits retried after Telegram's wait, a blocked bot DEAD.
func TestOutbound(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	fake := &fakeBot{}
	api := httptest.NewServer(fake)
	defer api.Close()
	ctx := context.Background()
	b, err := telegram.NewBot(ctx, botToken, api.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := telegram.NewBot(ctx, "999:wrong", api.URL); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("a refused bot token: %v (and it must not be printed)", err)
	}
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	if _, err := tun.SetRoutes(ctx, "did:telegram:42", []model.ContactRoute{{ChatID: "42"}}); err != nil {
		t.Fatal(err)
	}
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Sender: &telegram.Sender{Bot: b}, Lease: 5 * time.Second,
		Wait: 500 * time.Millisecond, Logger: quiet}
	testserver.Run(t, ob.Run)

	long := strings.Repeat("é", 4000) + "\n" + strings.Repeat("x", 500)
	id := srv.Reply(t, agentDID, "did:telegram:42", "Report", long)
	testserver.WaitFor(t, "the long message SENT", func() bool { return srv.Record(t, id).State == model.Sent })
	fake.mu.Lock()
	sent := fake.sent
	fake.sent = nil
	fake.mu.Unlock()
	if len(sent) != 2 || sent[0].chatID != "42" || sent[0].text != "Report\n\n"+strings.Repeat("é", 4000)+"\n" || sent[1].text != strings.Repeat("x", 500) {
		t.Fatalf("sent %d messages: %.40q…", len(sent), sent)
	}
	if ext := srv.Record(t, id).Delivery.ExternalMsgID; ext != "101" {
		t.Fatalf("external id %q, want the first piece's", ext)
	}

	fake.mu.Lock()
	fake.answers = []string{
		`{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}`,
		`{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}`,
	}
	fake.mu.Unlock()
	slow := srv.Reply(t, agentDID, "did:telegram:42", "", "one")
	testserver.WaitFor(t, "the rate-limited message back in WAIT", func() bool { r := srv.Record(t, slow); return r.State == model.Wait && r.Delivery.Attempts == 1 })
	if d := srv.Record(t, slow).Delivery; d.ErrorCode != "429" || d.RetryAfterMS != 7000 || strings.Contains(d.ErrorMessage, "secret-bot-token") {
		t.Fatalf("rate-limited record %+v", d)
	}
	blocked := srv.Reply(t, agentDID, "did:telegram:42", "", "two")
	testserver.WaitFor(t, "the blocked-bot message DEAD", func() bool { return srv.Record(t, blocked).State == model.Dead })
	if d := srv.Record(t, blocked).Delivery; d.ErrorCode != "403" || !strings.Contains(d.ErrorMessage, "blocked") {
		t.Fatalf("dead record %+v", d)
	}

	// A group that became a supergroup gets the answer at its new id.
	if _, err := tun.SetRoutes(ctx, "did:telegram:7", []model.ContactRoute{{ChatID: "-100"}}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.sent = nil
	fake.answers = []string{`{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001234}}`}
	fake.mu.Unlock()
	moved := srv.Reply(t, agentDID, "did:telegram:7", "", "to the group")
	testserver.WaitFor(t, "the message to a migrated group SENT", func() bool { return srv.Record(t, moved).State == model.Sent })
	fake.mu.Lock()
	sent = fake.sent
	fake.sent = nil
	fake.mu.Unlock()
	if len(sent) != 2 || sent[0].chatID != "-100" || sent[1].chatID != "-1001234" || sent[1].text != "to the group" {
		t.Fatalf("sent %+v; want the old chat refused, then the new one", sent)
	}

	// A route into a forum topic posts there; one whose topic is no
	// number is DEAD, not sent to the General topic.
	if _, err := tun.SetRoutes(ctx, "did:telegram:8", []model.ContactRoute{{ChatID: "-1001234/56"}}); err != nil {
		t.Fatal(err)
	}
	topic := srv.Reply(t, agentDID, "did:telegram:8", "", "in the topic")
	testserver.WaitFor(t, "the topic's message SENT", func() bool { return srv.Record(t, topic).State == model.Sent })
	if _, err := tun.SetRoutes(ctx, "did:telegram:9", []model.ContactRoute{{ChatID: "-1001234/general"}}); err != nil {
		t.Fatal(err)
	}
	bad := srv.Reply(t, agentDID, "did:telegram:9", "", "nowhere")
	testserver.WaitFor(t, "the bad topic's message DEAD", func() bool { return srv.Record(t, bad).State == model.Dead })
	fake.mu.Lock()
	sent = fake.sent
	fake.mu.Unlock()
	if len(sent) != 1 || sent[0] != (sentMsg{"-1001234", "in the topic", "56"}) {
		t.Fatalf("sent %+v; want the topic's message alone", sent)
	}
	// A route with only an address that is no chat id is DEAD, and the
	// error names the field the route has.
	if _, err := tun.SetRoutes(ctx, "did:telegram:10", []model.ContactRoute{{Address: "tg:10"}}); err != nil {
		t.Fatal(err)
	}
	addr := srv.Reply(t, agentDID, "did:telegram:10", "", "nowhere either")
	testserver.WaitFor(t, "the bad address's message DEAD", func() bool { return srv.Record(t, addr).State == model.Dead })
	if d := srv.Record(t, addr).Delivery; d.ErrorCode != "bad_chat_id" || !strings.Contains(d.ErrorMessage, `address (there is no chat_id) "tg:10"`) {
		t.Fatalf("dead record %+v; want its error to name the route's address", d)
	}

	// A members group without a chat of its own reaches a person among
	// its members in the person's chat, saying who wrote and where.
	const team = "did:group:team"
	if _, err := srv.Admin.SetGroup(ctx, team, &wire.SubscribersRequest{Subscribers: []string{agentDID, "did:telegram:43"},
		Delivery: model.DeliverToMembers}); err != nil {
		t.Fatal(err)
	}
	if _, err := tun.SetRoutes(ctx, "did:telegram:43", []model.ContactRoute{{ChatID: "43"}}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.sent = nil
	fake.mu.Unlock()
	res, err := srv.Client(t, agentDID, model.RoleAgent).PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{
		From: team, Source: agentDID, Kind: message.KindGroupMsg, Content: message.Content{Content: "standup at 10"}}})
	if err != nil || len(res.Deliveries) != 1 {
		t.Fatalf("post to the group = %+v, %v; want one delivery, to did:telegram:43", res, err)
	}
	testserver.WaitFor(t, "the group's message to its person SENT", func() bool { return srv.Record(t, res.Deliveries[0].RecordID).State == model.Sent })
	fake.mu.Lock()
	sent = fake.sent
	fake.mu.Unlock()
	if want := (sentMsg{"43", agentDID + " in " + team + ":\nstandup at 10", ""}); len(sent) != 1 || sent[0] != want {
		t.Fatalf("sent %+v; want %+v", sent, want)
	}
}

// A message in a forum topic is answered in that topic; a reply in an
// ordinary group (which Telegram also gives a message_thread_id) is
// answered in the chat.
func TestEventTopics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg, chat, reply string
	}{
		{`{"message_id":9,"date":1,"text":"hi","message_thread_id":56,"is_topic_message":true,"from":{"id":5,"is_bot":false},"chat":{"id":-1001234,"type":"supergroup","is_forum":true}}`, "-1001234", "-1001234/56"},
		{`{"message_id":9,"date":1,"text":"re","message_thread_id":7,"reply_to_message":{"message_id":7,"date":1,"chat":{"id":-5,"type":"supergroup"}},"from":{"id":5,"is_bot":false},"chat":{"id":-5,"type":"supergroup"}}`, "-5", ""},
		{`{"message_id":9,"date":1,"text":"dm","from":{"id":5,"is_bot":false},"chat":{"id":5,"type":"private"}}`, "5", ""},
	} {
		ev, err := telegram.Event(json.RawMessage(tc.msg))
		if err != nil || ev == nil || ev.ChatID != tc.chat || ev.ReplyChatID != tc.reply {
			t.Errorf("Event(%s) = %+v, %v; want chat %s, reply chat %q", tc.msg, ev, err, tc.chat, tc.reply)
		}
	}
}
