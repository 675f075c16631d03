package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Tests of the box and event streams (issue 4) against a real listening
// server: replay then live, resume, authentication, negotiation,
// heartbeats, presence and shutdown. The chaos and slow-client tests are in
// http_stream_chaos_test.go.

// sseEvent is one parsed Server-Sent Event (or a comment).
type sseEvent struct {
	id, event, data string
	comment         string
}

// sseStream is a raw SSE client: the test sees every line the server sends.
type sseStream struct {
	resp *http.Response
	br   *bufio.Reader
}

// openSSE opens path as SSE with token in the Authorization header (none
// when empty) and extra headers; it returns the response when not 200.
func openSSE(ctx context.Context, e *env, path, token string, hdr map[string]string) (*sseStream, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp, nil
	}
	return &sseStream{resp: resp, br: bufio.NewReader(resp.Body)}, resp, nil
}

func mustSSE(t testing.TB, ctx context.Context, e *env, path, token string, hdr map[string]string) *sseStream {
	t.Helper()
	s, resp, err := openSSE(ctx, e, path, token, hdr)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if s == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("open %s: %d %s", path, resp.StatusCode, b)
	}
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() { s.resp.Body.Close() }

// next returns the next event or comment (a retry: line is skipped).
func (s *sseStream) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.id != "" || ev.data != "" || ev.event != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			return sseEvent{comment: strings.TrimSpace(line[1:])}, nil
		default:
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				ev.id = v
			case "data":
				ev.data = v
			case "event":
				ev.event = v
			}
		}
	}
}

// nextFrame skips comments and decodes a box frame, checking id == seq.
func (s *sseStream) nextFrame(t testing.TB) wire.StreamFrame {
	t.Helper()
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("read SSE: %v", err)
		}
		if ev.comment != "" {
			continue
		}
		var f wire.StreamFrame
		if err := json.Unmarshal([]byte(ev.data), &f); err != nil {
			t.Fatalf("SSE event %+v: %v", ev, err)
		}
		if ev.id != strconv.FormatInt(f.Seq, 10) || f.Record.Seq != f.Seq {
			t.Fatalf("SSE event id %q, frame seq %d, record seq %d: must agree", ev.id, f.Seq, f.Record.Seq)
		}
		return f
	}
}

// wsURL is the ws:// address of path.
func (e *env) wsURL(path string) string { return "ws" + strings.TrimPrefix(e.url, "http") + path }

func dialWS(t testing.TB, ctx context.Context, e *env, path, token string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	if opts == nil {
		opts = &websocket.DialOptions{}
	}
	opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + token}}
	c, resp, err := websocket.Dial(ctx, e.wsURL(path), opts)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

func readWSFrame(t testing.TB, ctx context.Context, c *websocket.Conn) wire.StreamFrame {
	t.Helper()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read WebSocket: %v", err)
	}
	var f wire.StreamFrame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("WebSocket frame %s: %v", b, err)
	}
	return f
}

// fill dispatches n messages to alice's INBOX, texts prefix-0 … prefix-(n-1).
func (e *env) fill(t testing.TB, prefix string, n int) {
	t.Helper()
	for i := range n {
		e.dispatch(t, chat(didExt, []string{didAlice}, fmt.Sprintf("%s-%d", prefix, i)))
	}
}

// checkRun asserts that frames carry seqs from..from+len-1 and the texts
// prefix-(from-1-offset)….
func checkRun(t testing.TB, frames []wire.StreamFrame, from int64, prefix string, firstIdx int) {
	t.Helper()
	for i, f := range frames {
		if f.Seq != from+int64(i) {
			t.Fatalf("frame %d has seq %d, want %d (no gap, no duplicate)", i, f.Seq, from+int64(i))
		}
		if got, want := contentOf(t, f.Msg), fmt.Sprintf("%s-%d", prefix, firstIdx+i); got != want {
			t.Fatalf("frame seq %d carries %q, want %q", f.Seq, got, want)
		}
	}
}

func TestStreamReplayThenLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fill(t, "old", 20)
	path := boxPath(didAlice, model.Inbox, "stream") + "?after_seq=5"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sse := mustSSE(t, ctx, e, path, e.alice, nil)
	ws := dialWS(t, ctx, e, path, e.alice, nil)
	var fromSSE, fromWS []wire.StreamFrame
	for range 15 {
		fromSSE = append(fromSSE, sse.nextFrame(t))
		fromWS = append(fromWS, readWSFrame(t, ctx, ws))
	}
	checkRun(t, fromSSE, 6, "old", 5)
	checkRun(t, fromWS, 6, "old", 5)

	// Live: written while both are connected and idle.
	go e.fill(t, "new", 30)
	fromSSE, fromWS = nil, nil
	for range 30 {
		fromSSE = append(fromSSE, sse.nextFrame(t))
		fromWS = append(fromWS, readWSFrame(t, ctx, ws))
	}
	checkRun(t, fromSSE, 21, "new", 0)
	checkRun(t, fromWS, 21, "new", 0)
	if fromSSE[0].Record.Owner != didAlice || fromSSE[0].Record.BoxKind != model.Inbox {
		t.Errorf("frame record = %+v, want alice's INBOX", fromSSE[0].Record)
	}
}

func TestStreamLastEventIDWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fill(t, "m", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := mustSSE(t, ctx, e, boxPath(didAlice, model.Inbox, "stream")+"?after_seq=2", e.alice,
		map[string]string{"Last-Event-ID": "7"})
	checkRun(t, []wire.StreamFrame{s.nextFrame(t), s.nextFrame(t), s.nextFrame(t)}, 8, "m", 7)

	// A cursor the header gave is refused under the header's name, not
	// under a query parameter the client never sent.
	for _, c := range []struct{ path, id string }{
		{boxPath(didAlice, model.Inbox, "stream"), "x"},
		{boxPath(didAlice, model.Inbox, "stream"), "-1"},
		{boxPath(didAlice, model.Inbox, "stream") + "?after_seq=2", "9999"}, // past the box's end
		{"/v1/events/stream", "-3"},
		{"/v1/events/stream?owner=" + didAlice, "99999999"}, // past the log's end
	} {
		wantSSERefused(t, ctx, e, c.path, e.admin, map[string]string{"Last-Event-ID": c.id}, "Last-Event-ID")
	}
	for path, param := range map[string]string{
		boxPath(didAlice, model.Inbox, "stream") + "?after_seq=1&after_seq=5": "after_seq",
		"/v1/events/stream?after=1&after=2":                                   "after",
	} {
		wantSSERefused(t, ctx, e, path, e.admin, nil, param)
	}
	wantSSERefused(t, ctx, e, boxPath(didAlice, model.Inbox, "stream")+"?after_seq=9999", e.alice, nil, "after_seq")
}

// wantSSERefused opens an SSE stream that must be refused with a 400
// naming field.
func wantSSERefused(t *testing.T, ctx context.Context, e *env, path, token string, hdr map[string]string, field string) {
	t.Helper()
	_, resp, err := openSSE(ctx, e, path, token, hdr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantErr(t, resp2(resp, b), http.StatusBadRequest, wire.CodeInvalid, field)
}

func resp2(r *http.Response, body []byte) resp {
	return resp{status: r.StatusCode, header: r.Header, body: body}
}

func TestStreamAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fill(t, "m", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	box := boxPath(didAlice, model.Inbox, "stream")

	// The token as a query parameter (browsers), SSE and WebSocket.
	s := mustSSE(t, ctx, e, box+"?access_token="+e.alice, "", nil)
	checkRun(t, []wire.StreamFrame{s.nextFrame(t)}, 1, "m", 0)
	c, _, err := websocket.Dial(ctx, e.wsURL(box+"?after_seq=1&access_token="+e.alice), nil)
	if err != nil {
		t.Fatalf("WebSocket with access_token: %v", err)
	}
	defer c.CloseNow()
	checkRun(t, []wire.StreamFrame{readWSFrame(t, ctx, c)}, 2, "m", 1)

	status := func(path, token string) resp {
		t.Helper()
		_, r, err := openSSE(ctx, e, path, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		return resp2(r, b)
	}
	wantErr(t, status(box+"?access_token=mct_bogus", ""), http.StatusUnauthorized, wire.CodeUnauthorized, "")
	wantErr(t, status(box, ""), http.StatusUnauthorized, wire.CodeUnauthorized, "")
	// Only stream routes take it.
	wantErr(t, e.do(t, "GET", boxPath(didAlice, model.Inbox, "sync")+"?access_token="+e.alice, "", nil),
		http.StatusUnauthorized, wire.CodeUnauthorized, "")
	// Authorization as for sync: not bob's to read; the event stream of
	// another owner neither.
	wantErr(t, status(box, e.bob), http.StatusForbidden, wire.CodeForbidden, "")
	wantErr(t, status("/v1/events/stream?owner="+didAlice, e.bob), http.StatusForbidden, wire.CodeForbidden, "")
	if _, r, err := websocket.Dial(ctx, e.wsURL(box), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.bob}}}); err == nil || r == nil || r.StatusCode != http.StatusForbidden {
		t.Errorf("WebSocket of another's box: err %v, response %v; want 403", err, r)
	}
	// Neither WebSocket nor SSE asked for.
	r := e.do(t, "GET", box, e.alice, nil)
	wantErr(t, r, http.StatusNotAcceptable, wire.CodeNotAcceptable, "")
	if !strings.Contains(string(r.body), "text/event-stream") || !strings.Contains(string(r.body), "websocket") {
		t.Errorf("406 body %s should name what to send", r.body)
	}
}

