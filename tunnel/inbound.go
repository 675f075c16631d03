package tunnel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Inbound dispatches the platform's events into msgcenter as the tunnel.
// It is safe for concurrent use.
type Inbound struct {
	Client *client.Client
	// DID is the tunnel's DID; Client's token must be the tunnel's.
	DID string
	// Platform and AccountID name the platform and the tunnel's account
	// on it; both go into each record's route and into the route kept for
	// each sender.
	Platform  string
	AccountID string
	// To are the recipients of an event that names none (the agent that
	// answers the platform, say).
	To []string
	// Aggregate, when set, delivers each chat's bursts as one Mail (see
	// wire.Aggregate); the zero durations take the server's defaults.
	Aggregate *Aggregate
	Logger    *slog.Logger

	mu     sync.Mutex
	routes map[string]knownRoute // sender DID → the route last set for it
}

// Aggregate configures Inbound's Mails.
type Aggregate struct {
	Window, MaxWait time.Duration
}

// Event is one message from the platform.
type Event struct {
	// ID is the platform's id of the message, unique within the chat. A
	// repeat of the event (a webhook retried, a poll that saw it twice) is
	// dispatched again with the same id and makes nothing new; two
	// messages with the same text and different ids stay two.
	ID string
	// From is the DID the sender has in msgcenter (for example
	// did:telegram:42).
	From string
	// To, when empty, is Inbound.To.
	To []string
	// ChatID and Address say where a reply to From goes on the platform;
	// at least one is needed for From to be answerable (see NoReplyRoute).
	ChatID, Address string
	// ReplyChatID, when set, is where in the chat a reply goes (a
	// thread): the sender's route takes it instead of ChatID, while
	// ChatID keeps naming the chat in the message's keys, so a repeated
	// event makes the same message whatever its thread.
	ReplyChatID string
	// NoReplyRoute leaves From's routes alone.
	NoReplyRoute bool
	Text         string
	Title        string
	// Format is the text's MIME type (default text/plain).
	Format string
	// Machine is structured content kept with the message (the platform's
	// raw event, attachments' metadata).
	Machine json.RawMessage
	// ReplyTo is the msg_id this message answers, when the platform says.
	ReplyTo string
	// At is when the platform says the message was sent. Leave it zero
	// when the platform does not say: a time the tunnel made up would
	// differ between repeats of the event, which would then conflict.
	At time.Time
}

type routeKey struct{ chatID, address string }

// knownRoute is a route Inbound set, and when; eventAt is when the
// platform says the message it was set for was sent.
type knownRoute struct {
	routeKey
	at, eventAt time.Time
}

// routeRecheck is how long Inbound trusts its memory of a route it set:
// after that, the sender's next message sets it again, in case an admin
// or another process of the tunnel changed it meanwhile.
const routeRecheck = time.Minute

// maxKey bounds an idempotency key; the event's parts are hashed beyond it.
const maxKey = 256

// Dispatch stores one event as a message from ev.From in the inboxes of
// its recipients (or as a part of its chat's pending Mail), after making
// sure a reply to ev.From will come back through this tunnel. It answers
// once the message is stored: the platform can be told it arrived.
func (in *Inbound) Dispatch(ctx context.Context, ev *Event) (*wire.DispatchResult, error) {
	if ev.ID == "" {
		return nil, fmt.Errorf("tunnel: event has no id: %w", model.Invalid("id", "is required: the platform's message id makes a repeated event harmless"))
	}
	to := ev.To
	if len(to) == 0 {
		to = in.To
	}
	if len(to) == 0 {
		return nil, fmt.Errorf("tunnel: event %s: %w", ev.ID, model.Invalid("to", "names nobody, and the tunnel has no default recipients"))
	}
	// What msgcenter would refuse is refused before the route is touched.
	if err := message.CheckDID("from", ev.From, true); err != nil {
		return nil, err
	}
	for i, d := range to {
		if err := message.CheckDID(fmt.Sprintf("to[%d]", i), d, true); err != nil {
			return nil, err
		}
	}
	if !ev.NoReplyRoute && (ev.ChatID != "" || ev.Address != "") {
		// Before the dispatch: an agent that answers at once must find
		// the route already there. A route msgcenter refuses (the DID is
		// not the tunnel's to route) does not hold the message back.
		if err := in.ensureRoute(ctx, ev.From, routeKey{cmp.Or(ev.ReplyChatID, ev.ChatID), ev.Address}, ev.At); err != nil {
			var api *client.APIError
			if !errors.As(err, &api) || api.Status >= 500 {
				return nil, err
			}
			in.logger().Warn("tunnel: the sender's route was refused; dispatching without it", "from", ev.From, "err", err)
		}
	}
	var at int64 // absent unless the platform says: a retried event must make the same message
	if !ev.At.IsZero() {
		at = ev.At.UnixMilli()
	}
	format := ev.Format
	if format == "" {
		format = "text/plain"
	}
	chat := ev.ChatID
	if chat == "" {
		// No chat: each sender is a conversation of its own (two people
		// may both send their message "1").
		chat = "from=" + ev.From
	}
	m := &message.Message{
		From:        ev.From,
		To:          to,
		Kind:        message.KindChat,
		CreatedAtMS: at,
		// The platform's id makes the message itself: the same text sent
		// twice is two messages, the same event seen twice is one.
		Nonce:   in.key(chat, ev.ID),
		Content: message.Content{Title: ev.Title, Format: format, Content: ev.Text, Machine: ev.Machine},
	}
	if ev.ReplyTo != "" {
		m.Thread = &message.Thread{ReplyTo: ev.ReplyTo}
	}
	req := &wire.DispatchRequest{
		Msg: m,
		IngressCtx: &model.Route{TunnelDID: in.DID, Platform: in.Platform, AccountID: in.AccountID,
			ChatID: ev.ChatID, Address: ev.Address},
		IdempotencyKey: in.key(chat, ev.ID),
	}
	if in.Aggregate != nil {
		req.Aggregate = &wire.Aggregate{Key: in.key(chat, "")}
		if in.Aggregate.Window > 0 {
			req.Aggregate.WindowMS = ptr(in.Aggregate.Window.Milliseconds())
		}
		if in.Aggregate.MaxWait > 0 {
			req.Aggregate.MaxWaitMS = ptr(in.Aggregate.MaxWait.Milliseconds())
		}
	}
	return in.Client.Dispatch(ctx, req)
}

