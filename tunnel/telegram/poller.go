// Package telegram is a tunnel for a Telegram bot. Messages people send
// the bot are dispatched into msgcenter (from did:telegram:<user id>);
// messages agents post_send to such a DID go out through the bot to the
// chat the person last wrote from.
//
// Inbound is at least once from Telegram and exactly once into msgcenter:
// an update is confirmed to Telegram (by asking for the updates after it)
// only once its dispatch is stored, and a dispatch seen again makes
// nothing new, so a crash or restart of the tunnel loses no message and
// doubles none. (go-telegram/bot's own poller confirms updates as soon as
// it has read them, before they are handled; that is why the poll is
// here, and the library does the sending.)
package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/tunnel"
)

// DefaultAPIURL is Telegram's Bot API.
const DefaultAPIURL = "https://api.telegram.org"

// Platform is the platform name in routes and in senders' DIDs.
const Platform = "telegram"

// Poller long-polls a bot's updates and dispatches its messages.
type Poller struct {
	// Token is the bot's token from @BotFather.
	Token string
	// APIURL is the Bot API's base URL (default DefaultAPIURL; a local
	// Bot API server or a test's fake).
	APIURL string
	In     *tunnel.Inbound
	// Timeout is the long poll's (default 30 s).
	Timeout time.Duration
	HTTP    *http.Client
	Logger  *slog.Logger
}

// Run polls until ctx ends. It returns early only when Telegram refuses
// the token.
func (p *Poller) Run(ctx context.Context) error {
	p.defaults()
	var offset int64
	var pause, stuck time.Duration // stuck: the backoff of an update that will not dispatch
	conflicts := 0
	for ctx.Err() == nil {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause):
			}
		}
		updates, err := p.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ae *apiError
			if errors.As(err, &ae) && (ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound) {
				return fmt.Errorf("telegram refused the bot token: %w", err)
			}
			if errors.As(err, &ae) && ae.Code == http.StatusConflict {
				// A webhook is set on the bot, or another poller runs:
				// either way this one gets nothing. A moment's overlap
				// with a previous process is the only kind that passes.
				if conflicts++; conflicts >= maxConflicts {
					return fmt.Errorf("telegram gives this bot's updates to someone else (a webhook is set, or another tunnel polls): stop it, or delete the webhook: %w", err)
				}
				pause = time.Second
			} else if errors.As(err, &ae) && ae.RetryAfter > 0 {
				pause = ae.RetryAfter
			} else {
				pause = min(max(2*pause, 500*time.Millisecond), 30*time.Second)
			}
			p.Logger.Warn("telegram: getUpdates failed; trying again", "err", err, "in", pause)
			continue
		}
		pause, conflicts = 0, 0
		for _, u := range updates {
			if err := p.handle(ctx, u); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// Not confirmed: Telegram hands it (and those after it)
				// out again.
				stuck = min(max(2*stuck, time.Second), 30*time.Second)
				pause = stuck
				p.Logger.Warn("telegram: could not dispatch an update; trying again", "update_id", u.UpdateID, "err", err, "in", pause)
				break
			}
			stuck = 0
			offset = u.UpdateID + 1
		}
	}
	return nil
}

