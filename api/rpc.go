package api

// The RPC socket, GET /v1/rpc: one WebSocket that carries the API's own
// requests. A client making many small calls (an agent runtime, a pool of
// producers and consumers) then pays for the connection and the HTTP
// framing once instead of per call, and calls made at the same time travel
// together: many requests in one frame, many answers in one frame, one
// system call each way instead of two per call.
//
// A client frame holds one request or a JSON array of them:
//
//	{"id":7,"method":"POST","path":"/v1/post_send","body":{"msg":{...}}}
//
// Each request is served as the same HTTP request would be, through the
// same routes, validation and errors, as the identity that opened the
// socket, and is answered with its id:
//
//	{"id":7,"status":200,"body":{...}}
//
// Requests run concurrently; answers go out in the order they finish,
// several to a frame (a JSON array) when several are ready. A frame that
// cannot be read as requests is answered with id 0 and a 400, and the socket
// stays open: the mistake is the client's to see. Streams are not served
// over it (they are WebSockets of their own), nor is anything outside /v1.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	// rpcMaxInFlight bounds the requests of one socket being served at
	// once. When it is reached the socket is not read until one finishes,
	// which TCP pushes back to the client. Long polls count.
	rpcMaxInFlight = 256
	// rpcAnswerBytes closes a frame of answers once it holds this much.
	rpcAnswerBytes = 256 << 10
	// rpcMinFrame is the least frame size a socket takes, so that a server
	// configured with a small message limit still takes a client's batch;
	// each request's body is held to the message limit on its own (413).
	rpcMinFrame = 1 << 20
	// rpcEnvelope is room for the envelopes around the bodies of a frame.
	rpcEnvelope = 64 << 10
	// rpcDrain bounds how long a closing server waits for the requests in
	// flight before it closes the socket.
	rpcDrain = 5 * time.Second
)

// streamKindRPC labels RPC sockets among the open streams (presence and the
// connection gauge): a client holding one is online.
const streamKindRPC = "rpc"

// rpcIdentity carries the socket's identity into the requests it serves;
// wrap takes it instead of a token. Only this package can set it.
type rpcIdentity struct{}

// rpc is GET /v1/rpc.
func (a *API) rpc(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	if negotiate(r) != modeWebSocket {
		writeJSON(w, http.StatusNotAcceptable, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNotAcceptable,
			Message: "/v1/rpc is a WebSocket: open it with Upgrade: websocket"}})
		return nil
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// A token, never a cookie, authenticates the socket (see
		// serveWebSocket).
		InsecureSkipVerify: true,
	})
	if err != nil {
		return nil // Accept has answered the request
	}
	c.SetReadLimit(max(a.maxBody, rpcMinFrame) + rpcEnvelope)
	defer a.streams.open(who.DID, streamKindRPC)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &rpcSocket{a: a, c: c, host: r.Host, remote: r.RemoteAddr,
		base:    context.WithValue(ctx, rpcIdentity{}, who),
		answers: make(chan []byte, rpcMaxInFlight),
		slots:   make(chan struct{}, rpcMaxInFlight),
		bye:     make(chan struct{}), cancels: map[uint64]context.CancelFunc{}}
	go s.heartbeat(ctx, cancel)
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		s.writeLoop(ctx, cancel)
	}()
	go s.readLoop(ctx, cancel)

	select {
	case <-ctx.Done(): // the client left, or did not read in time
	case <-a.closing:
		// Stop taking requests, let those in flight answer (long polls end
		// at once on closing), then say goodbye.
		s.stop()
		done := make(chan struct{})
		go func() { s.inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(rpcDrain):
		case <-ctx.Done():
		}
		close(s.bye) // the writer sends what is queued, then closes
		<-writer
	}
	s.stop()
	cancel()
	<-writer
	s.inflight.Wait()
	return nil
}

// rpcSocket is one open RPC socket.
type rpcSocket struct {
	a            *API
	c            *websocket.Conn
	host, remote string
	base         context.Context // the requests' context, carrying the identity
	answers      chan []byte     // encoded answers for the writer
	bye          chan struct{}   // closed when the writer is to close the socket
	slots        chan struct{}   // one per request in flight
	inflight     sync.WaitGroup  // added to under mu, and only until stopped
	mu           sync.Mutex
	cancels      map[uint64]context.CancelFunc // by request id, while served
	stopped      bool                          // no more requests start
}

