package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Bounds of the tools' inputs. A claim's wait is shorter than the server
// allows: an agent's tool call should come back while the model still
// waits for it.
const (
	maxDelay     = 10 * 365 * 24 * time.Hour
	maxClaimWait = 30 * time.Second
	maxList      = 100
	defaultList  = 10
	// Events read per check_deliveries call, at most: bounds one call on
	// an old agent's long log; next_after lets the agent go on.
	deliveryScan = 5_000
	// callTimeout bounds each call to msgcenter (beyond a claim's own
	// wait): a server or proxy that stops answering must not hold the
	// agent's tool call for good.
	callTimeout = 30 * time.Second
)

// bounded is ctx bounded for a call to msgcenter that may itself wait,
// and ended with the HTTP request that carries the tool call, if any (the
// SDK's stateless transport does not end a call's context when its client
// goes away: a claim would take a message nobody receives).
func (t *tools) bounded(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, wait+t.timeout)
	if req, ok := ctx.Value(requestKey{}).(context.Context); ok {
		stop := context.AfterFunc(req, cancel)
		return ctx, func() { stop(); cancel() }
	}
	return ctx, cancel
}

// requestKey carries the context of the HTTP request a tool call came in.
type requestKey struct{}

type tools struct {
	c   *client.Client
	did string
	// timeout is callTimeout, shorter in tests.
	timeout time.Duration
}

