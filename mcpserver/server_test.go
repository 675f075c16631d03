package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// session connects an MCP client to the tools of did, acting through c.
func session(t *testing.T, c *client.Client, did string) *mcp.ClientSession {
	t.Helper()
	srv, err := mcpserver.New(c, did)
	if err != nil {
		t.Fatal(err)
	}
	return connect(t, srv)
}

func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// call calls tool with args and decodes its structured result into out;
// a tool error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v) failed: %s", tool, args, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: result %s: %v", tool, b, err)
	}
}

// callErr calls tool and returns the text of the tool error it must
// answer with.
func callErr(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v, want a tool error", tool, args, err)
	}
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded, want an error: %s", tool, args, text(res))
	}
	t.Logf("%s(%v): %s", tool, args, text(res))
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsAreListed(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	cs := session(t, srv.Client(t, "did:agent:a", model.RoleAgent), "did:agent:a")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"ack", "cancel_scheduled", "check_deliveries", "check_inbox", "claim", "extend_lease", "fail", "read_group", "send_message"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
}

// Two agents talk through the tools: one sends, the other sees the
// message unread, claims it, acks it, and its inbox is empty again.
func TestSendCheckClaimAck(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	bob := session(t, srv.Client(t, "did:agent:bob", model.RoleAgent), "did:agent:bob")

	var sent mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "the build is green",
		"title": "CI", "topic": "ci"}, &sent)
	if !sent.Sent || !strings.HasPrefix(sent.MsgID, "cymsg:") || !slices.Equal(sent.DeliveredTo, []string{"did:agent:bob"}) {
		t.Fatalf("send_message = %+v", sent)
	}

	var inbox mcpserver.InboxOutput
	call(t, bob, "check_inbox", nil, &inbox)
	if len(inbox.Messages) != 1 || inbox.More {
		t.Fatalf("bob's inbox = %+v", inbox)
	}
	m := inbox.Messages[0]
	if m.From != "did:agent:ann" || m.Text != "the build is green" || m.Title != "CI" || m.Topic != "ci" || m.MsgID != sent.MsgID || m.SentAt == "" {
		t.Fatalf("bob reads %+v", m)
	}
	// Looking did not take it: still there. A preview cuts the text.
	call(t, bob, "check_inbox", map[string]any{"limit": 5, "max_text": 9}, &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].Text != "the build…" || !inbox.Messages[0].Truncated {
		t.Fatalf("after a second look bob's inbox = %+v", inbox)
	}

	var got mcpserver.ClaimOutput
	call(t, bob, "claim", nil, &got)
	if !got.Claimed || got.Message == nil || got.Message.RecordID != m.RecordID || got.LeaseID == "" || got.LeaseExpiresAt == "" {
		t.Fatalf("claim = %+v", got)
	}
	var again mcpserver.ClaimOutput
	call(t, bob, "claim", nil, &again)
	if again.Claimed {
		t.Fatalf("a second claim took %+v while the first holds it", again.Message)
	}
	var done mcpserver.Outcome
	call(t, bob, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID}, &done)
	if done.State != string(model.Readed) {
		t.Fatalf("ack = %+v", done)
	}
	if r := srv.Record(t, m.RecordID); r.State != model.Readed {
		t.Fatalf("the record is %s after ack", r.State)
	}
	call(t, bob, "check_inbox", nil, &inbox)
	if len(inbox.Messages) != 0 {
		t.Fatalf("bob's inbox after the ack = %+v", inbox)
	}
	// The same ack again (an agent whose answer was lost) gets the same
	// answer, and changes nothing.
	var twice mcpserver.Outcome
	call(t, bob, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID}, &twice)
	if twice != done {
		t.Fatalf("a second ack = %+v; want %+v, as the first", twice, done)
	}
	// A fail after it is refused, saying the message is done.
	if msg := callErr(t, bob, "fail", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID, "error": "late"}); !strings.Contains(msg, "done already") {
		t.Fatalf("a fail after the ack: %q", msg)
	}
}