// readLoop reads frames and starts their requests until the connection
// ends. Not ctx for the reads: cancelling a Read closes the connection, and
// the close frame has to go out first.
func (s *rpcSocket) readLoop(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	for {
		typ, b, err := s.c.Read(context.Background())
		if err != nil {
			return
		}
		reqs, err := parseRPCFrame(typ, b)
		if err != nil {
			s.answer(ctx, s.errorAnswer(0, err))
			continue
		}
		for i := range reqs {
			if reqs[i].Cancel {
				s.cancel(reqs[i].ID)
				continue
			}
			if reqs[i].ID == 0 {
				s.answer(ctx, s.errorAnswer(0, model.Invalid("id", "is required: a number of at least 1, repeated in the answer")))
				continue
			}
			select {
			case s.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			rctx, refusal := s.track(reqs[i].ID)
			if refusal != nil {
				<-s.slots
				s.answer(ctx, refusal)
				continue
			}
			go s.serve(ctx, rctx, &reqs[i])
		}
	}
}

// serve answers one request. The answer is queued before the slot is
// given back, so the writer's queue never holds more than the slots.
func (s *rpcSocket) serve(ctx, rctx context.Context, q *wire.RPCRequest) {
	defer s.inflight.Done()
	s.answer(ctx, s.do(rctx, q))
	s.untrack(q.ID)
	<-s.slots
}

func (s *rpcSocket) do(ctx context.Context, q *wire.RPCRequest) []byte {
	req, err := s.request(q)
	if err != nil {
		return s.errorAnswer(q.ID, err)
	}
	w := &rpcWriter{header: http.Header{}}
	s.a.ServeHTTP(w, req.WithContext(ctx))
	return w.answer(q.ID)
}

// track starts request id: it counts in flight and gets a context of its
// own, which a cancel frame for id ends. It is taken before the request
// starts, so that a cancel read right after it finds it. When the request
// cannot start, track returns the answer instead.
func (s *rpcSocket) track(id uint64) (context.Context, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, unavailableAnswer(id)
	}
	if s.cancels[id] != nil {
		return nil, s.errorAnswer(id, model.Invalid("id",
			fmt.Sprintf("request %d is still in flight: give each request in flight an id of its own", id)))
	}
	s.inflight.Add(1)
	ctx, cancel := context.WithCancel(s.base)
	s.cancels[id] = cancel
	return ctx, nil
}

// stop lets no more requests start, so that inflight can be waited for.
func (s *rpcSocket) stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

func (s *rpcSocket) untrack(id uint64) {
	s.mu.Lock()
	cancel := s.cancels[id]
	delete(s.cancels, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// cancel withdraws the request id in flight, if there is one.
func (s *rpcSocket) cancel(id uint64) {
	s.mu.Lock()
	cancel := s.cancels[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// answer queues an encoded answer for the writer.
func (s *rpcSocket) answer(ctx context.Context, b []byte) {
	select {
	case s.answers <- b:
	case <-ctx.Done():
	}
}

// request builds the HTTP request q stands for, refusing what the socket
// does not serve.
func (s *rpcSocket) request(q *wire.RPCRequest) (*http.Request, error) {
	switch q.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
	case "":
		return nil, model.Invalid("method", "is required: GET, POST, PUT or DELETE")
	default:
		return nil, model.Invalid("method", "must be GET, POST, PUT or DELETE, got "+strconv.Quote(q.Method))
	}
	if !strings.HasPrefix(q.Path, "/v1/") {
		return nil, model.Invalid("path", "must be an API path starting with /v1/, got "+strconv.Quote(q.Path))
	}
	u, err := url.ParseRequestURI(q.Path)
	if err != nil {
		return nil, model.Invalid("path", "is not a valid request path: "+err.Error())
	}
	req := &http.Request{Method: q.Method, URL: u, RequestURI: q.Path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Host: s.host, RemoteAddr: s.remote, Body: http.NoBody}
	if body := bytes.TrimSpace(q.Body); len(body) > 0 && !bytes.Equal(body, []byte("null")) {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
	}
	if _, pattern := s.a.mux.Handler(req); s.a.streamPatterns[pattern] {
		return nil, model.Invalid("path", q.Path+" is a stream: open it as a WebSocket of its own, not over /v1/rpc")
	}
	return req, nil
}

// unavailableAnswer answers request id of a socket whose server is
// shutting down: the request was not served.
func unavailableAnswer(id uint64) []byte {
	w := &rpcWriter{header: http.Header{}}
	writeJSON(w, http.StatusServiceUnavailable, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeUnavailable,
		Message: "server shutting down: the request was not served; send it again once reconnected"}})
	return w.answer(id)
}

// errorAnswer encodes err as the answer to request id.
func (s *rpcSocket) errorAnswer(id uint64, err error) []byte {
	w := &rpcWriter{header: http.Header{}}
	s.a.writeError(w, &http.Request{Method: "RPC", URL: &url.URL{Path: "/v1/rpc"}}, err)
	return w.answer(id)
}

// writeLoop writes queued answers, gathering those ready at the same time
// into one frame, until a write fails or the server shuts down: then it
// writes what is queued and closes the socket (1001). A client that does
// not take a frame within the write timeout is cut off (1008 "client too
// slow").
func (s *rpcSocket) writeLoop(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	var batch [][]byte
	var frame []byte
	for {
		var b []byte
		bye := false
		select {
		case b = <-s.answers:
		case <-s.bye:
			bye = true
		case <-ctx.Done():
			return
		}
		batch = batch[:0]
		size := 0
		if b != nil {
			batch, size = append(batch, b), len(b)
		}
	gather:
		for size < rpcAnswerBytes {
			select {
			case b = <-s.answers:
				batch, size = append(batch, b), size+len(b)
			default:
				break gather
			}
		}
		if len(batch) > 0 {
			frame = joinFrame(frame[:0], batch)
			if !s.write(ctx, frame) {
				return
			}
		}
		if bye && size < rpcAnswerBytes {
			_ = s.c.Close(websocket.StatusGoingAway, "server shutting down")
			return
		}
	}
}

// joinFrame is one answer as it is, or several as a JSON array.
func joinFrame(dst []byte, batch [][]byte) []byte {
	if len(batch) == 1 {
		return append(dst, batch[0]...)
	}
	dst = append(dst, '[')
	for i, b := range batch {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, b...)
	}
	return append(dst, ']')
}

