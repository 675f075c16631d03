package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Next claims (or, with LockOnTake false, peeks at) the next record of a box
// (POST /v1/boxes/{owner}/{box}/next). When the box has nothing to give
// within req.WaitMS the server answers 204 and Next returns (nil, nil).
func (c *Client) Next(ctx context.Context, owner string, box model.BoxKind, req *wire.NextRequest) (*wire.RecordWithMsg, error) {
	if req == nil {
		req = &wire.NextRequest{}
	}
	var out wire.RecordWithMsg
	status, err := c.call(ctx, http.MethodPost, boxPath(owner, box, "next"), nil, req, &out)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	return &out, nil
}

// List pages through a box by time (GET /v1/boxes/{owner}/{box}/records).
// Pass the result's NextCursorSortKey and NextCursorRecordID back in q for
// the next page; an empty NextCursorRecordID means there is none.
func (c *Client) List(ctx context.Context, q wire.ListQuery) (*wire.ListResult, error) {
	v := url.Values{}
	if len(q.States) > 0 {
		s := make([]string, len(q.States))
		for i, st := range q.States {
			s[i] = string(st)
		}
		v.Set("state", strings.Join(s, ","))
	}
	if q.Tag != "" {
		v.Set("tag", q.Tag)
	}
	// The order is always sent: the server's default (desc) is not the
	// zero value of ListQuery.Desc, so omitting it would flip asc into desc.
	if q.Desc {
		v.Set("order", "desc")
	} else {
		v.Set("order", "asc")
	}
	if q.CursorRecordID != "" || q.CursorSortKey != 0 {
		v.Set("cursor_sort_key", strconv.FormatInt(q.CursorSortKey, 10))
	}
	if q.CursorRecordID != "" {
		v.Set("cursor_record_id", q.CursorRecordID)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	v.Set("with_object", strconv.FormatBool(q.WithObject))
	var out wire.ListResult
	if _, err := c.call(ctx, http.MethodGet, boxPath(q.Owner, q.Box, "records"), v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Sync returns the records of a box with seq > q.AfterSeq in seq order
// (GET /v1/boxes/{owner}/{box}/sync). Pass the result's LastSeq as
// AfterSeq next time.
func (c *Client) Sync(ctx context.Context, q wire.SyncQuery) (*wire.SyncResult, error) {
	v := url.Values{}
	v.Set("after_seq", strconv.FormatInt(q.AfterSeq, 10))
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.ThreadKey != "" {
		v.Set("thread_key", q.ThreadKey)
	}
	v.Set("with_object", strconv.FormatBool(q.WithObject))
	var out wire.SyncResult
	if _, err := c.call(ctx, http.MethodGet, boxPath(q.Owner, q.Box, "sync"), v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RedriveBox moves a box's DEAD records back to their waiting state
// (POST /v1/boxes/{owner}/{box}/redrive).
func (c *Client) RedriveBox(ctx context.Context, owner string, box model.BoxKind, req *wire.RedriveRequest) (*wire.RedriveResult, error) {
	if req == nil {
		req = &wire.RedriveRequest{}
	}
	var out wire.RedriveResult
	if _, err := c.call(ctx, http.MethodPost, boxPath(owner, box, "redrive"), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
