package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/wire"
)

// Inbound is the body of a post to the Handler: one message from the
// outside system.
type Inbound struct {
	// ID is the sender's id of the message, unique within its chat: a
	// post retried with the same id makes nothing new.
	ID string `json:"id"`
	// From is the sender: the outside system's name for the user, made a
	// DID with the tunnel's platform (did:<platform>:<from>), or such a
	// DID itself. A DID of another platform is refused: a post may not
	// speak for an agent, or for people another tunnel brings in.
	From string `json:"from"`
	// To names the recipients' DIDs (default: the tunnel's).
	To []string `json:"to,omitempty"`
	// ChatID groups the messages of one conversation (and their Mails).
	ChatID string `json:"chat_id,omitempty"`
	// ReplyURL is where replies to From are posted (http or https).
	ReplyURL string `json:"reply_url,omitempty"`
	Text     string `json:"text,omitempty"`
	Title    string `json:"title,omitempty"`
	Format   string `json:"format,omitempty"`
	// Machine is structured content kept with the message.
	Machine json.RawMessage `json:"machine,omitempty"`
	// ReplyTo is the msg_id of the message this one answers.
	ReplyTo string `json:"reply_to,omitempty"`
	// SentAtMS is when it was sent (unix ms). Leave it out rather than
	// fill in the time of posting: a retried post must be the same.
	SentAtMS int64 `json:"sent_at_ms,omitempty"`
}

// Handler takes signed posts of Inbound and dispatches them. It answers
// 200 with the dispatch's result once the message is stored, 4xx (a JSON
// error naming the field) for a post that will never be taken, and 503
// with Retry-After while msgcenter cannot be reached, so that the sender
// retries.
type Handler struct {
	In     *tunnel.Inbound
	Secret []byte
	// MaxBody bounds a post (default 1 MiB).
	MaxBody int64
	Logger  *slog.Logger
	// Now is the clock signatures are checked against (default time.Now).
	Now func() time.Time
}

// Path is where the CLI's webhook tunnel serves Handler.
const Path = "/inbound"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, ok := tunnel.ReadPost(w, r, h.MaxBody)
	if !ok {
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if err := Verify(h.Secret, r.Header, body, now()); err != nil {
		tunnel.WriteError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "", err.Error())
		return
	}
	ev, err := h.event(body)
	if err != nil {
		var fe *model.Error
		if errors.As(err, &fe) {
			tunnel.WriteError(w, http.StatusBadRequest, wire.CodeInvalid, fe.Field, fe.Message)
			return
		}
		tunnel.WriteError(w, http.StatusBadRequest, wire.CodeInvalid, "", err.Error())
		return
	}
	res, err := h.In.Dispatch(r.Context(), ev)
	if err != nil {
		if status, code, field, msg, ok := tunnel.Refusal(err); ok {
			tunnel.WriteError(w, status, code, postField(field), msg)
			return
		}
		if h.Logger != nil {
			h.Logger.Error("webhook: dispatch failed", "id", ev.ID, "from", ev.From, "err", err)
		}
		w.Header().Set("Retry-After", "5")
		tunnel.WriteError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "", "msgcenter did not take the message; try again")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// postField names, in the post's terms, the message field msgcenter
// refused.
func postField(f string) string {
	for _, m := range []struct{ msg, post string }{
		{"msg.content.content", "text"}, {"msg.content.title", "title"}, {"msg.content.format", "format"},
		{"msg.content.machine", "machine"}, {"msg.thread.reply_to", "reply_to"}, {"msg.created_at_ms", "sent_at_ms"},
		{"msg.from", "from"}, {"msg.to", "to"}, {"ingress_ctx.chat_id", "chat_id"}, {"ingress_ctx.address", "reply_url"},
		{"idempotency_key", "id"}, {"msg", ""},
	} {
		if rest, ok := strings.CutPrefix(f, m.msg); ok && (rest == "" || rest[0] == '[' || rest[0] == '.') {
			return m.post + rest
		}
	}
	return f
}