func (s *rpcSocket) write(ctx context.Context, b []byte) bool {
	wctx, cancel := context.WithTimeout(ctx, s.a.writeTimeout)
	err := s.c.Write(wctx, websocket.MessageText, b)
	cancel()
	if err == nil {
		return true
	}
	if ctx.Err() == nil && wctx.Err() != nil {
		if s.a.metrics != nil {
			s.a.metrics.streamSlow(streamKindRPC)
		}
		// The write was cut at its deadline, which closed the connection
		// already; this only tries to tell a client that reads again.
		_ = s.c.Close(websocket.StatusPolicyViolation, errTooSlow.Error())
	}
	_ = s.c.CloseNow()
	return false
}

// heartbeat pings an idle or busy socket alike, so that proxies keep it
// open and a client that stopped answering is noticed.
func (s *rpcSocket) heartbeat(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(s.a.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(ctx, s.a.writeTimeout)
		err := s.c.Ping(pctx)
		pcancel()
		if err != nil {
			cancel()
			_ = s.c.CloseNow()
			return
		}
	}
}

// parseRPCFrame reads a client frame: one request object or an array of
// them.
func parseRPCFrame(typ websocket.MessageType, b []byte) ([]wire.RPCRequest, error) {
	if typ != websocket.MessageText {
		return nil, model.Invalid("", `send text frames of JSON: a request {"id":1,"method":"POST","path":"/v1/...","body":{...}} or an array of them`)
	}
	b = bytes.TrimSpace(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var reqs []wire.RPCRequest
	switch {
	case len(b) > 0 && b[0] == '[':
		if err := dec.Decode(&reqs); err != nil {
			return nil, jsonError(err)
		}
		if len(reqs) == 0 {
			return nil, model.Invalid("", "empty array: a frame holds at least one request")
		}
	case len(b) > 0 && b[0] == '{':
		reqs = make([]wire.RPCRequest, 1)
		if err := dec.Decode(&reqs[0]); err != nil {
			return nil, jsonError(err)
		}
	default:
		return nil, model.Invalid("", "a frame is a JSON request object or an array of them")
	}
	if dec.More() {
		return nil, model.Invalid("", "unexpected data after the JSON value")
	}
	return reqs, nil
}

// rpcWriter takes what a handler answers.
type rpcWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *rpcWriter) Header() http.Header { return w.header }

func (w *rpcWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *rpcWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// rpcHeaders are the response headers an answer carries.
var rpcHeaders = []string{"Location", "Allow"}

// answer encodes what the handler wrote as the answer to request id.
func (w *rpcWriter) answer(id uint64) []byte {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	body := bytes.TrimSpace(w.body.Bytes())
	b := make([]byte, 0, 64+len(body))
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	var hs map[string]string
	for _, k := range rpcHeaders {
		if v := w.header.Get(k); v != "" {
			if hs == nil {
				hs = map[string]string{}
			}
			hs[k] = v
		}
	}
	if hs != nil {
		h, _ := json.Marshal(hs) // strings only: cannot fail
		b = append(append(b, `,"headers":`...), h...)
	}
	if len(body) > 0 {
		b = append(b, `,"body":`...)
		if strings.HasPrefix(w.header.Get("Content-Type"), "application/json") {
			b = append(b, body...)
		} else {
			s, _ := json.Marshal(string(body))
			b = append(b, s...)
		}
	}
	return append(b, '}')
}