// A lease held longer with extend_lease; an ack with a mistyped lease_id
// is told the message is still held by its own claim, and the right one
// then works.
func TestExtendLeaseAndMistypedLease(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	bob := session(t, srv.Client(t, "did:agent:bob", model.RoleAgent), "did:agent:bob")
	var sent mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob", "did:agent:carol"}, "text": "long job"}, &sent)
	var got mcpserver.ClaimOutput
	call(t, bob, "claim", map[string]any{"lease_ms": 1000}, &got)
	if !got.Claimed || !slices.Equal(got.Message.To, []string{"did:agent:bob", "did:agent:carol"}) {
		t.Fatalf("claim = %+v; want the message with its recipients", got)
	}
	var lease mcpserver.LeaseOutput
	call(t, bob, "extend_lease", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID, "lease_ms": 600_000}, &lease)
	if lease.LeaseID != got.LeaseID || lease.LeaseExpiresAt <= got.LeaseExpiresAt {
		t.Fatalf("extend_lease = %+v after claim %+v", lease, got)
	}
	msg := callErr(t, bob, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID + "x"})
	if !strings.Contains(msg, "another lease of yours") {
		t.Fatalf("an ack with a mistyped lease_id: %q", msg)
	}
	var done mcpserver.Outcome
	call(t, bob, "ack", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID}, &done)
	if done.State != string(model.Readed) {
		t.Fatalf("the ack with the right lease_id = %+v", done)
	}
}

// A delayed send can be cancelled by the id send_message returned; a
// group that is none is named as such.
func TestCancelScheduledAndNoSuchGroup(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	var later mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "later", "delay_ms": 60_000}, &later)
	if later.ScheduledID == 0 {
		t.Fatalf("a delayed send = %+v; want its scheduled_id", later)
	}
	var gone mcpserver.CancelOutput
	call(t, ann, "cancel_scheduled", map[string]any{"scheduled_id": later.ScheduledID}, &gone)
	if gone.MsgID != later.MsgID || gone.WasDueAt == "" {
		t.Fatalf("cancel_scheduled = %+v for %+v", gone, later)
	}
	if msg := callErr(t, ann, "cancel_scheduled", map[string]any{"scheduled_id": later.ScheduledID}); !strings.Contains(msg, "not found") {
		t.Fatalf("cancelling it again: %q", msg)
	}
	if msg := callErr(t, ann, "send_message", map[string]any{"group": "did:group:none", "text": "x"}); !strings.Contains(msg, "group: did:group:none is not a group") {
		t.Fatalf("a post to a DID that is no group: %q", msg)
	}
	if _, err := srv.Admin.SetSubscribers(context.Background(), "did:group:team", []string{"did:agent:ann", "did:agent:bob"}); err != nil {
		t.Fatal(err)
	}
	if msg := callErr(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob", "did:group:team"}, "text": "x"}); !strings.Contains(msg, "to[1]: did:group:team is a group: post to it with group") {
		t.Fatalf("a send to a group as a recipient: %q", msg)
	}
	res, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: "did:agent:bob", Box: model.Inbox})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("bob's inbox after the cancelled send: %+v, %v", res, err)
	}
}