func (t *tools) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "send_message", Description: "Send a message to agents or people (DIDs), " +
		"or post it to a group, now or after delay_ms. People outside are reached through their tunnels (Telegram, " +
		"Slack, mail, webhooks); check_deliveries later says whether that worked. Pass idempotency_key when the " +
		"call may be repeated, so a retry does not send twice."}, t.send)
	mcp.AddTool(s, &mcp.Tool{Name: "check_inbox", Description: "List unread messages in the inbox, oldest " +
		"first, without taking them: they stay unread and claimable (one failed with a retry shows retry_at, " +
		"when claim takes it again).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, t.checkInbox)
	mcp.AddTool(s, &mcp.Tool{Name: "claim", Description: "Take the next unread message of the inbox with a " +
		"lease, waiting up to wait_ms for one to arrive. While the lease lasts no one else gets it; ack it when " +
		"handled, or fail it to have it retried later. A lease that expires returns the message to the inbox."}, t.claim)
	mcp.AddTool(s, &mcp.Tool{Name: "ack", Description: "Mark a claimed message as handled (read). Needs the " +
		"record_id and lease_id that claim returned."}, t.ack)
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Give back a claimed message that could not be handled. " +
		"With retryable it returns to the inbox after a backoff (at least retry_after_ms); without, or after the " +
		"last attempt, it is dead-lettered (DEAD) for a person to look at."}, t.fail)
	mcp.AddTool(s, &mcp.Tool{Name: "read_group", Description: "Read a group's log: its messages in order, after " +
		"the cursor of the last call (next_after_seq). A group that keeps its messages in its log instead of " +
		"copying them into each member's inbox is read only this way. Reading takes nothing from anyone.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, t.readGroup)
	mcp.AddTool(s, &mcp.Tool{Name: "check_deliveries", Description: "Say which messages sent through tunnels " +
		"were delivered (delivery.sent), failed for good (delivery.dead) or are tried again (delivery.redriven), " +
		"after the cursor of the last call (next_after).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, t.checkDeliveries)
}

// SendInput is send_message's input.
type SendInput struct {
	To             []string `json:"to,omitempty" jsonschema:"the recipients' DIDs; leave empty when posting to a group"`
	Group          string   `json:"group,omitempty" jsonschema:"a group's DID to post to, instead of to"`
	Text           string   `json:"text,omitempty" jsonschema:"the message's body"`
	Title          string   `json:"title,omitempty" jsonschema:"a subject line (mail) or title"`
	Format         string   `json:"format,omitempty" jsonschema:"the body's MIME type, e.g. text/markdown (default: plain text)"`
	Topic          string   `json:"topic,omitempty" jsonschema:"a conversation topic, to group related messages"`
	ReplyTo        string   `json:"reply_to,omitempty" jsonschema:"the msg_id of the message this answers"`
	DelayMS        int64    `json:"delay_ms,omitempty" jsonschema:"deliver after this many milliseconds instead of now (up to 10 years)"`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"a key of your choosing: sending again with the same key sends nothing new"`
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
	if err != nil {
		return nil, out, refused("send_message", err)
	}
	out = SendOutput{MsgID: res.MsgID, Sent: res.OK, Reason: res.Reason, DeliveredTo: res.LocalRecipients,
		Dropped: res.DroppedRecipients, ScheduledFor: res.ScheduledDeliveryTime}
	for _, d := range res.Deliveries {
		out.ViaTunnels = append(out.ViaTunnels, TunnelDelivery{To: d.TargetDID, Tunnel: d.TunnelDID, RecordID: d.RecordID})
	}
	return nil, out, nil
}

// InboxInput is check_inbox's input.
type InboxInput struct {
	Limit int `json:"limit,omitempty" jsonschema:"how many messages at most, 1 to 100 (default 10)"`
}

// InboxOutput is a page of unread messages.
type InboxOutput struct {
	Messages []Message `json:"messages"`
	// More is true when more unread messages wait than were listed.
	More bool `json:"more"`
}

// Message is one message in the inbox, as an agent reads it.
type Message struct {
	RecordID string `json:"record_id"`
	MsgID    string `json:"msg_id"`
	// From is the author; Group the group it was posted to, if any.
	From    string `json:"from"`
	Group   string `json:"group,omitempty"`
	Title   string `json:"title,omitempty"`
	Text    string `json:"text,omitempty"`
	Format  string `json:"format,omitempty"`
	Topic   string `json:"topic,omitempty"`
	ReplyTo string `json:"reply_to,omitempty"`
	// Machine is the message's structured payload, as its author sent it.
	Machine  any    `json:"machine,omitempty"`
	SentAt   string `json:"sent_at"`
	Attempts int    `json:"attempts,omitempty"`
	// RetryAt is set for a message failed with a retry that is not due
	// yet: claim takes it from then on.
	RetryAt string `json:"retry_at,omitempty"`
}

func (t *tools) checkInbox(ctx context.Context, _ *mcp.CallToolRequest, in InboxInput) (*mcp.CallToolResult, InboxOutput, error) {
	out := InboxOutput{Messages: []Message{}}
	if in.Limit < 0 || in.Limit > maxList {
		return nil, out, fmt.Errorf("limit: %d is out of range 1..%d", in.Limit, maxList)
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultList
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	// One more than asked says whether more wait.
	res, err := t.c.List(ctx, wire.ListQuery{Owner: t.did, Box: model.Inbox, States: []model.State{model.Unread},
		Limit: limit + 1, WithObject: true})
	if err != nil {
		return nil, out, refused("check_inbox", err)
	}
	for i, it := range res.Items {
		if i == limit {
			out.More = true
			break
		}
		m := readable(it)
		if at := it.Record.Delivery.NextRetryAtMS; at > time.Now().UnixMilli() {
			m.RetryAt = rfc3339(at)
		}
		out.Messages = append(out.Messages, m)
	}
	return nil, out, nil
}

// readable is a record and its message as the tools show them.
func readable(it wire.RecordWithMsg) Message {
	r := it.Record
	out := Message{RecordID: r.RecordID, MsgID: r.MsgID, SentAt: rfc3339(r.CreatedAtMS), Attempts: r.Delivery.Attempts}
	m, err := message.Decode(it.Msg)
	if err != nil {
		// The server stores only messages that decode; say so rather
		// than hide the record.
		out.Text = fmt.Sprintf("(this message could not be read: %v)", err)
		return out
	}
	out.From = m.LogicalSender()
	if m.Source != "" {
		out.Group = m.From
	}
	out.Title, out.Text, out.Format = m.Content.Title, m.Content.Content, m.Content.Format
	if m.Thread != nil {
		out.Topic, out.ReplyTo = m.Thread.Topic, m.Thread.ReplyTo
	}
	if len(m.Content.Machine) > 0 {
		var v any
		if json.Unmarshal(m.Content.Machine, &v) == nil {
			out.Machine = v
		}
	}
	if m.CreatedAtMS > 0 {
		out.SentAt = rfc3339(m.CreatedAtMS)
	}
	return out
}

// ClaimInput is claim's input.
type ClaimInput struct {
	WaitMS  int64 `json:"wait_ms,omitempty" jsonschema:"wait up to this many milliseconds for a message when the inbox is empty, 0 to 30000 (default 0: answer at once)"`
	LeaseMS int64 `json:"lease_ms,omitempty" jsonschema:"how long the claim holds the message, in milliseconds (default: the server's, 5 minutes)"`
}

// ClaimOutput is the message claimed, if any.
type ClaimOutput struct {
	Claimed bool     `json:"claimed"`
	Message *Message `json:"message,omitempty"`
	LeaseID string   `json:"lease_id,omitempty"`
	// LeaseExpiresAt is when the message returns to the inbox unless
	// acked or failed first.
	LeaseExpiresAt string `json:"lease_expires_at,omitempty"`
}

func (t *tools) claim(ctx context.Context, _ *mcp.CallToolRequest, in ClaimInput) (*mcp.CallToolResult, ClaimOutput, error) {
	var out ClaimOutput
	if in.WaitMS < 0 || in.WaitMS > maxClaimWait.Milliseconds() {
		return nil, out, fmt.Errorf("wait_ms: %d is out of range 0..%d", in.WaitMS, maxClaimWait.Milliseconds())
	}
	if in.LeaseMS < 0 {
		return nil, out, fmt.Errorf("lease_ms: %d must not be negative", in.LeaseMS)
	}
	ctx, cancel := t.bounded(ctx, time.Duration(in.WaitMS)*time.Millisecond)
	defer cancel()
	got, err := t.c.Next(ctx, t.did, model.Inbox, &wire.NextRequest{WaitMS: in.WaitMS, LeaseMS: in.LeaseMS})
	if err != nil {
		return nil, out, refused("claim", err)
	}
	if got == nil {
		return nil, out, nil
	}
	msg := readable(*got)
	out = ClaimOutput{Claimed: true, Message: &msg}
	if l := got.Record.Lease; l != nil {
		out.LeaseID, out.LeaseExpiresAt = l.ID, rfc3339(l.ExpiresAtMS)
	}
	return nil, out, nil
}

// AckInput names a claimed message.
type AckInput struct {
	RecordID string `json:"record_id" jsonschema:"the record_id claim returned"`
	LeaseID  string `json:"lease_id" jsonschema:"the lease_id claim returned"`
}

// Outcome is a message's state after ack or fail.
type Outcome struct {
	RecordID string `json:"record_id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// RetryAt is when a failed message is claimable again.
	RetryAt string `json:"retry_at,omitempty"`
}

func (t *tools) ack(ctx context.Context, _ *mcp.CallToolRequest, in AckInput) (*mcp.CallToolResult, Outcome, error) {
	if err := held(in.RecordID, in.LeaseID); err != nil {
		return nil, Outcome{}, err
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	got, err := t.c.Ack(ctx, in.RecordID, in.LeaseID, "")
	if err != nil {
		return nil, Outcome{}, t.notHeld(ctx, "ack", in.RecordID, err)
	}
	return nil, outcome(got.Record), nil
}

// FailInput names a claimed message and what went wrong.
type FailInput struct {
	RecordID     string `json:"record_id" jsonschema:"the record_id claim returned"`
	LeaseID      string `json:"lease_id" jsonschema:"the lease_id claim returned"`
	Error        string `json:"error" jsonschema:"what went wrong, for whoever looks at it later"`
	Retryable    bool   `json:"retryable,omitempty" jsonschema:"true: the failure is temporary, try again after a backoff"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty" jsonschema:"when retryable: wait at least this many milliseconds"`
}

func (t *tools) fail(ctx context.Context, _ *mcp.CallToolRequest, in FailInput) (*mcp.CallToolResult, Outcome, error) {
	if err := held(in.RecordID, in.LeaseID); err != nil {
		return nil, Outcome{}, err
	}
	if strings.TrimSpace(in.Error) == "" {
		return nil, Outcome{}, errors.New("error: say what went wrong")
	}
	if in.RetryAfterMS < 0 {
		return nil, Outcome{}, fmt.Errorf("retry_after_ms: %d must not be negative", in.RetryAfterMS)
	}
	if in.RetryAfterMS > 0 && !in.Retryable {
		return nil, Outcome{}, errors.New("retry_after_ms: only with retryable: true (a failure that is not retryable is dead-lettered at once)")
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	got, err := t.c.Fail(ctx, in.RecordID, in.LeaseID, wire.DeliveryResult{ErrorMessage: in.Error,
		Retryable: in.Retryable, RetryAfterMS: in.RetryAfterMS})
	if err != nil {
		return nil, Outcome{}, t.notHeld(ctx, "fail", in.RecordID, err)
	}
	return nil, outcome(got.Record), nil
}

// notHeld is the error of an ack or fail that err refused: when the lease
// no longer holds the record, what became of it (an agent told only "lost"
// might do again what is done already).
func (t *tools) notHeld(ctx context.Context, tool, recordID string, err error) error {
	if !errors.Is(err, model.ErrLeaseLost) {
		return refused(tool, err)
	}
	rec, gerr := t.c.GetRecord(ctx, recordID, false)
	if gerr != nil {
		return refused(tool, err)
	}
	switch st := rec.Record.State; {
	case st == model.DoneState(rec.Record.BoxKind):
		return fmt.Errorf("%s: the message is done already (%s); nothing to do", tool, st)
	case st == model.Dead:
		return fmt.Errorf("%s: the message is DEAD (dead-lettered) now; this claim no longer holds it", tool)
	case st == model.HeldState(rec.Record.BoxKind):
		return fmt.Errorf("%s: this claim's lease expired and another claim holds the message now; leave it to that one", tool)
	case st != model.ClaimableState(rec.Record.BoxKind):
		return fmt.Errorf("%s: the message is %s now; this claim no longer holds it", tool, st)
	default:
		return fmt.Errorf("%s: this claim's lease expired and the message went back to the inbox (%s); claim it again to work it", tool, st)
	}
}

func held(recordID, leaseID string) error {
	if recordID == "" {
		return errors.New("record_id: required, as claim returned it")
	}
	if leaseID == "" {
		return errors.New("lease_id: required, as claim returned it")
	}
	return nil
}

func outcome(r model.Record) Outcome {
	o := Outcome{RecordID: r.RecordID, State: string(r.State), Attempts: r.Delivery.Attempts}
	if r.State == model.ClaimableState(r.BoxKind) && r.Delivery.NextRetryAtMS > 0 {
		o.RetryAt = rfc3339(r.Delivery.NextRetryAtMS)
	}
	return o
}

// GroupInput is read_group's input.
type GroupInput struct {
	Group    string `json:"group" jsonschema:"the group's DID; the agent must be one of its members"`
	AfterSeq int64  `json:"after_seq,omitempty" jsonschema:"next_after_seq of the last call; 0 reads from the beginning"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many messages at most, 1 to 100 (default 10)"`
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
	if in.Limit < 0 || in.Limit > maxList {
		return nil, out, fmt.Errorf("limit: %d is out of range 1..%d", in.Limit, maxList)
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultList
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
		out.Messages = append(out.Messages, readable(it))
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
	if in.Limit < 0 || in.Limit > maxList {
		return nil, out, fmt.Errorf("limit: %d is out of range 1..%d", in.Limit, maxList)
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultList
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

// inputField names the message's fields the server names as the tools'
// inputs name them.
var inputField = strings.NewReplacer("msg.content.content", "text", "msg.content.title", "title",
	"msg.content.format", "format", "msg.thread.topic", "topic", "msg.thread.reply_to", "reply_to",
	"msg.to", "to", "msg.from", "group", "msg.source", "from")

// refused is a tool's error for a call msgcenter refused or could not
// answer, in words the agent can act on.
func refused(tool string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) {
		msg := ae.Message
		if ae.Field != "" {
			msg = inputField.Replace(ae.Field) + ": " + msg
		}
		switch ae.Code {
		case wire.CodeLeaseLost:
			return fmt.Errorf("%s: the lease is lost (it expired and the message went back to the inbox, or was claimed again): %s", tool, msg)
		case wire.CodeNotFound:
			return fmt.Errorf("%s: not found: %s", tool, msg)
		}
		return fmt.Errorf("%s refused (%s): %s", tool, ae.Code, msg)
	}
	return fmt.Errorf("%s: msgcenter did not answer: %w", tool, err)
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
