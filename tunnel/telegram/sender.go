package telegram

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot"

	"github.com/msgcenter/msgcenter/tunnel"
)

// maxText is the most characters (UTF-16 code units) Telegram takes in
// one message.
const maxText = 4096

// Sender sends deliveries through the bot to their route's chat_id.
type Sender struct {
	Bot *bot.Bot
}

// NewBot makes the library's client for token at apiURL (DefaultAPIURL
// when empty), checking the token with getMe.
func NewBot(ctx context.Context, token, apiURL string) (*bot.Bot, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	b, err := bot.New(token, bot.WithServerURL(strings.TrimRight(apiURL, "/")), bot.WithSkipGetMe(),
		bot.WithErrorsHandler(func(error) {}))
	if err != nil {
		return nil, err
	}
	if _, err := b.GetMe(ctx); err != nil {
		// %v: the cause is Telegram's (or the network's to it), not
		// msgcenter's, and must not read as a msgcenter connection error.
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			return nil, fmt.Errorf("telegram refused the bot token (getMe: %v)", redact(err, token))
		}
		return nil, fmt.Errorf("telegram at %s did not answer getMe: %v", apiURL, redact(err, token))
	}
	return b, nil
}

// Send sends one delivery. A text longer than Telegram takes goes as
// several messages, in order; the first one's id is the external id.
func (s *Sender) Send(ctx context.Context, d *tunnel.Delivery) (string, error) {
	chat, topic, hasTopic := strings.Cut(d.Route.ChatID, topicSep)
	field := "chat_id"
	if chat == "" {
		chat, field = d.Route.Address, "address (there is no chat_id)"
	}
	if _, err := strconv.ParseInt(chat, 10, 64); err != nil && !strings.HasPrefix(chat, "@") {
		return "", tunnel.Permanent("bad_chat_id", fmt.Sprintf("route %s %q is neither a Telegram chat id nor an @channel", field, chat))
	}
	var thread int
	if hasTopic {
		var err error
		if thread, err = strconv.Atoi(topic); err != nil || thread <= 0 {
			return "", tunnel.Permanent("bad_chat_id", fmt.Sprintf("route chat_id %q: the forum topic after %q is no message_thread_id", d.Route.ChatID, topicSep))
		}
	}
	text := d.Msg.Content.Content
	if t := d.Msg.Content.Title; t != "" {
		text = strings.TrimSpace(t + "\n\n" + text)
	}
	if h := d.Heading(); h != "" && strings.TrimSpace(text) != "" {
		text = h + "\n" + text
	}
	if strings.TrimSpace(text) == "" {
		return "", tunnel.Permanent("empty", "the message has no text to send")
	}
	parts := split(text, maxText)
	// A retry after some pieces went out sends only the rest (the failed
	// attempt's error message says how far it got).
	from, first := resumeAt(d.Record.Delivery.ErrorMessage, len(parts))
	migrated := false
	for i := from; i < len(parts); i++ {
		m, err := s.Bot.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: parts[i]})
		var moved *bot.MigrateError
		if err != nil && !migrated && errors.As(err, &moved) && moved.MigrateToChatID != 0 {
			// The group became a supergroup with a new id: the answer
			// goes there. The route keeps the old id until the person
			// writes again from the new chat, which sets it anew.
			migrated, chat = true, strconv.Itoa(moved.MigrateToChatID)
			m, err = s.Bot.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: parts[i]})
		}
		if err != nil {
			err = classify(err, s.Bot.Token())
			var e *tunnel.Error
			if i > 0 && errors.As(err, &e) {
				e.Message = fmt.Sprintf("[sent %d/%d %s] %s", i, len(parts), first, e.Message)
			}
			return "", err
		}
		if first == "" {
			first = strconv.Itoa(m.ID)
		}
	}
	return first, nil
}

// topicSep joins a chat and a forum topic in a route's chat_id
// (-1001234/56): the answer goes to that topic.
const topicSep = "/"

// resumeAt reads "[sent N/M ID]" from a failed attempt's error message:
// the first N of M pieces went out, the first of them as message ID.
func resumeAt(lastError string, pieces int) (int, string) {
	var n, m int
	var id string
	if _, err := fmt.Sscanf(lastError, "[sent %d/%d %s", &n, &m, &id); err != nil || m != pieces || n <= 0 || n >= m {
		return 0, ""
	}
	return n, strings.TrimSuffix(id, "]")
}

// classify turns the library's errors into retry advice: a rate limit is
// retried after its wait, a chat that is gone or a bot that was blocked is
// not retried, and everything else (the network, Telegram's 5xx, a token
// being fixed) is retried with backoff.
func classify(err error, token string) error {
	var tooMany *bot.TooManyRequestsError
	var migrated *bot.MigrateError
	msg := redact(err, token).Error()
	switch {
	case errors.As(err, &tooMany):
		return tunnel.Retry("429", msg, time.Duration(tooMany.RetryAfter)*time.Second)
	case errors.As(err, &migrated):
		return tunnel.Permanent("400", fmt.Sprintf("%s; the group is now chat %d, which refused it too", msg, migrated.MigrateToChatID))
	case errors.Is(err, bot.ErrorForbidden):
		return tunnel.Permanent("403", msg)
	case errors.Is(err, bot.ErrorBadRequest):
		return tunnel.Permanent("400", msg)
	case errors.Is(err, bot.ErrorNotFound): // the Bot API's answer to a wrong token or path
		return tunnel.Retry("404", msg+" (the bot token or --api-url is wrong)", 0)
	case errors.Is(err, bot.ErrorUnauthorized):
		return tunnel.Retry("401", msg+" (the bot token was refused)", 0)
	}
	return tunnel.Retry("send_error", msg, 0)
}

// split cuts text into pieces of at most n characters as Telegram counts
// them (UTF-16 code units: an emoji outside the BMP is two), at a line
// break where there is one in the second half of a piece.
func split(text string, n int) []string {
	var out []string
	for units(text) > n {
		cut := byteOffset(text, n)
		if i := strings.LastIndexByte(text[:cut], '\n'); i > cut/2 {
			cut = i + 1
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	out = append(out, text)
	// Telegram refuses an empty text: a piece of line breaks alone (the
	// end of a long reply) is not sent.
	return slices.DeleteFunc(out, func(p string) bool { return strings.TrimSpace(p) == "" })
}

// units is s's length in UTF-16 code units.
func units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// byteOffset is where s's first n UTF-16 code units end (never inside a
// character).
func byteOffset(s string, n int) int {
	for i, r := range s {
		if n -= utf16.RuneLen(r); n < 0 {
			return i
		}
	}
	return len(s)
}

func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "<token>"))
}
