package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// GroupInput is read_group's input.
type GroupInput struct {
	Group    string `json:"group" jsonschema:"the group's DID; the agent must be one of its members"`
	AfterSeq int64  `json:"after_seq,omitempty" jsonschema:"next_after_seq of the last call; 0 reads from the beginning"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many messages at most, 1 to 100 (default 10)"`
	MaxText  int    `json:"max_text,omitempty" jsonschema:"show at most this many characters of each title and text, and leave out a machine payload longer than that (default 2000)"`
}

// GroupOutput is a page of a group's log.
type GroupOutput struct {
	Messages []Message `json:"messages"`
	// NextAfterSeq is the cursor for the next call.
	NextAfterSeq int64 `json:"next_after_seq"`
	More         bool  `json:"more"`
}

func (t *tools) readGroup(ctx context.Context, _ *mcp.CallToolRequest, in GroupInput) (*mcp.CallToolResult, GroupOutput, error) {
	out := GroupOutput{Messages: []Message{}, NextAfterSeq: in.AfterSeq}
	if err := message.CheckDID("group", in.Group, true); err != nil {
		return nil, out, err // "group: …"
	}
	if in.AfterSeq < 0 {
		return nil, out, fmt.Errorf("after_seq: %d must not be negative", in.AfterSeq)
	}
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return nil, out, err
	}
	maxText, err := maxTextOf(in.MaxText)
	if err != nil {
		return nil, out, err
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	res, err := t.c.Sync(ctx, wire.SyncQuery{Owner: in.Group, Box: model.GroupInbox, AfterSeq: in.AfterSeq,
		Limit: limit + 1, WithObject: true})
	if err != nil {
		return nil, out, refused("read_group", err)
	}
	for i, it := range res.Items {
		if i == limit {
			out.More = true
			break
		}
		m := readable(it)
		preview(&m, maxText)
		out.Messages = append(out.Messages, m)
		out.NextAfterSeq = it.Record.Seq
	}
	return nil, out, nil
}

// DeliveriesInput is check_deliveries' input.
type DeliveriesInput struct {
	After int64 `json:"after,omitempty" jsonschema:"next_after of the last call; 0 reads from the beginning"`
	Limit int   `json:"limit,omitempty" jsonschema:"how many deliveries at most, 1 to 100 (default 10)"`
}

// DeliveriesOutput are the delivery events after the cursor.
type DeliveriesOutput struct {
	Deliveries []DeliveryEvent `json:"deliveries"`
	// NextAfter is the cursor for the next call.
	NextAfter int64 `json:"next_after"`
	// More is true when the log holds more to read after NextAfter.
	More bool `json:"more"`
}

// DeliveryEvent is how one delivery through a tunnel went.
type DeliveryEvent struct {
	Event    string `json:"event"`
	RecordID string `json:"record_id"`
	MsgID    string `json:"msg_id"`
	At       string `json:"at"`
	Detail   string `json:"detail,omitempty"`
}

func (t *tools) checkDeliveries(ctx context.Context, _ *mcp.CallToolRequest, in DeliveriesInput) (*mcp.CallToolResult, DeliveriesOutput, error) {
	out := DeliveriesOutput{Deliveries: []DeliveryEvent{}, NextAfter: in.After}
	if in.After < 0 {
		return nil, out, fmt.Errorf("after: %d must not be negative", in.After)
	}
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return nil, out, err
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	const page = 1000
	for read := 0; read < deliveryScan; read += page {
		res, err := t.c.Events(ctx, wire.EventQuery{After: out.NextAfter, Owner: t.did, Limit: page})
		if err != nil {
			return nil, out, refused("check_deliveries", err)
		}
		for _, e := range res.Items {
			if !strings.HasPrefix(e.Type, "delivery.") {
				out.NextAfter = e.EventID
				continue
			}
			if len(out.Deliveries) == limit {
				// The cursor stays on the last one returned.
				out.More = true
				return nil, out, nil
			}
			out.NextAfter = e.EventID
			out.Deliveries = append(out.Deliveries, DeliveryEvent{Event: e.Type, RecordID: e.RecordID,
				MsgID: e.MsgID, At: rfc3339(e.AtMS), Detail: e.Detail})
		}
		if len(res.Items) < page {
			return nil, out, nil
		}
	}
	// A bound on the events read per call, not on what is left: call again.
	out.More = true
	return nil, out, nil
}
