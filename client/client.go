// Package client is the Go SDK for msgcenter's HTTP API (/v1).
//
// Every method takes a context first and the request and result types of
// package wire, so the SDK, the server and the CLI cannot disagree on a field
// name. A non-2xx answer becomes an *APIError carrying the server's stable
// error code; use IsNotFound and friends, or errors.Is with the sentinels of
// package model, to branch on it.
//
//	c := client.New("http://127.0.0.1:7420", token)
//	res, err := c.PostSend(ctx, &wire.PostSendRequest{Msg: msg})
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

// DefaultUserAgent is sent unless WithUserAgent overrides it.
const DefaultUserAgent = "msgcenter-go-client/1"

// maxResponseBytes bounds how much of a response body is read. A list page
// of 1000 records with message bodies is far below it; a misbehaving proxy
// cannot make the client buffer without limit.
const maxResponseBytes = 256 << 20

// Client talks to one msgcenter server with one token. It is safe for
// concurrent use.
type Client struct {
	base        string
	token       string
	http        *http.Client
	userAgent   string
	streamRetry func(err error, wait time.Duration)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the *http.Client used for every request (transport,
// TLS, proxies, timeouts). Keep any overall Timeout above the longest
// wait_ms you pass to Next, or long polls will be cut short.
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) {
		if h != nil {
			c.http = h
		}
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithStreamRetry sets a function the streams (StreamBox, StreamEvents)
// call when a connection failed or dropped and they will connect again
// after wait: a stream otherwise retries in silence, and a caller that
// shows it to a person can say why nothing arrives (the server is down).
func WithStreamRetry(fn func(err error, wait time.Duration)) Option {
	return func(c *Client) { c.streamRetry = fn }
}

// New returns a client for the server at baseURL (for example
// "http://127.0.0.1:7420", optionally with a path prefix) authenticating
// with token. An empty token sends no Authorization header.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		base:  strings.TrimRight(baseURL, "/"),
		token: token,
		// No overall timeout by default: Next long-polls for up to wait_ms,
		// and callers bound every call with their context instead.
		http:      &http.Client{},
		userAgent: DefaultUserAgent,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the server address the client was built with.
func (c *Client) BaseURL() string { return c.base }

// seg escapes one path segment. DIDs contain ':' (kept, it is legal in a
// segment) and may contain '/' (escaped to %2F so it stays one segment).
func seg(s string) string { return url.PathEscape(s) }

// call performs one request. in, when non-nil, is sent as the JSON body;
// out, when non-nil, receives the JSON answer. It returns the HTTP status so
// that callers with a meaningful 204 (Next) can tell it apart.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) (int, error) {
	return c.callAuth(ctx, method, path, q, in, out, true)
}

func (c *Client) callAuth(ctx context.Context, method, path string, q url.Values, in, out any, auth bool) (int, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		// Not json.Marshal: it writes <, > and & as six bytes each, so
		// an HTML message well within the server's body limit could be
		// sent over it.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			return 0, fmt.Errorf("msgcenter: encode %s %s request: %w", method, path, err)
		}
		body = &b
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, fmt.Errorf("msgcenter: build %s %s request: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if auth && c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("msgcenter: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("msgcenter: %s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeAPIError(resp.StatusCode, data)
	}
	if resp.StatusCode == http.StatusNoContent || out == nil {
		return resp.StatusCode, nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return resp.StatusCode, fmt.Errorf("msgcenter: %s %s: empty response body (status %d)", method, path, resp.StatusCode)
	}
	if raw, ok := out.(*json.RawMessage); ok {
		// Keep the server's bytes untouched: a message's id is a hash over
		// its content, so callers may want to verify exactly what came back.
		*raw = append((*raw)[:0], bytes.TrimSpace(data)...)
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("msgcenter: %s %s: decode response: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

// boxPath builds /v1/boxes/{owner}/{box}/{rest}.
func boxPath(owner string, box model.BoxKind, rest string) string {
	return "/v1/boxes/" + seg(owner) + "/" + seg(string(box)) + "/" + rest
}

// recordPath builds /v1/records/{id}[/rest].
func recordPath(id, rest string) string {
	p := "/v1/records/" + seg(id)
	if rest != "" {
		p += "/" + rest
	}
	return p
}
