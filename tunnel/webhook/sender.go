package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/tunnel"
)

// Outbound is the body the Sender posts for each delivery.
type Outbound struct {
	// DeliveryID is the same for every attempt at one delivery (the
	// record's id): a receiver that sees it twice has it already. It is
	// also sent as the Idempotency-Key header.
	DeliveryID string `json:"delivery_id"`
	MsgID      string `json:"msg_id"`
	// To is the recipient's DID, ChatID the chat the route names.
	To     string `json:"to,omitempty"`
	ChatID string `json:"chat_id,omitempty"`
	// Attempt counts from 1.
	Attempt int              `json:"attempt"`
	Msg     *message.Message `json:"msg"`
}

// maxExternalID bounds the external id kept from a receiver's answer.
const maxExternalID = 256

// Sender posts each delivery to its route's address, an http(s) URL.
// 2xx is delivered (a JSON body's "id" is kept as the external message
// id); 408, 425, 429 and 5xx are retried with the server's backoff, and no
// sooner than their Retry-After; redirects and the other 4xx (409
// included: a receiver that has a delivery_id already should answer 2xx)
// are not retried.
type Sender struct {
	Secret []byte
	// HTTP sends the posts (default: a client that follows no redirects:
	// a signed post goes where its route says, nowhere else).
	HTTP *http.Client
	// UserAgent is sent with each post.
	UserAgent string
}

// Send posts one delivery.
func (s *Sender) Send(ctx context.Context, d *tunnel.Delivery) (string, error) {
	if err := checkURL(d.Route.Address); err != nil {
		return "", tunnel.Permanent("bad_address", fmt.Sprintf("route address %q %v", d.Route.Address, err))
	}
	body, err := json.Marshal(&Outbound{DeliveryID: d.Record.RecordID, MsgID: d.Record.MsgID, To: d.Route.TargetDID,
		ChatID: d.Route.ChatID, Attempt: d.Record.Delivery.Attempts + 1, Msg: d.Msg})
	if err != nil {
		return "", tunnel.Permanent("bad_message", err.Error())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Route.Address, bytes.NewReader(body))
	if err != nil {
		return "", tunnel.Permanent("bad_address", err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", d.Record.RecordID)
	if s.UserAgent != "" {
		req.Header.Set("User-Agent", s.UserAgent)
	}
	SignRequest(req, s.Secret, time.Now(), body)
	hc := s.HTTP
	if hc == nil {
		hc = noRedirects
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err // the network: retried
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return outcome(resp, got, time.Now())
}

// noRedirects is the default client: no overall timeout (the Outbox
// bounds each send), no redirects.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// outcome reads a receiver's answer.
func outcome(resp *http.Response, body []byte, now time.Time) (string, error) {
	code := "http_" + strconv.Itoa(resp.StatusCode)
	st := resp.StatusCode
	switch {
	case st >= 200 && st < 300:
		var ack struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &ack) == nil && len(ack.ID) > 0 {
			var s string
			if json.Unmarshal(ack.ID, &s) != nil {
				s = strings.TrimSpace(string(ack.ID)) // a number
			}
			if len(s) > maxExternalID {
				return "", nil // not an id anyone would look up
			}
			return s, nil
		}
		return "", nil
	case st == http.StatusTooManyRequests || st == http.StatusRequestTimeout || st == http.StatusTooEarly || st >= 500:
		return "", tunnel.Retry(code, snippet(body), retryAfter(resp.Header.Get("Retry-After"), now))
	case st >= 300 && st < 400:
		return "", tunnel.Permanent(code, "redirected to "+resp.Header.Get("Location")+"; set the route's address to where it should go")
	default:
		return "", tunnel.Permanent(code, snippet(body))
	}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), 24*time.Hour)
	}
	return 0
}

// snippet keeps the start of a receiver's answer for the record's error.
func snippet(body []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(body)), "?")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// errNoSecret is returned by CheckSecret for an unusable secret.
var errNoSecret = errors.New("webhook: the secret must be at least 16 bytes")

// CheckSecret refuses a secret too short to be safe.
func CheckSecret(secret []byte) error {
	if len(bytes.TrimSpace(secret)) < MinSecretBytes {
		return errNoSecret
	}
	return nil
}