// Bad input is refused with the field to fix, and sends nothing.
func TestBadInputIsRefusedAndSendsNothing(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"send_message", map[string]any{"text": "to nobody"}, "to:"},
		{"send_message", map[string]any{"to": []string{"did:agent:bob"}}, "text:"},
		{"send_message", map[string]any{"to": []string{"did:agent:bob"}, "group": "did:group:g", "text": "x"}, "group:"},
		{"send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "x", "delay_ms": -1}, "delay_ms:"},
		{"send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "x", "delay_ms": int64(11 * 365 * 24 * 3600 * 1000)}, "delay_ms:"},
		{"send_message", map[string]any{"to": []string{"did:agent:x y"}, "text": "x"}, "to[0]: must not contain spaces"},
		{"send_message", map[string]any{"to": []string{"did:agent:bob", "bob"}, "text": "x"}, `to[1]: "bob" is not a DID`},
		{"send_message", map[string]any{"group": "team", "text": "x"}, `group: "team" is not a DID`},
		{"send_message", map[string]any{"to": "did:agent:bob", "text": "x"}, "to"},
		{"check_inbox", map[string]any{"limit": 101}, "limit:"},
		{"check_inbox", map[string]any{"max_text": -1}, "max_text:"},
		{"claim", map[string]any{"wait_ms": 60_000}, "wait_ms:"},
		{"ack", map[string]any{"record_id": "cyrec:00"}, `"lease_id"`},
		{"ack", map[string]any{"record_id": "cyrec:00", "lease_id": ""}, "lease_id:"},
		{"fail", map[string]any{"record_id": "cyrec:00", "lease_id": "L"}, `"error"`},
		{"fail", map[string]any{"record_id": "cyrec:00", "lease_id": "L", "error": " "}, "error:"},
		{"fail", map[string]any{"record_id": "cyrec:00", "lease_id": "L", "error": "x", "retry_after_ms": 5000}, "retry_after_ms: only with retryable"},
		{"check_deliveries", map[string]any{"limit": 101}, "limit:"},
		{"extend_lease", map[string]any{"record_id": "cyrec:00", "lease_id": "L", "lease_ms": -1}, "lease_ms:"},
		{"cancel_scheduled", map[string]any{"scheduled_id": 0}, "scheduled_id:"},
		{"send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": strings.Repeat("x", 1<<20+10)}, "text: the message is too large"},
		{"read_group", map[string]any{"group": ""}, "group: is required"},
		{"read_group", map[string]any{"group": "did:group:g", "after_seq": -1}, "after_seq:"},
		{"read_group", map[string]any{"group": "did:group:g", "max_text": 1<<20 + 1}, "max_text:"},
		{"check_deliveries", map[string]any{"after": -1}, "after:"},
		{"check_deliveries", map[string]any{"after": 1_000_000}, "after: 1000000 is beyond the end of the event log"},
	} {
		if msg := callErr(t, ann, tc.tool, tc.args); !strings.Contains(msg, tc.field) {
			t.Errorf("%s(%v): %q does not name %q", tc.tool, tc.args, msg, tc.field)
		}
	}
	recs, err := srv.Admin.Sync(context.Background(), wire.SyncQuery{Owner: "did:agent:bob", Box: model.Inbox})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Items) != 0 {
		t.Fatalf("refused sends left %d records in bob's inbox", len(recs.Items))
	}
}

// A delayed send is not in the inbox before it is due; a send with an
// idempotency key sent twice is one message.
func TestDelayAndIdempotency(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	bob := session(t, srv.Client(t, "did:agent:bob", model.RoleAgent), "did:agent:bob")
	var later mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "in an hour", "delay_ms": 3_600_000}, &later)
	if later.ScheduledFor == "" || len(later.DeliveredTo) != 0 {
		t.Fatalf("delayed send = %+v", later)
	}
	var first, second mcpserver.SendOutput
	args := map[string]any{"to": []string{"did:agent:bob"}, "text": "once", "idempotency_key": "k-1"}
	call(t, ann, "send_message", args, &first)
	call(t, ann, "send_message", args, &second)
	if first.MsgID != second.MsgID {
		t.Fatalf("the same key made two messages: %s, %s", first.MsgID, second.MsgID)
	}
	var inbox mcpserver.InboxOutput
	call(t, bob, "check_inbox", nil, &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].Text != "once" {
		t.Fatalf("bob's inbox = %+v; want the keyed message once and not the delayed one", inbox)
	}
}

