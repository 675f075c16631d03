// Package slack is a tunnel for a Slack app. Inbound, Slack's Events API
// posts each message to the Handler, which checks Slack's signature and
// dispatches it from did:slack:<team>:<user>; outbound, messages agents
// post_send to such a DID go to its channel with chat.postMessage
// (slack-go does the API).
//
// A message is stored before Slack is answered 200; Slack retries an
// event it got no 200 for, and a retry makes nothing new (the channel and
// the message's ts are its id). The same message seen as an app_mention
// and as a message is one message, for the same reason.
package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/wire"
)

// Platform is the platform name in routes and in senders' DIDs.
const Platform = "slack"

// Path is where the CLI's Slack tunnel takes events (the app's Request URL
// is http(s)://HOST/slack/events).
const Path = "/slack/events"

// Handler takes the Events API's posts.
type Handler struct {
	In *tunnel.Inbound
	// SigningSecret is the app's signing secret (Basic Information).
	SigningSecret string
	MaxBody       int64
	Logger        *slog.Logger
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := tunnel.ReadPost(w, r, h.MaxBody)
	if !ok {
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, h.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		tunnel.WriteError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "", "Slack's signature does not check out: "+err.Error())
		return
	}
	ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
	if err != nil {
		var outer struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(body, &outer) != nil || outer.Type == "" {
			tunnel.WriteError(w, http.StatusBadRequest, wire.CodeInvalid, "", "not an Events API post: "+err.Error())
			return
		}
		// Signed by Slack, but an event slack-go cannot read (a type it
		// does not know yet): nothing to store, and a failure would only
		// make Slack retry and count it against the app.
		h.logger().Info("slack: an event that does not parse; ignoring it", "type", outer.Type, "err", err)
		w.WriteHeader(http.StatusOK)
		return
	}
	switch ev.Type {
	case slackevents.URLVerification:
		v, _ := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
		if v == nil {
			tunnel.WriteError(w, http.StatusBadRequest, wire.CodeInvalid, "challenge", "url_verification without a challenge")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": v.Challenge})
		return
	case slackevents.CallbackEvent:
	default:
		w.WriteHeader(http.StatusOK) // app_rate_limited and what may come: nothing to store
		return
	}
	var outer struct {
		Event json.RawMessage `json:"event"`
	}
	_ = json.Unmarshal(body, &outer) // it parsed above
	te := Event(ev.TeamID, ev.InnerEvent, outer.Event)
	if te == nil {
		w.WriteHeader(http.StatusOK) // edits, bots, joins: not a person's message
		return
	}
	if _, err := h.In.Dispatch(r.Context(), te); err != nil {
		if status, _, _, _, refused := tunnel.Refusal(err); refused {
			// Slack cannot fix it: a retry would be refused the same way.
			// A conflict is the message stored already from its other
			// event (message and app_mention carry it differently).
			if status == http.StatusConflict {
				h.logger().Debug("slack: a message stored before came again", "channel", te.ChatID, "ts", te.ID)
			} else {
				h.logger().Warn("slack: msgcenter refused a message; dropping it", "channel", te.ChatID, "ts", te.ID, "err", err)
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		h.logger().Error("slack: dispatch failed; Slack will retry", "channel", te.ChatID, "ts", te.ID, "err", err)
		tunnel.WriteError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "", "msgcenter did not take the message")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// Event makes an Events API inner event (parsed, and raw as Slack sent
// it) a person's message, or nil: only new messages (plain, /me, file
// shares, thread broadcasts) and app mentions by a user count, not edits,
// deletions, joins or bots' messages. The raw event is the machine
// content, so files and blocks reach the agent as Slack sent them.
func Event(team string, in slackevents.EventsAPIInnerEvent, raw json.RawMessage) *tunnel.Event {
	var user, text, channel, ts, thread string
	dm := false
	switch m := in.Data.(type) {
	case *slackevents.MessageEvent:
		switch m.SubType {
		case "", "me_message", "file_share", "thread_broadcast":
		default:
			return nil
		}
		if m.BotID != "" || (strings.TrimSpace(m.Text) == "" && m.SubType != "file_share") {
			return nil
		}
		user, text, channel, ts, thread = m.User, m.Text, m.Channel, m.TimeStamp, m.ThreadTimeStamp
		dm = m.ChannelType == "im"
	case *slackevents.AppMentionEvent:
		if m.BotID != "" {
			return nil
		}
		user, text, channel, ts, thread = m.User, m.Text, m.Channel, m.TimeStamp, m.ThreadTimeStamp
	default:
		return nil
	}
	if user == "" || channel == "" || ts == "" {
		return nil
	}
	if len(raw) == 0 || !json.Valid(raw) {
		raw = json.RawMessage("null")
	}
	machine, err := json.Marshal(map[string]json.RawMessage{"slack": raw})
	if err != nil {
		return nil
	}
	ev := &tunnel.Event{ID: ts, From: tunnel.SenderDID(Platform, team+":"+user), ChatID: channel, Text: text, Machine: machine}
	// A reply goes where the person spoke: into the thread of a message
	// in a thread, and into a thread under a message in a channel, as
	// Slack apps answer there; a direct message is answered directly.
	if thread == "" && !dm && !strings.HasPrefix(channel, "D") {
		thread = ts
	}
	if thread != "" {
		ev.ReplyChatID = channel + threadSep + thread
	}
	if sec, err := strconv.ParseFloat(ts, 64); err == nil && sec > 0 {
		ev.At = time.UnixMilli(int64(sec * 1000))
	}
	return ev
}

// Sender posts deliveries to their route's channel.
type Sender struct {
	API *slack.Client
}

// NewClient makes slack-go's client for a bot token at apiURL (Slack's
// when empty) and checks the token (auth.test); it returns the team the
// token is for.
func NewClient(ctx context.Context, token, apiURL string) (*slack.Client, string, error) {
	var opts []slack.Option
	if apiURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(apiURL, "/")+"/"))
	}
	c := slack.New(token, opts...)
	who, err := c.AuthTestContext(ctx)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) {
			return nil, "", fmt.Errorf("slack refused the bot token (auth.test: %s)", se.Err)
		}
		return nil, "", fmt.Errorf("slack did not answer auth.test: %v", err) // %v: not msgcenter's connection error
	}
	return c, who.TeamID, nil
}

