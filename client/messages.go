package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/wire"
)

// Dispatch delivers an inbound message into its recipients' inboxes
// (POST /v1/dispatch).
func (c *Client) Dispatch(ctx context.Context, req *wire.DispatchRequest) (*wire.DispatchResult, error) {
	var out wire.DispatchResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/dispatch", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PostSend sends an outbound message: the author's outbox copy plus one
// tunnel outbox record per planned delivery (POST /v1/post_send).
func (c *Client) PostSend(ctx context.Context, req *wire.PostSendRequest) (*wire.PostSendResult, error) {
	var out wire.PostSendResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/post_send", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetMessage returns a message's JSON exactly as the server stored it
// (GET /v1/messages/{msg_id}). Use DecodeMessage or GetMessageObject for a
// typed view.
func (c *Client) GetMessage(ctx context.Context, msgID string) (json.RawMessage, error) {
	var raw json.RawMessage
	if _, err := c.call(ctx, http.MethodGet, "/v1/messages/"+seg(msgID), nil, nil, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// GetMessageObject is GetMessage decoded into a *message.Message.
func (c *Client) GetMessageObject(ctx context.Context, msgID string) (*message.Message, error) {
	raw, err := c.GetMessage(ctx, msgID)
	if err != nil {
		return nil, err
	}
	return DecodeMessage(raw)
}

// DecodeMessage decodes a message's JSON, such as wire.RecordWithMsg.Msg.
// Unlike message.Decode it tolerates unknown fields: a client older than the
// server should still read what it understands rather than fail.
func DecodeMessage(raw json.RawMessage) (*message.Message, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("msgcenter: no message body (ask with with_object=true)")
	}
	var m message.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("msgcenter: decode message: %w", err)
	}
	return &m, nil
}
