package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/msgcenter/msgcenter/wire"
)

// Events returns a page of the event log after q.After
// (GET /v1/events). Pass the result's NextAfter as After for the next page.
func (c *Client) Events(ctx context.Context, q wire.EventQuery) (*wire.EventsResult, error) {
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	setIf(v, "owner", q.Owner)
	setLimit(v, q.Limit)
	var out wire.EventsResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/events", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Scheduled lists pending delayed messages, soonest first, optionally of
// one sender and for one recipient (GET /v1/scheduled): an admin's token
// lists anyone's, any other only those its DID sent. q.Limit <= 0 uses the
// server's default.
func (c *Client) Scheduled(ctx context.Context, q wire.ScheduledQuery) (*wire.ScheduledResult, error) {
	v := url.Values{}
	setIf(v, "sender", q.Sender)
	setIf(v, "recipient", q.Recipient)
	setLimit(v, q.Limit)
	var out wire.ScheduledResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/scheduled", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelScheduled cancels the pending delayed message id, as its author or
// an admin (DELETE /v1/scheduled/{id}), and returns the entry as it was.
func (c *Client) CancelScheduled(ctx context.Context, id int64) (*wire.ScheduledItem, error) {
	var out wire.ScheduledItem
	if _, err := c.call(ctx, http.MethodDelete, "/v1/scheduled/"+strconv.FormatInt(id, 10), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FlushScheduled delivers pending delayed messages now
// (POST /v1/scheduled/flush).
func (c *Client) FlushScheduled(ctx context.Context, req *wire.FlushRequest) (*wire.FlushResult, error) {
	if req == nil {
		req = &wire.FlushRequest{}
	}
	var out wire.FlushResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/scheduled/flush", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateToken creates a token for a DID and role (POST /v1/tokens). The
// token is in the result only; the server keeps a hash.
func (c *Client) CreateToken(ctx context.Context, req *wire.TokenRequest) (*wire.TokenResult, error) {
	var out wire.TokenResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/tokens", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTokens lists tokens, oldest first (GET /v1/tokens): an admin's
// call every DID's (or q.DID's), anyone else's its own.
func (c *Client) ListTokens(ctx context.Context, q wire.TokenQuery) (*wire.TokensResult, error) {
	v := url.Values{}
	setIf(v, "did", q.DID)
	setLimit(v, q.Limit)
	var out wire.TokensResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/tokens", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeToken deletes a token by its id (DELETE /v1/tokens/{token_id}):
// requests that present it are refused from then on.
func (c *Client) RevokeToken(ctx context.Context, tokenID string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(tokenID), nil, nil, nil)
	return err
}

// Health checks that the server is up (GET /healthz, no token needed). It
// returns nil only when the server answers {"status":"ok"}.
func (c *Client) Health(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
	}
	if _, err := c.callAuth(ctx, http.MethodGet, "/healthz", nil, nil, &out, false); err != nil {
		return err
	}
	if out.Status != "ok" {
		return fmt.Errorf("msgcenter: health: server status %q", out.Status)
	}
	return nil
}