// event checks a post and makes it a tunnel.Event.
func (h *Handler) event(body []byte) (*tunnel.Event, error) {
	in, err := Decode(body)
	if err != nil {
		return nil, err
	}
	ev := &tunnel.Event{ID: in.ID, From: in.From, To: in.To, ChatID: in.ChatID, Address: in.ReplyURL,
		Text: in.Text, Title: in.Title, Format: in.Format, Machine: in.Machine, ReplyTo: in.ReplyTo,
		// A route is only as good as its URL: a post without one leaves
		// the sender's route as it was.
		NoReplyRoute: in.ReplyURL == ""}
	own := "did:" + h.In.Platform + ":"
	switch {
	case !strings.HasPrefix(in.From, "did:"):
		ev.From = tunnel.SenderDID(h.In.Platform, in.From)
	case !strings.HasPrefix(in.From, own) || len(in.From) == len(own):
		return nil, model.Invalid("from", fmt.Sprintf("is a DID of another platform; this tunnel speaks only for %s… (or give the user's name without did:)", own))
	}
	if in.SentAtMS > 0 {
		ev.At = time.UnixMilli(in.SentAtMS)
	}
	return ev, nil
}

// maxIDBytes bounds an inbound id (it becomes part of an idempotency key).
const maxIDBytes = 128

// maxSentAtMS is the end of year 9999 in unix ms.
const maxSentAtMS = 253402300799999

// maxRouteBytes is the most msgcenter keeps of a route's address or chat.
const maxRouteBytes = 512

// Decode parses and checks an Inbound post: unknown fields, a missing id
// or sender, an empty message and a reply URL that is not http(s) are
// refused, each naming its field.
func Decode(body []byte) (*Inbound, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var in Inbound
	if err := dec.Decode(&in); err != nil {
		return nil, decodeErr(err)
	}
	if err := dec.Decode(new(json.RawMessage)); err != io.EOF {
		return nil, errors.New("the body holds more than one JSON object")
	}
	if string(in.Machine) == "null" {
		in.Machine = nil // as absent, not a payload
	}
	switch {
	case strings.TrimSpace(in.ID) == "":
		return nil, model.Invalid("id", "is required: the message's id in the sending system, so that a retried post makes nothing new")
	case len(in.ID) > maxIDBytes:
		return nil, model.Invalid("id", fmt.Sprintf("is %d bytes; at most %d", len(in.ID), maxIDBytes))
	case strings.TrimSpace(in.From) == "":
		return nil, model.Invalid("from", "is required: a DID, or the sending system's name for the user")
	case strings.TrimSpace(in.Text) == "" && len(in.Machine) == 0:
		return nil, model.Invalid("text", "is required (or machine): the message is empty")
	case in.SentAtMS < 0 || in.SentAtMS > maxSentAtMS:
		return nil, model.Invalid("sent_at_ms", "must be unix milliseconds, 0 to 253402300799999 (year 9999)")
	case len(in.ReplyURL) > maxRouteBytes:
		return nil, model.Invalid("reply_url", fmt.Sprintf("is %d bytes; at most %d", len(in.ReplyURL), maxRouteBytes))
	case len(in.ChatID) > maxRouteBytes:
		return nil, model.Invalid("chat_id", fmt.Sprintf("is %d bytes; at most %d", len(in.ChatID), maxRouteBytes))
	}
	for i, d := range in.To {
		// As the tunnel's own --to: a name without did: would be an
		// owner no agent reads, and the post answered as delivered.
		if !strings.HasPrefix(d, "did:") || len(d) == len("did:") {
			return nil, model.Invalid(fmt.Sprintf("to[%d]", i), fmt.Sprintf("%q is not a DID; give the agents', like did:agent:helper", d))
		}
	}
	if in.ReplyURL != "" {
		if err := checkURL(in.ReplyURL); err != nil {
			return nil, model.Invalid("reply_url", err.Error())
		}
	}
	return &in, nil
}

func decodeErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := map[string]string{"slice": "array of strings", "string": "string", "int64": "integer", "struct": "object"}[te.Type.Kind().String()]
		if te.Field == "" {
			return fmt.Errorf("the body must be a JSON object, not %s", te.Value)
		}
		if want == "" {
			want = te.Type.Kind().String()
		}
		return model.Invalid(te.Field, fmt.Sprintf("must be a JSON %s, not %s", want, te.Value))
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return model.Invalid(strings.Trim(f, `"`), "is not a field of an inbound message (id, from, to, chat_id, reply_url, text, title, format, machine, reply_to, sent_at_ms)")
	}
	if err == io.EOF {
		return errors.New("the body is empty; post a JSON object")
	}
	return fmt.Errorf("the body is not a JSON object: %s", msg)
}

// checkURL accepts an absolute http or https URL with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("is not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("must be an http or https URL, not %q", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("has no host")
	}
	return nil
}
