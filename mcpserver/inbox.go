package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// InboxInput is check_inbox's input.
type InboxInput struct {
	Limit   int `json:"limit,omitempty" jsonschema:"how many messages at most, 1 to 100 (default 10)"`
	MaxText int `json:"max_text,omitempty" jsonschema:"show at most this many characters of each title and text, and leave out a machine payload longer than that (default 2000); claim shows a message whole"`
}

// Bounds of check_inbox's max_text: a page of long messages must not flood
// the agent's context; claim, which takes one, shows it whole.
const (
	defaultMaxText = 2000
	maxMaxText     = 1 << 20
)

// preview bounds m to about n characters of each part, saying so: its title
// and text cut, its machine payload left out when its JSON is longer (a
// Mail's carries every part whole).
func preview(m *Message, n int) {
	for _, f := range []*string{&m.Title, &m.Text} {
		if r := []rune(*f); len(r) > n {
			*f, m.Truncated = string(r[:n])+"…", true
		}
	}
	if m.Machine != nil {
		if b, err := json.Marshal(m.Machine); err != nil || utf8.RuneCount(b) > n {
			m.Machine, m.Truncated = nil, true
		}
	}
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
	// From is the author; Group the group it was posted to, if any; To
	// whom it was sent (to answer them all).
	From  string   `json:"from"`
	Group string   `json:"group,omitempty"`
	To    []string `json:"to,omitempty"`
	Title string   `json:"title,omitempty"`
	Text  string   `json:"text,omitempty"`
	// Truncated says the message is a preview (check_inbox's max_text):
	// its title or text cut, or its machine payload left out; claim
	// shows it whole.
	Truncated bool   `json:"truncated,omitempty"`
	Format    string `json:"format,omitempty"`
	Topic     string `json:"topic,omitempty"`
	ReplyTo   string `json:"reply_to,omitempty"`
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
		preview(&m, maxText)
		if at := it.Record.Delivery.NextRetryAtMS; at > time.Now().UnixMilli() {
			m.RetryAt = rfc3339(at)
		}
		out.Messages = append(out.Messages, m)
	}
	return nil, out, nil
}

// maxTextOf checks a max_text input (0: the default).
func maxTextOf(n int) (int, error) {
	if n < 0 || n > maxMaxText {
		return 0, fmt.Errorf("max_text: %d is out of range 1..%d", n, maxMaxText)
	}
	return cmp.Or(n, defaultMaxText), nil
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
	out.From, out.To = m.LogicalSender(), m.To
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
	LeaseMS int64 `json:"lease_ms,omitempty" jsonschema:"how long the claim holds the message, in milliseconds, at most 43200000 (12 h; default: the server's, 5 minutes); too short a lease ends before the work does and counts a failed attempt"`
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
	// The holder is the DID the tools act for, also with an admin's token
	// (notHeld tells a mistyped lease_id by it).
	got, err := t.c.Next(ctx, t.did, model.Inbox, &wire.NextRequest{WaitMS: in.WaitMS, LeaseMS: in.LeaseMS, Holder: t.did})
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

// Claimed names a claimed message, as claim returned it.
type Claimed struct {
	RecordID string `json:"record_id" jsonschema:"the record_id claim returned"`
	LeaseID  string `json:"lease_id" jsonschema:"the lease_id claim returned"`
}

// AckInput names a claimed message.
type AckInput = Claimed

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
		// The same ack again is answered as the first (the server knows
		// a repeat); done already by another claim is an error: a worker
		// whose lease ran out must learn that someone else did the work.
		_, herr := t.notHeld(ctx, "ack", in.RecordID, in.LeaseID, err)
		return nil, Outcome{}, herr
	}
	return nil, outcome(got.Record), nil
}

// FailInput names a claimed message and what went wrong.
type FailInput struct {
	Claimed
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
		_, herr := t.notHeld(ctx, "fail", in.RecordID, in.LeaseID, err)
		return nil, Outcome{}, herr
	}
	return nil, outcome(got.Record), nil
}