func (p *Poller) defaults() {
	if p.APIURL == "" {
		p.APIURL = DefaultAPIURL
	}
	if p.Timeout <= 0 {
		p.Timeout = 30 * time.Second
	}
	if p.HTTP == nil {
		p.HTTP = &http.Client{}
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
}

// maxConflicts is how many 409s in a row (a second apart) end the poll.
const maxConflicts = 3

// update is what the tunnel reads of a Telegram update: its own small
// types, and the message as Telegram sent it. (Decoding into the
// library's models fails on a union type it does not know yet, such as a
// new forward origin, and one such update would hold back all the others.)
type update struct {
	UpdateID int64           `json:"update_id"`
	Message  json.RawMessage `json:"message"`
}

type tgMessage struct {
	MessageID int    `json:"message_id"`
	Date      int64  `json:"date"`
	Text      string `json:"text"`
	Caption   string `json:"caption"`
	// ThreadID is the forum topic of a message in one.
	ThreadID       int64 `json:"message_thread_id"`
	IsTopicMessage bool  `json:"is_topic_message"`
	From           *struct {
		ID    int64 `json:"id"`
		IsBot bool  `json:"is_bot"`
	} `json:"from"`
	Chat struct {
		ID int64 `json:"id"`
	} `json:"chat"`
}

// handle dispatches one update. An update that carries no message, or
// that msgcenter refuses for good (it names the field), is logged and
// skipped: asking again would not change the answer.
func (p *Poller) handle(ctx context.Context, u *update) error {
	ev, err := Event(u.Message)
	if err != nil {
		p.Logger.Warn("telegram: an update's message does not decode; skipping it", "update_id", u.UpdateID, "err", err)
		return nil
	}
	if ev == nil {
		return nil
	}
	_, err = p.In.Dispatch(ctx, ev)
	if status, _, _, _, refused := tunnel.Refusal(err); err != nil && refused {
		if status == http.StatusConflict {
			p.Logger.Info("telegram: a message stored before came again", "update_id", u.UpdateID, "err", err)
		} else {
			p.Logger.Warn("telegram: msgcenter refused a message; skipping it", "update_id", u.UpdateID, "err", err)
		}
		return nil
	}
	return err
}

// Event makes an update's message (as Telegram sent it; nil or null for
// updates that carry none) an inbound event, or nil for a message that is
// not a person's (a bot's, a channel's). The text is the message's text
// or caption; the whole message goes into machine content, so photos,
// stickers and replies reach the agent as data.
func Event(raw json.RawMessage) (*tunnel.Event, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m tgMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m.From == nil || m.From.IsBot {
		return nil, nil
	}
	machine, err := json.Marshal(map[string]json.RawMessage{"telegram": raw})
	if err != nil {
		return nil, err
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	ev := &tunnel.Event{
		ID:      strconv.Itoa(m.MessageID),
		From:    tunnel.SenderDID(Platform, strconv.FormatInt(m.From.ID, 10)),
		ChatID:  strconv.FormatInt(m.Chat.ID, 10),
		Text:    text,
		Machine: machine,
		At:      time.Unix(m.Date, 0),
	}
	if m.IsTopicMessage && m.ThreadID != 0 {
		// In a forum's topic, the answer goes to that topic, not to its
		// General one.
		ev.ReplyChatID = ev.ChatID + topicSep + strconv.FormatInt(m.ThreadID, 10)
	}
	return ev, nil
}

// apiError is an answer of the Bot API that is not ok.
type apiError struct {
	Code        int
	Description string
	RetryAfter  time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("telegram: %d %s", e.Code, e.Description)
}

// getUpdates asks for the updates from offset on, confirming those
// before it.
func (p *Poller) getUpdates(ctx context.Context, offset int64) ([]*update, error) {
	body, _ := json.Marshal(map[string]any{"offset": offset, "timeout": int(p.Timeout.Seconds()),
		"allowed_updates": []string{"message"}})
	ctx, cancel := context.WithTimeout(ctx, p.Timeout+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		strings.TrimRight(p.APIURL, "/")+"/bot"+p.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, redact(err, p.Token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.HTTP.Do(req)
	if err != nil {
		return nil, redact(err, p.Token)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, redact(err, p.Token)
	}
	var r struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("telegram: getUpdates answered %d with no JSON: %w", resp.StatusCode, err)
	}
	if !r.OK {
		return nil, &apiError{Code: r.ErrorCode, Description: r.Description, RetryAfter: time.Duration(r.Parameters.RetryAfter) * time.Second}
	}
	out := make([]*update, 0, len(r.Result))
	for _, raw := range r.Result {
		var u update
		if err := json.Unmarshal(raw, &u); err != nil || u.UpdateID == 0 {
			// Without its id an update cannot be confirmed on its own;
			// the ones after it confirm it.
			p.Logger.Warn("telegram: an update does not decode; skipping it", "update", string(raw[:min(len(raw), 200)]), "err", err)
			continue
		}
		out = append(out, &u)
	}
	if len(out) == 0 && len(r.Result) > 0 {
		return nil, errors.New("telegram: no update of the batch decodes") // back off rather than spin
	}
	return out, nil
}