func TestStreamHeartbeatPresenceAndEvents(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, api.Options{StreamHeartbeat: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s := mustSSE(t, ctx, e, boxPath(didAlice, model.Inbox, "stream"), e.alice, nil)
	if ev, err := s.next(); err != nil || ev.comment != "ping" {
		t.Fatalf("idle SSE stream: got %+v, %v; want the heartbeat comment `: ping`", ev, err)
	}
	var pings atomic.Int64
	// After the events alice has already (her token's), so that the
	// first stream has nothing to read.
	mine := e.allEvents(t, e.alice, "")
	after := int64(0)
	if len(mine) > 0 {
		after = mine[len(mine)-1].EventID
	}
	ws := dialWS(t, ctx, e, fmt.Sprintf("/v1/events/stream?after=%d", after), e.alice, &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true }})
	wsCtx, wsCancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, _ = ws.Read(wsCtx) // reading is what answers pings; nothing to read yet
	wsCancel()
	if pings.Load() == 0 {
		t.Error("no WebSocket ping within 300ms at a 50ms heartbeat")
	}
	ws = dialWS(t, ctx, e, "/v1/events/stream", e.alice, nil)

	// Presence: alice holds streams; bob holds none and may not ask about her.
	p := ok[wire.PresenceResult](t, e.do(t, "GET", "/v1/owners/"+esc(didAlice)+"/presence", e.alice, nil))
	if !p.Online || p.Streams < 2 || p.Owner != didAlice {
		t.Errorf("alice's presence = %+v, want online with >= 2 streams", p)
	}
	p = ok[wire.PresenceResult](t, e.do(t, "GET", "/v1/owners/"+esc(didBob)+"/presence", e.admin, nil))
	if p.Online || p.Streams != 0 {
		t.Errorf("bob's presence = %+v, want offline", p)
	}
	wantErr(t, e.do(t, "GET", "/v1/owners/"+esc(didAlice)+"/presence", e.bob, nil), http.StatusForbidden, wire.CodeForbidden, "")
	metrics := string(e.do(t, "GET", "/metrics", "", nil).body)
	for _, want := range []string{`msgcenter_stream_connections{kind="box"} 1`, `msgcenter_stream_connections{kind="events"}`, "msgcenter_stream_owners_online 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Events: alice sees hers, live, in event_id order.
	e.fill(t, "ev", 2)
	var last int64
	for n := 0; n < 2; {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev model.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == model.EventTokenCreated && ev.Owner == didAlice && ev.EventID > last {
			last = ev.EventID // the token the test server made for her
			continue
		}
		n++
		if ev.Owner != didAlice || ev.EventID <= last || ev.Type != model.EventRecordCreated {
			t.Errorf("event %+v after %d: want alice's record.created in order", ev, last)
		}
		last = ev.EventID
	}
	s.close()
	ws.CloseNow()
	deadline := time.Now().Add(5 * time.Second)
	for ok[wire.PresenceResult](t, e.do(t, "GET", "/v1/owners/"+esc(didAlice)+"/presence", e.alice, nil)).Streams > 0 {
		if time.Now().After(deadline) {
			t.Fatal("alice still present 5s after closing her streams")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStreamShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := mustSSE(t, ctx, e, boxPath(didAlice, model.Inbox, "stream"), e.alice, nil)
	ws := dialWS(t, ctx, e, boxPath(didAlice, model.Inbox, "stream"), e.alice, nil)
	start := time.Now()
	e.api.Close()
	_, _, err := ws.Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusGoingAway {
		t.Errorf("WebSocket after Close: %v (status %d), want close 1001 going away", err, st)
	}
	for {
		ev, err := s.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || ev.comment == "" {
			t.Fatalf("SSE after Close: %+v, %v; want the end of the stream", ev, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("streams took %s to end after Close", d)
	}
}

// Revoking a token ends the streams opened with it, SSE and WebSocket, box
// and events, before they carry anything written after the revocation.
func TestStreamsEndWithTheirToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:dora", Role: model.RoleAgent}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	box := boxPath("did:dora", model.Inbox, "stream")
	before := e.postSend(t, e.alice, chat(didAlice, []string{"did:dora"}, "before"))
	sse := mustSSE(t, ctx, e, box, tok.Token, nil)
	events := mustSSE(t, ctx, e, "/v1/events/stream?owner=did:dora", tok.Token, nil)
	ws := dialWS(t, ctx, e, box, tok.Token, nil)
	if f := sse.nextFrame(t); contentOf(t, f.Msg) != "before" {
		t.Fatalf("SSE before the revocation: %s", f.Msg)
	}
	if f := readWSFrame(t, ctx, ws); contentOf(t, f.Msg) != "before" {
		t.Fatalf("WebSocket before the revocation: %s", f.Msg)
	}
	for { // the events stream is at the first message's record
		ev, err := events.next()
		if err != nil {
			t.Fatalf("events before the revocation: %v", err)
		}
		if ev.event == "" && strings.Contains(ev.data, before.MsgID) {
			break
		}
	}
	if r := e.do(t, "DELETE", "/v1/tokens/"+tok.TokenID, e.admin, nil); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	e.postSend(t, e.alice, chat(didAlice, []string{"did:dora"}, "after SECRET"))

	for name, s := range map[string]*sseStream{"box": sse, "events": events} {
		for {
			ev, err := s.next()
			if err != nil {
				t.Fatalf("%s SSE ended without an error event: %v", name, err)
			}
			if ev.comment != "" {
				continue
			}
			if ev.event != "error" || !strings.Contains(ev.data, `"`+wire.CodeUnauthorized+`"`) {
				t.Fatalf("%s SSE after the revocation: %+v, want the error event %s", name, ev, wire.CodeUnauthorized)
			}
			break
		}
	}
	_, b, err := ws.Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("WebSocket after the revocation: frame %s, err %v (status %v); want it closed for the revoked token", b, err, st)
	}
}

// An idle stream of a revoked token ends at its next heartbeat, and a
// consumer stream's ack on a revoked token is refused, ending the stream.
func TestIdleStreamsEndWithTheirToken(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, api.Options{StreamHeartbeat: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok := func() wire.TokenResult {
		return ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:dora", Role: model.RoleAgent}))
	}
	revoke := func(id string) {
		if r := e.do(t, "DELETE", "/v1/tokens/"+id, e.admin, nil); r.status != http.StatusNoContent {
			t.Fatalf("revoke: %s", r)
		}
	}

	idle := tok()
	sse := mustSSE(t, ctx, e, boxPath("did:dora", model.Inbox, "stream"), idle.Token, nil)
	revoke(idle.TokenID)
	for {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("the idle stream ended without an error event: %v", err)
		}
		if ev.comment != "" {
			continue // a heartbeat before the revocation
		}
		if ev.event != "error" || !strings.Contains(ev.data, `"`+wire.CodeUnauthorized+`"`) {
			t.Fatalf("idle stream after the revocation: %+v", ev)
		}
		break
	}

	acker := tok()
	if r := e.do(t, "POST", "/v1/consumers", acker.Token, wire.ConsumerRequest{Name: "feed", SourceOwner: "did:dora", SourceBox: "INBOX"}); r.status != http.StatusCreated {
		t.Fatalf("create consumer: %s", r)
	}
	e.postSend(t, e.alice, chat(didAlice, []string{"did:dora"}, "one"))
	e.pump(t)
	ws := dialWS(t, ctx, e, boxPath("did:dora", model.ConsumerBox("feed"), "stream"), acker.Token, nil)
	if f := readWSFrame(t, ctx, ws); f.Seq != 1 {
		t.Fatalf("consumer frame %+v", f)
	}
	revoke(acker.TokenID)
	writeWS(t, ctx, ws, `{"type":"ack","seq":1}`)
	_, b, err := ws.Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("ack on a revoked token: frame %s, err %v (status %v); want the stream closed", b, err, st)
	}
	c := ok[wire.ConsumerInfo](t, e.do(t, "GET", "/v1/consumers/did:dora/feed", e.admin, nil))
	if c.AckedSeq != 0 {
		t.Fatalf("the revoked token's ack moved the cursor to %d", c.AckedSeq)
	}
}