// notHeld is the error of an ack, fail or lease extension that err
// refused: when leaseID does not hold the record, what became of it (an
// agent told only "lost" might do again what is done already), with the
// record as it is when it could be read.
func (t *tools) notHeld(ctx context.Context, tool, recordID, leaseID string, err error) (*model.Record, error) {
	if !errors.Is(err, model.ErrLeaseLost) {
		return nil, refused(tool, err)
	}
	got, gerr := t.c.GetRecord(ctx, recordID, false)
	if gerr != nil {
		return nil, refused(tool, err)
	}
	rec := &got.Record
	switch st := rec.State; {
	case st == model.DoneState(rec.BoxKind) && tool == "ack":
		return rec, fmt.Errorf("%s: the message is done already (%s), most likely acked by another claim after this one ended (its lease ran out, or it gave the message back); nothing to do", tool, st)
	case st == model.DoneState(rec.BoxKind):
		return rec, fmt.Errorf("%s: the message is done already (%s): acked, by this claim or by another after this one ended; nothing to do", tool, st)
	case st == model.Dead:
		return rec, fmt.Errorf("%s: the message is DEAD (dead-lettered) now; this claim no longer holds it", tool)
	case st == model.HeldState(rec.BoxKind) && rec.Lease != nil && rec.Lease.ExpiresAtMS > time.Now().UnixMilli() &&
		rec.Lease.Holder == t.did:
		return rec, fmt.Errorf("%s: lease_id %q does not hold the message, another lease of yours does (check the lease_id claim returned; an earlier claim of yours expired and a later one took it)", tool, leaseID)
	case st == model.HeldState(rec.BoxKind):
		return rec, fmt.Errorf("%s: this claim's lease expired and another claim holds the message now; leave it to that one", tool)
	case st != model.ClaimableState(rec.BoxKind):
		return rec, fmt.Errorf("%s: the message is %s now; this claim no longer holds it", tool, st)
	default:
		return rec, fmt.Errorf("%s: this claim no longer holds the message: it is back in the inbox (%s), its lease having expired or this claim having given it back (fail); claim it again to work it", tool, st)
	}
}

// LeaseInput names a claimed message and how much longer to hold it.
type LeaseInput struct {
	Claimed
	LeaseMS int64 `json:"lease_ms,omitempty" jsonschema:"hold it this many milliseconds from now, at most 43200000 (12 h; default: the server's, 5 minutes)"`
}

// LeaseOutput is the lease after extend_lease.
type LeaseOutput struct {
	RecordID       string `json:"record_id"`
	LeaseID        string `json:"lease_id"`
	LeaseExpiresAt string `json:"lease_expires_at"`
}

func (t *tools) extendLease(ctx context.Context, _ *mcp.CallToolRequest, in LeaseInput) (*mcp.CallToolResult, LeaseOutput, error) {
	if err := held(in.RecordID, in.LeaseID); err != nil {
		return nil, LeaseOutput{}, err
	}
	if in.LeaseMS < 0 {
		return nil, LeaseOutput{}, fmt.Errorf("lease_ms: %d must not be negative", in.LeaseMS)
	}
	ctx, cancel := t.bounded(ctx, 0)
	defer cancel()
	got, err := t.c.ExtendLease(ctx, in.RecordID, &wire.LeaseRequest{LeaseID: in.LeaseID, LeaseMS: in.LeaseMS})
	if err != nil {
		_, herr := t.notHeld(ctx, "extend_lease", in.RecordID, in.LeaseID, err)
		return nil, LeaseOutput{}, herr
	}
	out := LeaseOutput{RecordID: got.Record.RecordID, LeaseID: in.LeaseID}
	if l := got.Record.Lease; l != nil {
		out.LeaseID, out.LeaseExpiresAt = l.ID, rfc3339(l.ExpiresAtMS)
	}
	return nil, out, nil
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
