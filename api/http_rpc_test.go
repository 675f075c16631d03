package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Tests of the RPC socket (GET /v1/rpc) against a real listening server,
// with a raw WebSocket client (the wire format) and with the SDK over it.

// rpcSock is a raw RPC socket: the test writes frames and reads answers.
type rpcSock struct {
	t *testing.T
	c *websocket.Conn
}

func dialRPC(t *testing.T, ctx context.Context, e *env, token string) *rpcSock {
	t.Helper()
	return &rpcSock{t: t, c: dialWS(t, ctx, e, "/v1/rpc", token, nil)}
}

// send writes one frame: a string as is, anything else as JSON.
func (s *rpcSock) send(ctx context.Context, frame any) {
	s.t.Helper()
	b, ok := frame.(string)
	if !ok {
		data, err := json.Marshal(frame)
		if err != nil {
			s.t.Fatal(err)
		}
		b = string(data)
	}
	if err := s.c.Write(ctx, websocket.MessageText, []byte(b)); err != nil {
		s.t.Fatalf("write frame: %v", err)
	}
}

// answers reads frames until n answers came, and returns them by id.
func (s *rpcSock) answers(ctx context.Context, n int) map[uint64]wire.RPCResponse {
	s.t.Helper()
	out := map[uint64]wire.RPCResponse{}
	for got := 0; got < n; {
		_, b, err := s.c.Read(ctx)
		if err != nil {
			s.t.Fatalf("read answers (%d of %d so far): %v", got, n, err)
		}
		var batch []wire.RPCResponse
		if b[0] == '[' {
			err = json.Unmarshal(b, &batch)
		} else {
			batch = make([]wire.RPCResponse, 1)
			err = json.Unmarshal(b, &batch[0])
		}
		if err != nil {
			s.t.Fatalf("answer frame %s: %v", b, err)
		}
		for _, a := range batch {
			if _, dup := out[a.ID]; dup {
				s.t.Fatalf("two answers to request %d", a.ID)
			}
			out[a.ID] = a
			got++
		}
	}
	return out
}

func (s *rpcSock) one(ctx context.Context, frame any) wire.RPCResponse {
	s.t.Helper()
	s.send(ctx, frame)
	for _, a := range s.answers(ctx, 1) {
		return a
	}
	panic("unreachable")
}

// asResp turns an answer into what the HTTP helpers check.
func asResp(a wire.RPCResponse) resp {
	h := http.Header{}
	for k, v := range a.Headers {
		h.Set(k, v)
	}
	if len(a.Body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	return resp{status: a.Status, header: h, body: a.Body}
}

func rpcReq(id uint64, method, path string, body any) wire.RPCRequest {
	q := wire.RPCRequest{ID: id, Method: method, Path: path}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err)
		}
		q.Body = b
	}
	return q
}

