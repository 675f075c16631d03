package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/wire"
)

// SendInput is send_message's input.
type SendInput struct {
	To             []string `json:"to,omitempty" jsonschema:"the recipients' DIDs (did:…; a DID no one reads is not refused, so copy them exactly); leave empty when posting to a group"`
	Group          string   `json:"group,omitempty" jsonschema:"a group's DID to post to, instead of to"`
	Text           string   `json:"text,omitempty" jsonschema:"the message's body (the whole message at most 1 MiB)"`
	Title          string   `json:"title,omitempty" jsonschema:"a subject line (mail) or title"`
	Format         string   `json:"format,omitempty" jsonschema:"the body's MIME type, e.g. text/markdown (default: plain text)"`
	Topic          string   `json:"topic,omitempty" jsonschema:"a conversation topic, to group related messages"`
	ReplyTo        string   `json:"reply_to,omitempty" jsonschema:"the msg_id of the message this answers"`
	DelayMS        int64    `json:"delay_ms,omitempty" jsonschema:"deliver after this many milliseconds instead of now (up to 10 years)"`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"a key of your choosing: sending again with the same key sends nothing new and answers as the first send did (even after cancel_scheduled cancelled it: use a new key to send it again)"`
}

// SendOutput is what send_message did.
type SendOutput struct {
	MsgID string `json:"msg_id"`
	// Sent is false when nothing could be delivered (every recipient
	// blocks the sender); Reason says why.
	Sent   bool   `json:"sent"`
	Reason string `json:"reason,omitempty"`
	// DeliveredTo are the recipients whose inbox holds it now.
	DeliveredTo []string         `json:"delivered_to,omitempty"`
	ViaTunnels  []TunnelDelivery `json:"via_tunnels,omitempty"`
	// Dropped are the recipients who block the sender.
	Dropped      []string `json:"dropped,omitempty"`
	ScheduledFor string   `json:"scheduled_for,omitempty"`
	// ScheduledID cancels a delayed send (cancel_scheduled) before it is
	// due.
	ScheduledID int64 `json:"scheduled_id,omitempty"`
}

// TunnelDelivery is one recipient reached through a tunnel; record_id is
// what check_deliveries reports on.
type TunnelDelivery struct {
	To       string `json:"to"`
	Tunnel   string `json:"tunnel"`
	RecordID string `json:"record_id"`
}

func (t *tools) send(ctx context.Context, _ *mcp.CallToolRequest, in SendInput) (*mcp.CallToolResult, SendOutput, error) {
	var out SendOutput
	switch {
	case len(in.To) == 0 && in.Group == "":
		return nil, out, errors.New("to: name at least one recipient DID, or a group")
	case len(in.To) > 0 && in.Group != "":
		return nil, out, errors.New("group: post to a group or send to recipients (to), not both")
	case strings.TrimSpace(in.Text) == "" && strings.TrimSpace(in.Title) == "":
		return nil, out, errors.New("text: the message needs a text (or a title)")
	case in.DelayMS < 0 || in.DelayMS > maxDelay.Milliseconds():
		return nil, out, fmt.Errorf("delay_ms: %d is out of range 0..%d (10 years)", in.DelayMS, maxDelay.Milliseconds())
	}
	for i, d := range append(in.To, in.Group) {
		// An agent's "bob" is a slip for a DID: delivered as written, it
		// would go to an inbox no one reads, answered as delivered.
		if d != "" && !strings.HasPrefix(d, "did:") {
			field := fmt.Sprintf("to[%d]", i)
			if i == len(in.To) {
				field = "group"
			}
			return nil, out, fmt.Errorf("%s: %q is not a DID; give the recipient's DID, like did:agent:bob", field, d)
		}
	}
	m := &message.Message{From: t.did, To: in.To, Content: message.Content{Title: in.Title, Format: in.Format, Content: in.Text}}
	if in.Group != "" {
		m.From, m.Source, m.Kind = in.Group, t.did, message.KindGroupMsg
	}
	if in.Topic != "" || in.ReplyTo != "" {
		m.Thread = &message.Thread{Topic: in.Topic, ReplyTo: in.ReplyTo}
	}
	m.Stamp(in.IdempotencyKey, time.Now())
	req := &wire.PostSendRequest{Msg: m, IdempotencyKey: in.IdempotencyKey}
	if in.DelayMS > 0 {
		req.DelayMS = &in.DelayMS
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	res, err := t.c.PostSend(ctx, req)
	var ae *client.APIError
	if in.Group != "" && errors.As(err, &ae) && ae.Field == "msg.to" {
		return nil, out, fmt.Errorf("group: %s is not a group (it has no subscribers); to write to one DID, use to", in.Group)
	}
	var i int
	if errors.As(err, &ae) && strings.Contains(ae.Message, "is a group") {
		if _, serr := fmt.Sscanf(ae.Field, "msg.to[%d]", &i); serr == nil && i >= 0 && i < len(in.To) {
			return nil, out, fmt.Errorf("to[%d]: %s is a group: post to it with group, not to", i, in.To[i])
		}
	}
	if err != nil {
		return nil, out, refused("send_message", err)
	}
	out = SendOutput{MsgID: res.MsgID, Sent: res.OK, Reason: res.Reason, DeliveredTo: res.LocalRecipients,
		Dropped: res.DroppedRecipients, ScheduledFor: res.ScheduledDeliveryTime, ScheduledID: res.ScheduledID}
	for _, d := range res.Deliveries {
		out.ViaTunnels = append(out.ViaTunnels, TunnelDelivery{To: d.TargetDID, Tunnel: d.TunnelDID, RecordID: d.RecordID})
	}
	return nil, out, nil
}

// CancelInput names a delayed send.
type CancelInput struct {
	ScheduledID int64 `json:"scheduled_id" jsonschema:"the scheduled_id send_message returned for a delayed send"`
}

// CancelOutput is the delayed send cancelled.
type CancelOutput struct {
	ScheduledID int64  `json:"scheduled_id"`
	MsgID       string `json:"msg_id"`
	WasDueAt    string `json:"was_due_at"`
}

func (t *tools) cancelScheduled(ctx context.Context, _ *mcp.CallToolRequest, in CancelInput) (*mcp.CallToolResult, CancelOutput, error) {
	if in.ScheduledID <= 0 {
		return nil, CancelOutput{}, fmt.Errorf("scheduled_id: %d is no scheduled_id (send_message returns it for a delayed send)", in.ScheduledID)
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	got, err := t.c.CancelScheduled(ctx, in.ScheduledID)
	if err != nil {
		return nil, CancelOutput{}, refused("cancel_scheduled", err)
	}
	return nil, CancelOutput{ScheduledID: got.ID, MsgID: got.MsgID, WasDueAt: rfc3339(got.DueAtMS)}, nil
}
