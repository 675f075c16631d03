package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/msgcenter/msgcenter/wire"
)

// GetRecord returns one record, with its message when withObject is true
// (GET /v1/records/{record_id}).
func (c *Client) GetRecord(ctx context.Context, recordID string, withObject bool) (*wire.RecordWithMsg, error) {
	v := url.Values{"with_object": {strconv.FormatBool(withObject)}}
	var out wire.RecordWithMsg
	if _, err := c.call(ctx, http.MethodGet, recordPath(recordID, ""), v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetState moves a record to a new state, checked against the transition
// table (POST /v1/records/{record_id}/state). With req.Next it also claims
// the box's next record, answered in the result's Next.
func (c *Client) SetState(ctx context.Context, recordID string, req *wire.StateRequest) (*wire.StateResult, error) {
	var out wire.StateResult
	if _, err := c.call(ctx, http.MethodPost, recordPath(recordID, "state"), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportDelivery reports the outcome of handling a held record: success
// acks it, failure schedules a retry or, out of attempts, makes it DEAD
// (POST /v1/records/{record_id}/delivery). With req.Next it also claims the
// box's next record, answered in the result's Next.
func (c *Client) ReportDelivery(ctx context.Context, recordID string, req *wire.DeliveryRequest) (*wire.StateResult, error) {
	var out wire.StateResult
	if _, err := c.call(ctx, http.MethodPost, recordPath(recordID, "delivery"), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ack reports a successful delivery of a held record, by the claim whose
// leaseID holds it (the server requires it unless the token is an
// admin's). externalMsgID is optional.
func (c *Client) Ack(ctx context.Context, recordID, leaseID, externalMsgID string) (*wire.RecordWithMsg, error) {
	r, err := c.ReportDelivery(ctx, recordID, &wire.DeliveryRequest{
		Result:  &wire.DeliveryResult{OK: true, ExternalMsgID: externalMsgID},
		LeaseID: leaseID,
	})
	if err != nil {
		return nil, err
	}
	return &r.RecordWithMsg, nil
}

// Fail reports a failed delivery of a held record, by the claim whose
// leaseID holds it (required unless the token is an admin's); res.OK is
// forced false.
func (c *Client) Fail(ctx context.Context, recordID, leaseID string, res wire.DeliveryResult) (*wire.RecordWithMsg, error) {
	res.OK = false
	r, err := c.ReportDelivery(ctx, recordID, &wire.DeliveryRequest{Result: &res, LeaseID: leaseID})
	if err != nil {
		return nil, err
	}
	return &r.RecordWithMsg, nil
}

// ExtendLease extends the lease of a held record
// (POST /v1/records/{record_id}/lease).
func (c *Client) ExtendLease(ctx context.Context, recordID string, req *wire.LeaseRequest) (*wire.RecordWithMsg, error) {
	if req == nil {
		req = &wire.LeaseRequest{}
	}
	return c.recordPost(ctx, recordID, "lease", req)
}

// RedriveRecord moves one DEAD record back to its waiting state
// (POST /v1/records/{record_id}/redrive).
func (c *Client) RedriveRecord(ctx context.Context, recordID string) (*wire.RecordWithMsg, error) {
	return c.recordPost(ctx, recordID, "redrive", struct{}{})
}

func (c *Client) recordPost(ctx context.Context, recordID, action string, body any) (*wire.RecordWithMsg, error) {
	var out wire.RecordWithMsg
	if _, err := c.call(ctx, http.MethodPost, recordPath(recordID, action), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