// key is the platform-wide name of a chat (and of a message in it).
func (in *Inbound) key(chat, id string) string {
	k := keyPart(in.Platform) + ":" + keyPart(in.AccountID) + ":" + keyPart(chat)
	if id != "" {
		k += ":" + keyPart(id)
	}
	if len(k) > maxKey {
		k = "h:" + message.IDOf([]byte(k))
	}
	return k
}

// keyPart escapes the separator out of one part of a key, so that two
// different (chat, id) pairs never make the same key.
func keyPart(s string) string {
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(s)
}

func (in *Inbound) logger() *slog.Logger {
	if in.Logger != nil {
		return in.Logger
	}
	return slog.Default()
}

// ensureRoute sets from's route through this tunnel to where it last
// spoke from, unless it is already there. The server keeps the sender's
// routes through other tunnels.
func (in *Inbound) ensureRoute(ctx context.Context, from string, rk routeKey, eventAt time.Time) error {
	in.mu.Lock()
	known, ok := in.routes[from]
	in.mu.Unlock()
	if ok && known.routeKey == rk && time.Since(known.at) < routeRecheck {
		return nil
	}
	if ok && !eventAt.IsZero() && eventAt.Before(known.eventAt) {
		// An older message (a platform's redelivery) does not take the
		// route back from where the sender wrote since: to a thread the
		// conversation has left. (Within this process's memory; a
		// restart forgets, and its first redelivery may move it once.)
		return nil
	}
	// A tunnel's token sees and replaces only the routes through itself;
	// an admin's sees them all and replaces them all. Keeping every route
	// through another tunnel is right for both.
	have, err := in.Client.GetRoutes(ctx, from)
	if err != nil {
		return routeErr(from, err)
	}
	routes := []model.ContactRoute{}
	for _, r := range have.Routes {
		if r.TunnelDID != in.DID {
			routes = append(routes, r)
		}
	}
	routes = append(routes, model.ContactRoute{TunnelDID: in.DID, Platform: in.Platform, AccountID: in.AccountID,
		ChatID: rk.chatID, Address: rk.address})
	if _, err := in.Client.SetRoutes(ctx, from, routes); err != nil {
		return routeErr(from, err)
	}
	in.mu.Lock()
	if in.routes == nil {
		in.routes = make(map[string]knownRoute)
	}
	if len(in.routes) >= maxRoutesKept {
		clear(in.routes) // a cache: forgetting costs one PUT per sender
	}
	in.routes[from] = knownRoute{rk, time.Now(), eventAt}
	in.mu.Unlock()
	return nil
}

func routeErr(from string, err error) error {
	if errors.Is(err, model.ErrForbidden) {
		return fmt.Errorf("tunnel: route to %s (the token must be the tunnel's or an admin's): %w", from, err)
	}
	return fmt.Errorf("tunnel: route to %s: %w", from, err)
}

// maxRoutesKept bounds Inbound's memory of the routes it has set.
const maxRoutesKept = 100_000

// SenderDID makes a DID for a platform's user: did:<platform>:<id>, with
// the id's characters a DID cannot hold escaped.
func SenderDID(platform, id string) string {
	return EscapedDID(platform, id, func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' || r == ':'
	})
}

// EscapedDID is did:<platform>:<id> with every character of id that keep
// refuses percent-encoded (a connector whose ids may hold more, such as
// mail addresses, keeps more).
func EscapedDID(platform, id string, keep func(rune) bool) string {
	var b strings.Builder
	b.WriteString("did:" + platform + ":")
	for _, r := range id {
		if keep(r) && r != '%' {
			b.WriteRune(r)
			continue
		}
		for _, c := range []byte(string(r)) {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }
