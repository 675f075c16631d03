package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
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
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}, t.checkInbox)
	mcp.AddTool(s, &mcp.Tool{Name: "claim", Description: "Take the next unread message of the inbox with a " +
		"lease, waiting up to wait_ms for one to arrive. While the lease lasts no one else gets it; ack it when " +
		"handled, or fail it to have it retried later. A lease that expires returns the message to the inbox."}, t.claim)
	mcp.AddTool(s, &mcp.Tool{Name: "ack", Description: "Mark a claimed message as handled (read). Needs the " +
		"record_id and lease_id that claim returned."}, t.ack)
	mcp.AddTool(s, &mcp.Tool{Name: "extend_lease", Description: "Hold a claimed message longer, while its work " +
		"goes on: the lease then runs lease_ms from now.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, t.extendLease)
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_scheduled", Description: "Cancel a delayed send before it is due, by " +
		"the scheduled_id send_message returned."}, t.cancelScheduled)
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Give back a claimed message that could not be handled. " +
		"With retryable it returns to the inbox after a backoff (at least retry_after_ms); without, or after the " +
		"last attempt, it is dead-lettered (DEAD) for a person to look at."}, t.fail)
	mcp.AddTool(s, &mcp.Tool{Name: "read_group", Description: "Read a group's log: its messages in order, after " +
		"the cursor of the last call (next_after_seq). A group that keeps its messages in its log instead of " +
		"copying them into each member's inbox is read only this way. Reading takes nothing from anyone.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}, t.readGroup)
	mcp.AddTool(s, &mcp.Tool{Name: "check_deliveries", Description: "Say which messages sent through tunnels " +
		"were delivered (delivery.sent), failed for good (delivery.dead) or are tried again (delivery.redriven), " +
		"after the cursor of the last call (next_after).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}, t.checkDeliveries)
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
			return fmt.Errorf("%s: the lease is lost (it expired and the message went back to the inbox or was claimed again, or this claim ended it by another change): %s", tool, msg)
		case wire.CodeNotFound:
			return fmt.Errorf("%s: not found: %s", tool, msg)
		case wire.CodeTooLarge:
			return fmt.Errorf("%s: text: the message is too large (%s); send less, or several messages", tool, msg)
		case wire.CodeUnauthorized:
			return fmt.Errorf("%s refused (unauthorized): %s; this session's token no longer works, so no tool will: stop, and have a person issue a new token", tool, msg)
		}
		return fmt.Errorf("%s refused (%s): %s", tool, ae.Code, msg)
	}
	return fmt.Errorf("%s: msgcenter did not answer: %w; it may or may not have been done: call again later (a send_message with the same idempotency_key is safe to repeat)", tool, err)
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// pageLimit checks a tool's limit input (0: the default).
func pageLimit(n int) (int, error) {
	if n < 0 || n > maxList {
		return 0, fmt.Errorf("limit: %d is out of range 1..%d", n, maxList)
	}
	if n == 0 {
		return defaultList, nil
	}
	return n, nil
}