// fail retries a retryable failure after its backoff and dead-letters the
// others; a claim waits for a message that arrives while it waits.
func TestFailAndWaitingClaim(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{BackoffBase: 50 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	bob := session(t, srv.Client(t, "did:agent:bob", model.RoleAgent), "did:agent:bob")

	var wg sync.WaitGroup
	var got mcpserver.ClaimOutput
	wg.Add(1)
	go func() {
		defer wg.Done()
		call(t, bob, "claim", map[string]any{"wait_ms": 10_000}, &got)
	}()
	time.Sleep(200 * time.Millisecond)
	var sent mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "do the thing"}, &sent)
	wg.Wait()
	if !got.Claimed || got.Message.MsgID != sent.MsgID {
		t.Fatalf("the waiting claim = %+v", got)
	}

	var out mcpserver.Outcome
	call(t, bob, "fail", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID,
		"error": "the tool timed out", "retryable": true}, &out)
	if out.State != string(model.Unread) || out.Attempts != 1 || out.RetryAt == "" {
		t.Fatalf("retryable fail = %+v", out)
	}
	testserver.WaitFor(t, "the failed message claimable again", func() bool {
		call(t, bob, "claim", nil, &got)
		return got.Claimed
	})
	if got.Message.Attempts != 1 {
		t.Fatalf("the retried message says %d attempts, want 1", got.Message.Attempts)
	}
	// A message waiting out its retry is listed with when it comes back,
	// and is not claimable before.
	call(t, bob, "fail", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID,
		"error": "rate limited", "retryable": true, "retry_after_ms": 600_000}, &out)
	var inbox mcpserver.InboxOutput
	call(t, bob, "check_inbox", nil, &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].RetryAt == "" || inbox.Messages[0].RetryAt != out.RetryAt {
		t.Fatalf("the inbox while the message waits out its retry: %+v (fail said %+v)", inbox, out)
	}
	call(t, bob, "claim", nil, &got)
	if got.Claimed {
		t.Fatalf("claimed a message before its retry: %+v", got)
	}
	call(t, srvAdminSession(t, srv, "did:agent:bob"), "claim", nil, &got)
	if got.Claimed {
		t.Fatalf("an admin's session claimed it before its retry: %+v", got)
	}

	// A failure that is not retryable dead-letters at once.
	call(t, ann, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "impossible"}, &sent)
	call(t, bob, "claim", nil, &got)
	if !got.Claimed || got.Message.MsgID != sent.MsgID {
		t.Fatalf("claim of the second message = %+v", got)
	}
	call(t, bob, "fail", map[string]any{"record_id": got.Message.RecordID, "lease_id": got.LeaseID,
		"error": "cannot be done"}, &out)
	if out.State != string(model.Dead) {
		t.Fatalf("permanent fail = %+v", out)
	}
}

// srvAdminSession is a session for did with an admin's token.
func srvAdminSession(t *testing.T, srv *testserver.Server, did string) *mcp.ClientSession {
	t.Helper()
	return session(t, srv.Admin, did)
}

// A msgcenter that stops answering does not hold a tool call for good:
// each call gives up after its bound (the claim's wait plus a margin).
func TestStalledServerBoundsToolCalls(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stall.Close()
	defer close(release)
	srv, err := mcpserver.NewWithTimeout(client.New(stall.URL, "t"), "did:agent:ann", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, srv)
	start := time.Now()
	msg := callErr(t, cs, "claim", map[string]any{"wait_ms": 300})
	if took := time.Since(start); took > 5*time.Second || !strings.Contains(msg, "did not answer") {
		t.Fatalf("claim against a stalled server: %q after %v", msg, took)
	}
	if msg := callErr(t, cs, "send_message", map[string]any{"to": []string{"did:agent:bob"}, "text": "x"}); !strings.Contains(msg, "did not answer") {
		t.Fatalf("send against a stalled server: %q", msg)
	}
}

// carolThroughATunnel starts a node where did:tg:carol is reached through
// did:tunnel:tg, and returns the tunnel's client and ann's tools.
func carolThroughATunnel(t *testing.T) (*client.Client, *mcp.ClientSession) {
	t.Helper()
	srv := testserver.Start(t, core.Config{})
	if _, err := srv.Admin.SetRoutes(context.Background(), "did:tg:carol", []model.ContactRoute{{TunnelDID: "did:tunnel:tg", Platform: "telegram", ChatID: "7"}}); err != nil {
		t.Fatal(err)
	}
	return srv.Client(t, "did:tunnel:tg", model.RoleTunnel), session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
}