// threadSep joins a channel and a thread's ts in a route's chat_id
// (C0123/1712345678.000100); Slack's ids hold no slash.
const threadSep = "/"

// Send posts one delivery, into the thread its route names if any; the
// message's ts is its external id.
func (s *Sender) Send(ctx context.Context, d *tunnel.Delivery) (string, error) {
	channel, thread, _ := strings.Cut(d.Route.ChatID, threadSep)
	if channel == "" {
		channel = d.Route.Address
	}
	if channel == "" {
		return "", tunnel.Permanent("bad_channel", "the route names no channel (chat_id)")
	}
	text := d.Msg.Content.Content
	if t := d.Msg.Content.Title; t != "" {
		if strings.Contains(t, "*") { // it would break the bold
			text = strings.TrimSpace(t + "\n" + text)
		} else {
			text = strings.TrimSpace("*" + t + "*\n" + text)
		}
	}
	if strings.TrimSpace(text) == "" {
		return "", tunnel.Permanent("empty", "the message has no text to send")
	}
	if h := d.Heading(); h != "" {
		text = "_" + h + "_\n" + text
	}
	// Escaped: an agent quoting <!channel> must not ping a channel.
	opts := []slack.MsgOption{slack.MsgOptionText(text, true)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	_, ts, err := s.API.PostMessageContext(ctx, channel, opts...)
	var se slack.SlackErrorResponse
	if thread != "" && errors.As(err, &se) && (se.Err == "thread_not_found" || se.Err == "invalid_thread_ts") {
		// The thread is gone (its first message deleted): the answer
		// still belongs in the channel.
		_, ts, err = s.API.PostMessageContext(ctx, channel, opts[0])
	}
	if err != nil {
		return "", classify(err)
	}
	return ts, nil
}

// permanent are Slack's errors that no retry fixes.
var permanent = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "msg_too_long": true,
	"no_text": true, "restricted_action": true, "cannot_dm_bot": true, "user_not_found": true,
	"invalid_blocks": true, "too_many_attachments": true, "duplicate_channel_not_found": true,
}

// classify turns slack-go's errors into retry advice.
func classify(err error) error {
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		return tunnel.Retry("429", err.Error(), rl.RetryAfter)
	case errors.As(err, &se) && permanent[se.Err]:
		return tunnel.Permanent(se.Err, se.Err)
	case errors.As(err, &se) && se.Needed != "":
		// Retried: the app's scopes may be fixed meanwhile.
		return tunnel.Retry(se.Err, fmt.Sprintf("the app's token lacks the scope %s (it has %s): add it to the Slack app and reinstall it",
			se.Needed, cmp.Or(se.Provided, "none named")), 0)
	case errors.As(err, &se):
		return tunnel.Retry(se.Err, se.Err, 0) // invalid_auth while a token is fixed, fatal_error, …
	}
	return tunnel.Retry("send_error", err.Error(), 0)
}
