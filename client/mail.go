package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/msgcenter/msgcenter/wire"
)

// PendingMail lists Mails whose bursts have not ended yet, soonest due
// first (GET /v1/mail/pending): an admin's token lists anyone's (or
// q.Sender's), a tunnel's those it dispatched. q.Limit <= 0 uses the
// server's default.
func (c *Client) PendingMail(ctx context.Context, q wire.PendingMailQuery) (*wire.PendingMailResult, error) {
	v := url.Values{}
	setIf(v, "sender", q.Sender)
	setLimit(v, q.Limit)
	var out wire.PendingMailResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/mail/pending", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FlushMail writes every pending Mail now, ended or not (POST
// /v1/mail/flush; admin).
func (c *Client) FlushMail(ctx context.Context) (*wire.MailFlushResult, error) {
	var out wire.MailFlushResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/mail/flush", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
