package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/wire"
)

// RPC carries a Client's calls over one WebSocket (GET /v1/rpc) instead of
// one HTTP request each. Calls made at the same time, from any number of
// goroutines, share the socket and travel together: many requests in one
// frame, many answers in one frame. Answers, errors included, are what the
// HTTP API would have answered.
//
//	rpc, err := client.DialRPC(ctx, "http://127.0.0.1:7420", token)
//	if err != nil { … }
//	defer rpc.Close()
//	c := client.New("http://127.0.0.1:7420", token, client.WithRPC(rpc))
//
// If the socket drops, the calls in flight fail (as on a dropped HTTP
// connection, a send among them may or may not have been stored: resend
// with an idempotency key) and the next call dials again. Streams
// (StreamBox, StreamEvents) keep their own connections.
type RPC struct {
	wsURL    string
	host     string // the host calls must be addressed to
	prefix   string // the base URL's path, taken off each call's path
	token    string
	mu       sync.Mutex
	sess     *rpcSession
	closed   bool
	dialOpts *websocket.DialOptions
}

// rpcFrameBytes closes a frame of requests once it holds this much; a
// larger request goes alone. The server takes frames of 1 MiB at least.
const rpcFrameBytes = 256 << 10

// rpcWriteTimeout bounds one frame's write: a server that takes nothing for
// that long is taken for gone.
const rpcWriteTimeout = 30 * time.Second

// ErrRPCClosed is returned by calls over an RPC that was closed.
var ErrRPCClosed = errors.New("msgcenter: rpc socket closed")

// RPCOption configures DialRPC.
type RPCOption func(*websocket.DialOptions)

// RPCHTTPClient sets the *http.Client that dials the socket (TLS, proxies,
// the dialer); its Timeout must be zero, the socket stays open.
func RPCHTTPClient(h *http.Client) RPCOption {
	return func(o *websocket.DialOptions) { o.HTTPClient = h }
}

// DialRPC opens the RPC socket of the server at baseURL, authenticating
// with token. An answer other than the upgrade (401 for a bad token) is
// returned as an *APIError.
func DialRPC(ctx context.Context, baseURL, token string, opts ...RPCOption) (*RPC, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("msgcenter: rpc: base URL: %w", err)
	}
	r := &RPC{host: u.Host, prefix: u.EscapedPath(), token: token}
	ws := *u
	switch u.Scheme {
	case "http":
		ws.Scheme = "ws"
	case "https":
		ws.Scheme = "wss"
	default:
		return nil, fmt.Errorf("msgcenter: rpc: base URL %q: want an http or https URL", baseURL)
	}
	ws.Path, ws.RawPath = "", ""
	r.wsURL = ws.String() + r.prefix + "/v1/rpc"
	h := http.Header{}
	h.Set("User-Agent", DefaultUserAgent)
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	r.dialOpts = &websocket.DialOptions{HTTPHeader: h}
	for _, o := range opts {
		o(r.dialOpts)
	}
	if _, err := r.session(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// WithRPC makes the client's calls go over r. Streams still open their own
// connections through the client's *http.Client.
func WithRPC(r *RPC) Option {
	return func(c *Client) { c.calls = &http.Client{Transport: r} }
}

// Close closes the socket; calls in flight fail with ErrRPCClosed.
func (r *RPC) Close() error {
	r.mu.Lock()
	r.closed = true
	s := r.sess
	r.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = ErrRPCClosed
			close(s.done)
		}
		s.mu.Unlock()
		_ = s.c.Close(websocket.StatusNormalClosure, "")
	}
	return nil
}

// session returns the live socket, dialing a new one if there is none.
func (r *RPC) session(ctx context.Context) (*rpcSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrRPCClosed
	}
	if r.sess != nil && !r.sess.ended() {
		return r.sess, nil
	}
	c, resp, err := websocket.Dial(ctx, r.wsURL, r.dialOpts)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
			}
			return nil, decodeAPIError(resp.StatusCode, body)
		}
		return nil, fmt.Errorf("msgcenter: rpc: dial %s: %w", r.wsURL, err)
	}
	c.SetReadLimit(maxResponseBytes)
	s := &rpcSession{c: c, out: make(chan *rpcCall, 64), pending: map[uint64]*rpcCall{}, done: make(chan struct{})}
	go s.readLoop()
	go s.writeLoop()
	r.sess = s
	return s, nil
}

// RoundTrip implements http.RoundTripper for the client's own calls: JSON
// in, JSON out, to the server DialRPC was given.
func (r *RPC) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("msgcenter: rpc: read request body: %w", err)
		}
		if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
			return nil, errors.New("msgcenter: rpc: request body is not JSON")
		}
	}
	if req.URL.Host != r.host {
		return nil, fmt.Errorf("msgcenter: rpc: request to %s, but the socket is to %s", req.URL.Host, r.host)
	}
	path := strings.TrimPrefix(req.URL.EscapedPath(), r.prefix)
	if req.URL.RawQuery != "" {
		path += "?" + req.URL.RawQuery
	}
	s, err := r.session(req.Context())
	if err != nil {
		return nil, err
	}
	a, err := s.call(req.Context(), req.Method, path, body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for k, v := range a.Headers {
		h.Set(k, v)
	}
	if len(a.Body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	return &http.Response{Status: strconv.Itoa(a.Status) + " " + http.StatusText(a.Status), StatusCode: a.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(a.Body)), ContentLength: int64(len(a.Body))}, nil
}