// check_deliveries returns at most limit deliveries and moves its cursor
// to the last one returned, so the next call goes on from there.
func TestCheckDeliveriesPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tun, ann := carolThroughATunnel(t)
	var ids []string
	for i := range 3 {
		var sent mcpserver.SendOutput
		call(t, ann, "send_message", map[string]any{"to": []string{"did:tg:carol"}, "text": fmt.Sprintf("n%d", i)}, &sent)
		held, err := tun.Next(ctx, "did:tunnel:tg", model.TunnelOutbox, nil)
		if err != nil || held == nil {
			t.Fatalf("the tunnel's claim: %+v, %v", held, err)
		}
		if _, err := tun.Ack(ctx, held.Record.RecordID, held.Record.Lease.ID, "x"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, held.Record.RecordID)
	}
	var first, second mcpserver.DeliveriesOutput
	call(t, ann, "check_deliveries", map[string]any{"limit": 2}, &first)
	call(t, ann, "check_deliveries", map[string]any{"limit": 2, "after": first.NextAfter}, &second)
	var got []string
	for _, d := range append(first.Deliveries, second.Deliveries...) {
		got = append(got, d.RecordID)
	}
	if !slices.Equal(got, ids) || len(first.Deliveries) != 2 || !first.More || second.More {
		t.Fatalf("pages %+v then %+v; want the three deliveries %v, two then one", first, second, ids)
	}
}

// A message sent through a tunnel: check_deliveries reports how it ended,
// once, and the cursor moves on.
func TestCheckDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tun, ann := carolThroughATunnel(t)

	var sent mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"to": []string{"did:tg:carol", "did:tg:dave"}, "text": "hello"}, &sent)
	if len(sent.ViaTunnels) != 1 || sent.ViaTunnels[0].To != "did:tg:carol" || sent.ViaTunnels[0].Tunnel != "did:tunnel:tg" {
		t.Fatalf("send through the tunnel = %+v", sent)
	}
	var none mcpserver.DeliveriesOutput
	call(t, ann, "check_deliveries", nil, &none)
	if len(none.Deliveries) != 0 || none.NextAfter == 0 {
		t.Fatalf("before the tunnel worked: %+v", none)
	}
	held, err := tun.Next(ctx, "did:tunnel:tg", model.TunnelOutbox, nil)
	if err != nil || held == nil {
		t.Fatalf("the tunnel's claim: %+v, %v", held, err)
	}
	if _, err := tun.Fail(ctx, held.Record.RecordID, held.Record.Lease.ID, wire.DeliveryResult{ErrorCode: "403", ErrorMessage: "bot was blocked"}); err != nil {
		t.Fatal(err)
	}
	var out mcpserver.DeliveriesOutput
	call(t, ann, "check_deliveries", map[string]any{"after": none.NextAfter}, &out)
	if len(out.Deliveries) != 1 {
		t.Fatalf("deliveries = %+v", out)
	}
	d := out.Deliveries[0]
	if d.Event != model.EventDeliveryDead || d.RecordID != sent.ViaTunnels[0].RecordID || d.MsgID != sent.MsgID ||
		!strings.Contains(d.Detail, "bot was blocked") {
		t.Fatalf("delivery = %+v", d)
	}
	var after mcpserver.DeliveriesOutput
	call(t, ann, "check_deliveries", map[string]any{"after": out.NextAfter}, &after)
	if len(after.Deliveries) != 0 || after.More {
		t.Fatalf("past the cursor: %+v", after)
	}
}

