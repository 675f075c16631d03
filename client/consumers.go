package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A durable consumer is a named, filtered subscription to a source box with
// its own box, model.ConsumerBox(name): claim, ack and fail its records
// with Next, Ack and Fail on that box like any other, read it as a log with
// Sync or StreamConsumer, and advance its server-side cursor with
// AckConsumer.

func consumerPath(owner, name, rest string) string {
	p := "/v1/consumers/" + seg(owner) + "/" + seg(name)
	if rest != "" {
		p += "/" + rest
	}
	return p
}

// CreateConsumer creates a durable consumer (POST /v1/consumers). An empty
// req.Owner makes it the caller's.
func (c *Client) CreateConsumer(ctx context.Context, req *wire.ConsumerRequest) (*wire.ConsumerInfo, error) {
	var out wire.ConsumerInfo
	if _, err := c.call(ctx, http.MethodPost, "/v1/consumers", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListConsumers lists consumers with their progress (GET /v1/consumers):
// owner's, or with an empty owner the caller's (an admin's: everyone's).
func (c *Client) ListConsumers(ctx context.Context, owner string) (*wire.ConsumersResult, error) {
	v := url.Values{}
	setIf(v, "owner", owner)
	var out wire.ConsumersResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/consumers", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetConsumer returns one consumer with its progress
// (GET /v1/consumers/{owner}/{name}).
func (c *Client) GetConsumer(ctx context.Context, owner, name string) (*wire.ConsumerInfo, error) {
	var out wire.ConsumerInfo
	if _, err := c.call(ctx, http.MethodGet, consumerPath(owner, name, ""), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteConsumer deletes a consumer and every record of its box
// (DELETE /v1/consumers/{owner}/{name}).
func (c *Client) DeleteConsumer(ctx context.Context, owner, name string) error {
	_, err := c.call(ctx, http.MethodDelete, consumerPath(owner, name, ""), nil, nil, nil)
	return err
}

// AckConsumer advances the consumer's cursor to seq, never back
// (POST /v1/consumers/{owner}/{name}/ack), and returns the consumer.
func (c *Client) AckConsumer(ctx context.Context, owner, name string, seq int64) (*wire.ConsumerInfo, error) {
	var out wire.ConsumerInfo
	if _, err := c.call(ctx, http.MethodPost, consumerPath(owner, name, "ack"), nil, &wire.AckRequest{Seq: seq}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StreamConsumer follows a consumer's box like StreamBox, starting after
// the consumer's acknowledged cursor (the server's; acknowledge with
// AckConsumer). Across reconnects it resumes after the last frame fn
// accepted.
func (c *Client) StreamConsumer(ctx context.Context, owner, name string, fn func(wire.StreamFrame) error) error {
	return c.StreamBox(ctx, owner, model.ConsumerBox(name), -1, fn)
}

// RetentionPolicy returns the retention policy in force (admin;
// GET /v1/admin/retention).
func (c *Client) RetentionPolicy(ctx context.Context) (*wire.RetentionPolicy, error) {
	var out wire.RetentionPolicy
	if _, err := c.call(ctx, http.MethodGet, "/v1/admin/retention", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunRetention runs one full retention pass now and reports what it
// deleted (admin; POST /v1/admin/retention/run).
func (c *Client) RunRetention(ctx context.Context) (*wire.RetentionResult, error) {
	var out wire.RetentionResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/admin/retention/run", nil, struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