// rpcSession is one socket and the calls waiting on it.
type rpcSession struct {
	c       *websocket.Conn
	out     chan *rpcCall
	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]*rpcCall
	err     error // why the socket ended; set once, before done closes
	done    chan struct{}
}

type rpcCall struct {
	frame  []byte // the encoded request (or cancel)
	answer chan wire.RPCResponse
}

func (s *rpcSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// fail ends the session with err (the first error wins); waiting calls get it.
func (s *rpcSession) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	close(s.done)
	_ = s.c.CloseNow()
}

// call sends one request and waits for its answer. A call whose context
// ends withdraws its request (a cancel frame), as closing an HTTP
// connection would.
func (s *rpcSession) call(ctx context.Context, method, path string, body []byte) (wire.RPCResponse, error) {
	id := s.nextID.Add(1)
	c := &rpcCall{frame: encodeRPCRequest(id, method, path, body), answer: make(chan wire.RPCResponse, 1)}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return wire.RPCResponse{}, s.err
	}
	s.pending[id] = c
	s.mu.Unlock()
	select {
	case s.out <- c:
	case <-s.done:
		return wire.RPCResponse{}, s.err
	case <-ctx.Done():
		s.forget(id)
		return wire.RPCResponse{}, ctx.Err()
	}
	select {
	case a := <-c.answer:
		return a, nil
	case <-s.done:
		return wire.RPCResponse{}, s.err
	case <-ctx.Done():
		s.forget(id)
		select {
		case s.out <- &rpcCall{frame: []byte(`{"id":` + strconv.FormatUint(id, 10) + `,"cancel":true}`)}:
		case <-s.done:
		default: // the writer is backed up; the answer is dropped on arrival anyway
		}
		return wire.RPCResponse{}, ctx.Err()
	}
}

func (s *rpcSession) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

func encodeRPCRequest(id uint64, method, path string, body []byte) []byte {
	p, _ := json.Marshal(path) // a string: cannot fail
	b := make([]byte, 0, 48+len(p)+len(body))
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"method":"`...)
	b = append(b, method...) // an HTTP method: a token, nothing to escape
	b = append(b, `","path":`...)
	b = append(b, p...)
	if len(bytes.TrimSpace(body)) > 0 {
		b = append(b, `,"body":`...)
		b = append(b, body...)
	}
	return append(b, '}')
}

// writeLoop sends queued requests, those queued at the same time in one
// frame.
func (s *rpcSession) writeLoop() {
	var batch [][]byte
	var frame []byte
	for {
		var c *rpcCall
		select {
		case c = <-s.out:
		case <-s.done:
			return
		}
		batch = append(batch[:0], c.frame)
		size := len(c.frame)
	gather:
		for size < rpcFrameBytes {
			select {
			case c = <-s.out:
				batch, size = append(batch, c.frame), size+len(c.frame)
			default:
				break gather
			}
		}
		frame = frame[:0]
		if len(batch) == 1 {
			frame = append(frame, batch[0]...)
		} else {
			frame = append(frame, '[')
			for i, b := range batch {
				if i > 0 {
					frame = append(frame, ',')
				}
				frame = append(frame, b...)
			}
			frame = append(frame, ']')
		}
		ctx, cancel := context.WithTimeout(context.Background(), rpcWriteTimeout)
		err := s.c.Write(ctx, websocket.MessageText, frame)
		cancel()
		if err != nil {
			s.fail(fmt.Errorf("msgcenter: rpc: write: %w", err))
			return
		}
	}
}

// readLoop hands each answer to the call waiting for it.
func (s *rpcSession) readLoop() {
	for {
		_, b, err := s.c.Read(context.Background())
		if err != nil {
			s.fail(fmt.Errorf("msgcenter: rpc: socket closed: %w", err))
			return
		}
		answers, err := parseRPCAnswers(b)
		if err != nil {
			s.fail(err)
			return
		}
		for _, a := range answers {
			if a.ID == 0 {
				// The server could not read a frame this client wrote.
				s.fail(fmt.Errorf("msgcenter: rpc: the server refused a frame: %w", decodeAPIError(a.Status, a.Body)))
				return
			}
			s.mu.Lock()
			c := s.pending[a.ID]
			delete(s.pending, a.ID)
			s.mu.Unlock()
			if c != nil {
				c.answer <- a
			}
		}
	}
}

func parseRPCAnswers(b []byte) ([]wire.RPCResponse, error) {
	b = bytes.TrimSpace(b)
	var out []wire.RPCResponse
	var err error
	if len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &out)
	} else {
		out = make([]wire.RPCResponse, 1)
		err = json.Unmarshal(b, &out[0])
	}
	if err != nil {
		return nil, fmt.Errorf("msgcenter: rpc: malformed answer frame: %w", err)
	}
	return out, nil
}