// A post to a group reaches its members, who read whose it is and where
// it was posted.
func TestGroupPost(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	if _, err := srv.Admin.SetSubscribers(context.Background(), "did:group:ops", []string{"did:agent:ann", "did:agent:bob"}); err != nil {
		t.Fatal(err)
	}
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	bob := session(t, srv.Client(t, "did:agent:bob", model.RoleAgent), "did:agent:bob")
	var sent mcpserver.SendOutput
	call(t, ann, "send_message", map[string]any{"group": "did:group:ops", "text": "deploying now"}, &sent)
	if !sent.Sent || !slices.Contains(sent.DeliveredTo, "did:agent:bob") {
		t.Fatalf("group post = %+v", sent)
	}
	var inbox mcpserver.InboxOutput
	call(t, bob, "check_inbox", nil, &inbox)
	if len(inbox.Messages) != 1 || inbox.Messages[0].From != "did:agent:ann" || inbox.Messages[0].Group != "did:group:ops" {
		t.Fatalf("bob's inbox = %+v", inbox)
	}
}

// The tools act only for the token's DID: tools built for another DID
// with an agent's token are refused by the server.
func TestToolsKeepTheTokensScope(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	mallory := session(t, srv.Client(t, "did:agent:mallory", model.RoleAgent), "did:agent:bob")
	if msg := callErr(t, mallory, "check_inbox", nil); !strings.Contains(msg, "forbidden") {
		t.Fatalf("reading bob's inbox with mallory's token: %q", msg)
	}
	if msg := callErr(t, mallory, "send_message", map[string]any{"to": []string{"did:agent:ann"}, "text": "as bob"}); !strings.Contains(msg, "forbidden") {
		t.Fatalf("sending as bob with mallory's token: %q", msg)
	}
}

// A group that keeps its messages in its own log (group delivery) is read
// with read_group, page by page; a non-member may not read it.
func TestReadGroup(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	if _, err := srv.Admin.SetGroup(context.Background(), "did:group:log", &wire.SubscribersRequest{
		Subscribers: []string{"did:agent:ann", "did:agent:bob"}, Delivery: model.DeliverToGroup}); err != nil {
		t.Fatal(err)
	}
	ann := session(t, srv.Client(t, "did:agent:ann", model.RoleAgent), "did:agent:ann")
	bob := session(t, srv.Client(t, "did:agent:bob", model.RoleAgent), "did:agent:bob")
	for _, text := range []string{"one", "two", "three", strings.Repeat("long ", 100)} {
		var sent mcpserver.SendOutput
		call(t, ann, "send_message", map[string]any{"group": "did:group:log", "text": text}, &sent)
	}
	var inbox mcpserver.InboxOutput
	call(t, bob, "check_inbox", nil, &inbox)
	if len(inbox.Messages) != 0 {
		t.Fatalf("a group-delivery post reached bob's inbox: %+v", inbox)
	}
	var first, second mcpserver.GroupOutput
	call(t, bob, "read_group", map[string]any{"group": "did:group:log", "limit": 2}, &first)
	call(t, bob, "read_group", map[string]any{"group": "did:group:log", "after_seq": first.NextAfterSeq, "limit": 1}, &second)
	var got []string
	for _, m := range append(first.Messages, second.Messages...) {
		got = append(got, m.Text)
		if m.From != "did:agent:ann" || m.Group != "did:group:log" {
			t.Fatalf("a group message reads %+v", m)
		}
	}
	if strings.Join(got, " ") != "one two three" || !first.More || !second.More {
		t.Fatalf("pages %+v then %+v", first, second)
	}
	// A page is bounded as check_inbox's is: max_text cuts each text.
	var last mcpserver.GroupOutput
	call(t, bob, "read_group", map[string]any{"group": "did:group:log", "after_seq": second.NextAfterSeq, "max_text": 20}, &last)
	if len(last.Messages) != 1 || !last.Messages[0].Truncated || len([]rune(last.Messages[0].Text)) > 21 || last.More {
		t.Fatalf("the long message with max_text 20: %+v", last)
	}
	mallory := session(t, srv.Client(t, "did:agent:mallory", model.RoleAgent), "did:agent:mallory")
	if msg := callErr(t, mallory, "read_group", map[string]any{"group": "did:group:log"}); !strings.Contains(msg, "forbidden") {
		t.Fatalf("a non-member reading the group: %q", msg)
	}
}