// TestRPCAnswersAsHTTPDoes sends the same requests over HTTP and over the
// socket, several to a frame, and requires the same answers: the socket
// adds a transport, not an API.
func TestRPCAnswersAsHTTPDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "over http"))
	s := dialRPC(t, ctx, e, e.alice)

	type call struct {
		method, path string
		body         any
	}
	calls := []call{
		{"GET", "/v1/messages/" + esc(sent.MsgID), nil},
		{"GET", boxPath(didAlice, model.Outbox, "sync?limit=10"), nil},
		{"GET", boxPath(didBob, model.Inbox, "sync"), nil},                               // 403: not alice's
		{"POST", "/v1/post_send", map[string]any{}},                                      // 400: msg
		{"POST", "/v1/post_send", `{"msg":{"from":"did:alice","to":["did:bob"]},"x":1}`}, // 400: unknown field
		{"GET", "/v1/records/nope", nil},                                                 // 404
		{"GET", "/v1/nowhere", nil},                                                      // 404 route
		{"DELETE", "/v1/post_send", nil},                                                 // 405 with Allow
		{"GET", "/v1/owners/" + esc(didAlice) + "/conversations", nil},
	}
	var frame []wire.RPCRequest
	for i, c := range calls {
		q := rpcReq(uint64(i+1), c.method, c.path, nil)
		switch b := c.body.(type) {
		case nil:
		case string:
			q.Body = json.RawMessage(b)
		default:
			q = rpcReq(uint64(i+1), c.method, c.path, b)
		}
		frame = append(frame, q)
	}
	s.send(ctx, frame)
	got := s.answers(ctx, len(calls))
	for i, c := range calls {
		a := got[uint64(i+1)]
		h := e.do(t, c.method, c.path, e.alice, c.body)
		if a.Status != h.status {
			t.Errorf("%s %s: rpc %d %s, http %s", c.method, c.path, a.Status, a.Body, h)
			continue
		}
		if !jsonEqual(a.Body, h.body) {
			t.Errorf("%s %s: rpc body %s\nhttp body %s", c.method, c.path, a.Body, bytes.TrimSpace(h.body))
		}
		if allow := h.header.Get("Allow"); allow != a.Headers["Allow"] {
			t.Errorf("%s %s: rpc Allow %q, http %q", c.method, c.path, a.Headers["Allow"], allow)
		}
	}
	wantErr(t, asResp(got[3]), 403, wire.CodeForbidden, "")
	wantErr(t, asResp(got[4]), 400, wire.CodeInvalid, "msg")
	wantErr(t, asResp(got[5]), 400, wire.CodeInvalid, "x")

	// A write over the socket is a write: bob finds it in his inbox.
	w := s.one(ctx, rpcReq(99, "POST", "/v1/post_send", wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "over rpc")}))
	res := ok[wire.PostSendResult](t, asResp(w))
	if w.ID != 99 || res.MsgID == "" {
		t.Fatalf("post_send over rpc: %+v", w)
	}
	if got := msgIDsOf(e.syncAll(t, e.bob, didBob, model.Inbox)); !equalSet(got, []string{sent.MsgID, res.MsgID}) {
		t.Fatalf("bob's inbox: %q, want %s and %s", got, sent.MsgID, res.MsgID)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// TestRPCRefusesWhatItCannotServe: each mistake is answered with a 400
// naming what to fix, nothing is written, and the socket goes on.
func TestRPCRefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := dialRPC(t, ctx, e, e.alice)
	before := e.snap(t)
	send := rpcReq(0, "POST", "/v1/post_send", wire.PostSendRequest{Msg: chat(didAlice, []string{didBob}, "x")})
	cases := []struct {
		name   string
		frame  any
		id     uint64
		status int
		field  string
	}{
		{"not JSON", "hello", 0, 400, ""},
		{"JSON but not a request", `42`, 0, 400, ""},
		{"empty batch", `[]`, 0, 400, ""},
		{"trailing data", `{"id":1,"method":"GET","path":"/v1/events"} x`, 0, 400, ""},
		{"unknown member", `{"id":1,"method":"GET","path":"/v1/events","verb":"x"}`, 0, 400, "verb"},
		{"id of the wrong type", `{"id":"one","method":"GET","path":"/v1/events"}`, 0, 400, "id"},
		{"no id", func() any { q := send; return q }(), 0, 400, "id"},
		{"no method", wire.RPCRequest{ID: 2, Path: "/v1/events"}, 2, 400, "method"},
		{"unknown method", wire.RPCRequest{ID: 3, Method: "PATCH", Path: "/v1/events"}, 3, 400, "method"},
		{"outside /v1", wire.RPCRequest{ID: 4, Method: "GET", Path: "/metrics"}, 4, 400, "path"},
		{"pprof", wire.RPCRequest{ID: 5, Method: "GET", Path: "/debug/pprof/heap"}, 5, 400, "path"},
		{"a stream", wire.RPCRequest{ID: 6, Method: "GET", Path: boxPath(didAlice, model.Inbox, "stream")}, 6, 400, "path"},
		{"the socket itself", wire.RPCRequest{ID: 7, Method: "GET", Path: "/v1/rpc"}, 7, 400, "path"},
		{"bad body", `{"id":8,"method":"POST","path":"/v1/post_send","body":{"msg":7}}`, 8, 400, "msg"},
	}
	for _, c := range cases {
		a := s.one(ctx, c.frame)
		if a.ID != c.id {
			t.Errorf("%s: answer id %d, want %d", c.name, a.ID, c.id)
		}
		d := wantErr(t, asResp(a), c.status, wire.CodeInvalid, c.field)
		t.Logf("%s: %s", c.name, d.Message)
	}
	if err := s.c.Write(ctx, websocket.MessageBinary, []byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, asResp(s.answers(ctx, 1)[0]), 400, wire.CodeInvalid, "")
	e.assertUnchanged(t, before)

	// Still open and serving.
	a := s.one(ctx, wire.RPCRequest{ID: 9, Method: "GET", Path: "/v1/owners/" + esc(didAlice) + "/conversations"})
	if a.ID != 9 || a.Status != 200 {
		t.Fatalf("after the mistakes: %+v", a)
	}
}

func TestRPCAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		name, token string
	}{{"no token", ""}, {"unknown token", "nope"}} {
		opts := &websocket.DialOptions{}
		if c.token != "" {
			opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + c.token}}
		}
		_, res, err := websocket.Dial(ctx, e.wsURL("/v1/rpc"), opts)
		if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: dial gave %v, %v; want 401", c.name, res, err)
		}
	}
	// Browsers cannot set headers on a WebSocket: access_token works too,
	// and the identity is the token's.
	c, _, err := websocket.Dial(ctx, e.wsURL("/v1/rpc?access_token="+e.bob), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	s := &rpcSock{t: t, c: c}
	a := s.one(ctx, wire.RPCRequest{ID: 1, Method: "GET", Path: boxPath(didAlice, model.Inbox, "sync")})
	wantErr(t, asResp(a), 403, wire.CodeForbidden, "")
	// The token carried in a request's body or path is ignored: there is
	// no header to carry one, the socket's identity is the only one.
	if a := s.one(ctx, wire.RPCRequest{ID: 2, Method: "GET", Path: boxPath(didBob, model.Inbox, "sync?access_token="+e.admin)}); a.Status != 200 {
		t.Fatalf("bob's own box: %+v", a)
	}
	// Not a WebSocket: 406, saying how to open it.
	r := e.do(t, "GET", "/v1/rpc", e.alice, nil)
	wantErr(t, r, http.StatusNotAcceptable, wire.CodeNotAcceptable, "")
}

// TestRPCConcurrentAndCancelled: a long poll does not hold up the requests
// behind it, and a cancelled one ends without claiming.
func TestRPCConcurrentAndCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := dialRPC(t, ctx, e, e.bob)
	next := rpcReq(1, "POST", boxPath(didBob, model.Inbox, "next"), wire.NextRequest{WaitMS: 10_000})
	s.send(ctx, next)
	// While 1 waits, 2 is answered.
	a := s.one(ctx, wire.RPCRequest{ID: 2, Method: "GET", Path: "/v1/owners/" + esc(didBob) + "/presence"})
	if a.ID != 2 || a.Status != 200 || !strings.Contains(string(a.Body), `"online":true`) {
		t.Fatalf("presence while the poll waits: %+v (an RPC socket counts as online)", a)
	}
	// An id in flight cannot be reused.
	dup := s.one(ctx, rpcReq(1, "GET", "/v1/events", nil))
	if dup.ID != 1 {
		t.Fatalf("reused id answered as %d", dup.ID)
	}
	wantErr(t, asResp(dup), 400, wire.CodeInvalid, "id")

	start := time.Now()
	s.send(ctx, wire.RPCRequest{ID: 1, Cancel: true})
	end := s.answers(ctx, 1)[1]
	if time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled poll answered after %s", time.Since(start))
	}
	if end.Status == 200 {
		t.Fatalf("cancelled poll claimed: %+v", end)
	}
	// A message arriving now stays unclaimed: the poll is gone.
	sent := e.postSend(t, e.alice, chat(didAlice, []string{didBob}, "after the cancel"))
	time.Sleep(100 * time.Millisecond)
	for _, it := range e.syncAll(t, e.bob, didBob, model.Inbox) {
		if it.Record.MsgID == sent.MsgID && it.Record.State != model.Unread {
			t.Fatalf("record claimed by a cancelled poll: %+v", it.Record)
		}
	}
	got := s.one(ctx, rpcReq(3, "POST", boxPath(didBob, model.Inbox, "next"), wire.NextRequest{}))
	claimed := ok[wire.RecordWithMsg](t, asResp(got))
	if claimed.Record.MsgID != sent.MsgID {
		t.Fatalf("claimed %s, want %s", claimed.Record.MsgID, sent.MsgID)
	}
}

