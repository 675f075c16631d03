package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// SetReceipt records a reader's status for a message (set_read_state,
// POST /v1/read_receipts). The latest receipt per (msg, reader) wins.
func (c *Client) SetReceipt(ctx context.Context, req *wire.ReceiptRequest) (*model.Receipt, error) {
	var out model.Receipt
	if _, err := c.call(ctx, http.MethodPost, "/v1/read_receipts", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListReceipts lists read receipts by message, group and/or reader
// (GET /v1/read_receipts). At least one of the three is required.
func (c *Client) ListReceipts(ctx context.Context, q wire.ReceiptQuery) (*wire.ReceiptsResult, error) {
	v := url.Values{}
	setIf(v, "msg_id", q.MsgID)
	setIf(v, "group_id", q.GroupID)
	setIf(v, "reader", q.Reader)
	setLimit(v, q.Limit)
	if q.CursorMsgID != "" {
		v.Set("cursor_at_ms", strconv.FormatInt(q.CursorAtMS, 10))
		v.Set("cursor_msg_id", q.CursorMsgID)
		v.Set("cursor_reader", q.CursorReader)
	}
	var out wire.ReceiptsResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/read_receipts", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetSubscribers replaces a group's subscribers
// (PUT /v1/groups/{group}/subscribers). An empty list removes them all.
func (c *Client) SetSubscribers(ctx context.Context, group string, subscribers []string) (*wire.SubscribersResult, error) {
	return c.SetGroup(ctx, group, &wire.SubscribersRequest{Subscribers: subscribers})
}

// SetGroup is SetSubscribers that can also set how the group delivers
// (req.Delivery; empty keeps it).
func (c *Client) SetGroup(ctx context.Context, group string, req *wire.SubscribersRequest) (*wire.SubscribersResult, error) {
	if req.Subscribers == nil {
		// Send [] rather than null so "remove all" is explicit on the wire.
		r := *req
		r.Subscribers = []string{}
		req = &r
	}
	var out wire.SubscribersResult
	if _, err := c.call(ctx, http.MethodPut, groupPath(group), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSubscribers lists a group's subscribers (GET /v1/groups/{group}/subscribers).
func (c *Client) GetSubscribers(ctx context.Context, group string) (*wire.SubscribersResult, error) {
	var out wire.SubscribersResult
	if _, err := c.call(ctx, http.MethodGet, groupPath(group), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteGroup makes group a plain DID again (DELETE /v1/groups/{group}).
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	_, err := c.call(ctx, http.MethodDelete, "/v1/groups/"+seg(group), nil, nil, nil)
	return err
}

func groupPath(group string) string { return "/v1/groups/" + seg(group) + "/subscribers" }

// Block makes owner refuse messages from did
// (PUT /v1/contacts/{owner}/blocks/{did}).
func (c *Client) Block(ctx context.Context, owner, did string) (*wire.BlockResult, error) {
	return c.block(ctx, http.MethodPut, owner, did)
}

// Blocks lists whom owner blocks (GET /v1/contacts/{owner}/blocks).
func (c *Client) Blocks(ctx context.Context, owner string, limit int) (*wire.BlocksResult, error) {
	v := url.Values{}
	setLimit(v, limit)
	var out wire.BlocksResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/contacts/"+url.PathEscape(owner)+"/blocks", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Unblock lifts a block (DELETE /v1/contacts/{owner}/blocks/{did}).
func (c *Client) Unblock(ctx context.Context, owner, did string) (*wire.BlockResult, error) {
	return c.block(ctx, http.MethodDelete, owner, did)
}

func (c *Client) block(ctx context.Context, method, owner, did string) (*wire.BlockResult, error) {
	var out wire.BlockResult
	p := "/v1/contacts/" + seg(owner) + "/blocks/" + seg(did)
	if _, err := c.call(ctx, method, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetRoutes replaces the routes through which did is reached
// (PUT /v1/routes/{did}). An empty list removes them all.
func (c *Client) SetRoutes(ctx context.Context, did string, routes []model.ContactRoute) (*wire.RoutesResult, error) {
	if routes == nil {
		routes = []model.ContactRoute{}
	}
	var out wire.RoutesResult
	req := &wire.RoutesRequest{Routes: routes}
	if _, err := c.call(ctx, http.MethodPut, "/v1/routes/"+seg(did), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRoutes lists the routes of did (GET /v1/routes/{did}).
func (c *Client) GetRoutes(ctx context.Context, did string) (*wire.RoutesResult, error) {
	var out wire.RoutesResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/routes/"+seg(did), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Conversations lists an owner's conversations, latest first
// (GET /v1/owners/{owner}/conversations). limit <= 0 uses the server's default.
// ReadConversation marks owner's conversation read, whole or up to a seq
// (POST /v1/owners/{owner}/conversations/read).
func (c *Client) ReadConversation(ctx context.Context, owner string, req *wire.ReadConversationRequest) (*wire.ReadConversationResult, error) {
	var out wire.ReadConversationResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/owners/"+seg(owner)+"/conversations/read", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) Conversations(ctx context.Context, q wire.ConversationQuery) (*wire.ConversationsResult, error) {
	v := url.Values{}
	setLimit(v, q.Limit)
	if q.CursorThreadKey != "" {
		v.Set("cursor_updated_at_ms", strconv.FormatInt(q.CursorUpdatedAtMS, 10))
		v.Set("cursor_thread_key", q.CursorThreadKey)
	}
	var out wire.ConversationsResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/owners/"+seg(q.Owner)+"/conversations", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func setIf(v url.Values, key, val string) {
	if val != "" {
		v.Set(key, val)
	}
}

func setLimit(v url.Values, limit int) {
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
}