// TestRPCShutdown: a closing server answers what is in flight (a long
// poll ends, 204) and then closes the socket with 1001.
func TestRPCShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := dialRPC(t, ctx, e, e.bob)
	s.send(ctx, rpcReq(1, "POST", boxPath(didBob, model.Inbox, "next"), wire.NextRequest{WaitMS: 30_000}))
	time.Sleep(100 * time.Millisecond) // let the poll start waiting
	start := time.Now()
	e.api.Close()
	a := s.answers(ctx, 1)[1]
	if a.Status != http.StatusNoContent {
		t.Fatalf("poll at shutdown: %+v, want 204", a)
	}
	_, _, err := s.c.Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusGoingAway {
		t.Fatalf("after the answers: %v (status %d), want close 1001", err, st)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %s", d)
	}
}

// TestRPCClientSDK drives the Go SDK over one socket from many goroutines:
// every send lands once, every claim is acknowledged, and the answers
// (errors included) are those of HTTP.
func TestRPCClientSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(token string) *client.Client {
		r, err := client.DialRPC(ctx, e.url, token)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return client.New(e.url, token, client.WithRPC(r))
	}
	alice, bob := dial(e.alice), dial(e.bob)

	if _, err := client.DialRPC(ctx, e.url, "nope"); !client.IsUnauthorized(err) {
		t.Fatalf("dial with a bad token: %v, want 401", err)
	}
	if _, err := alice.PostSend(ctx, &wire.PostSendRequest{}); !client.IsInvalid(err) {
		t.Fatalf("empty post_send: %v, want invalid", err)
	}
	// A DID with a slash stays one path segment over the socket too.
	if _, err := alice.Sync(ctx, wire.SyncQuery{Owner: "did:x/y", Box: model.Inbox}); !client.IsForbidden(err) {
		t.Fatalf("sync of another's box: %v, want forbidden", err)
	}

	const producers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, producers*2)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m := chat(didAlice, []string{didBob}, fmt.Sprintf("p%d-%d", p, i))
				if _, err := alice.PostSend(ctx, &wire.PostSendRequest{Msg: m}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := bob.Next(ctx, didBob, model.Inbox, &wire.NextRequest{WaitMS: 500})
				if err != nil {
					errs <- err
					return
				}
				if r == nil {
					return // nothing more within half a second: the producers are done
				}
				m, err := client.DecodeMessage(r.Msg)
				if err != nil {
					errs <- err
					return
				}
				if _, err := bob.SetState(ctx, r.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: r.Record.Lease.ID}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen[m.Content.Content]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != producers*each {
		t.Fatalf("bob acknowledged %d distinct messages, want %d", len(seen), producers*each)
	}
	for text, n := range seen {
		if n != 1 {
			t.Fatalf("%s acknowledged %d times", text, n)
		}
	}
	for _, it := range e.syncAll(t, e.bob, didBob, model.Inbox) {
		if it.Record.State != model.Readed {
			t.Fatalf("record %s left %s", it.Record.RecordID, it.Record.State)
		}
	}
}

// TestRPCClientRedials: calls in flight fail when the socket drops, and
// the next call dials again.
func TestRPCClientRedials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var conns []net.Conn
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}
	r, err := client.DialRPC(ctx, e.url, e.bob, client.RPCHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bob := client.New(e.url, e.bob, client.WithRPC(r))
	waiting := make(chan error, 1)
	go func() {
		_, err := bob.Next(ctx, didBob, model.Inbox, &wire.NextRequest{WaitMS: 30_000})
		waiting <- err
	}()
	time.Sleep(100 * time.Millisecond)
	// Cutting the TCP connection under the socket is a network drop.
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	select {
	case err := <-waiting:
		if err == nil {
			t.Fatal("a poll in flight on a dropped socket succeeded")
		}
	case <-ctx.Done():
		t.Fatal("a poll in flight on a dropped socket did not fail")
	}
	if _, err := bob.Presence(ctx, didBob); err != nil {
		t.Fatalf("the call after the drop: %v", err)
	}
	r.Close()
	if _, err := bob.Presence(ctx, didBob); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a call after Close: %v, want the socket closed", err)
	}
}
