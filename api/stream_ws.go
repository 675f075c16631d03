package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// wsMinGrace is the least time a client found too slow gets to take the
// frame in flight, so that it can still read why it is cut off.
const wsMinGrace = 5 * time.Second

// wsQueueFrames bounds the frames waiting for the WebSocket writer. With the
// page being read, that is all the memory a connection can hold.
const wsQueueFrames = 32

// wsCtrlFrames bounds the control frames (answers to client frames)
// waiting for the writer. A client that sends faster than it reads the
// answers stops being read, which TCP pushes back to it.
const wsCtrlFrames = 8

// wsSink hands frames to a writer goroutine through a small queue, which
// gives back-pressure: a client that reads slowly but steadily slows the
// stream down. One that stops reading is noticed by the writer: a frame that
// has not gone out within the write timeout marks the client too slow, the
// stream stops, queued frames are dropped and the close frame (1008 "client
// too slow") follows as soon as the frame in flight is through. If that frame
// is not through within twice the timeout more (at least wsMinGrace), the
// connection is dropped.
//
// The writer is the only goroutine that writes data frames: the reader
// hands it its answers (ctrl) and never waits on the connection itself.
type wsSink struct {
	c          *websocket.Conn
	timeout    time.Duration
	closing    <-chan struct{}
	queue      chan []byte
	ctrl       chan []byte
	broken     chan struct{} // closed when the stream cannot go on (brokenErr)
	brokenOnce sync.Once
	brokenErr  error
	stop       chan struct{} // closed to make the writer close the connection
	done       chan struct{} // closed when the writer has returned
	code       websocket.StatusCode
	reason     string
	// The writer's timers (writeLoop): slow marks the client too slow,
	// hard drops the connection.
	slow, hard *time.Timer
}

// breakWith ends the stream with err, unless it already ended.
func (s *wsSink) breakWith(err error) {
	s.brokenOnce.Do(func() {
		s.brokenErr = err
		close(s.broken)
	})
}

func (s *wsSink) send(ctx context.Context, frames []frame) error {
	for _, f := range frames {
		select {
		case s.queue <- f.data:
		case <-s.broken:
			return s.brokenErr
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return errClosing
		case <-s.done:
			return &clientError{errors.New("websocket writer ended")}
		}
	}
	return nil
}

// interrupted ends the pump's wait when the writer found the client slow,
// or the reader found a reason to end the stream.
func (s *wsSink) interrupted() <-chan struct{} { return s.broken }

// cause is why: only valid once interrupted() is closed.
func (s *wsSink) cause() error { return s.brokenErr }

// heartbeat pings; a client that does not answer within the write timeout
// is not reading, which counts as too slow.
func (s *wsSink) heartbeat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.c.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return errTooSlow
		}
		return &clientError{err}
	}
	return nil
}

// writeLoop writes queued frames until told to stop, then closes the
// connection with the stored status.
//
// The frames' deadlines are two timers per connection, armed for each
// frame, and ctx ending closes the connection (so a write in flight ends)
// through one AfterFunc for the whole stream. A context with a deadline per
// frame cost three timers and a context per frame, and on a group's
// GROUP_INBOX a frame goes to every subscriber at once: they were a tenth
// of the server's CPU per push.
func (s *wsSink) writeLoop(ctx context.Context) {
	defer close(s.done)
	stop := context.AfterFunc(ctx, func() { _ = s.c.CloseNow() })
	defer stop()
	s.slow = time.AfterFunc(time.Hour, func() { s.breakWith(errTooSlow) })
	s.slow.Stop()
	s.hard = time.AfterFunc(time.Hour, func() { _ = s.c.CloseNow() })
	s.hard.Stop()
	defer s.slow.Stop()
	defer s.hard.Stop()
	ctx = context.WithoutCancel(ctx) // no Done: the websocket sets up no timer of its own
	for {
		select {
		case <-s.stop:
			s.finish()
			return
		default:
		}
		select {
		case <-s.stop:
			s.finish()
			return
		case b := <-s.queue:
			if !s.write(ctx, b) {
				return
			}
		case b := <-s.ctrl:
			if !s.write(ctx, b) {
				return
			}
		}
	}
}

// write writes one frame, marking the client too slow when it takes longer
// than the timeout; false when the connection is gone.
func (s *wsSink) write(ctx context.Context, b []byte) bool {
	s.slow.Reset(s.timeout)
	s.hard.Reset(s.timeout + max(2*s.timeout, wsMinGrace))
	err := s.c.Write(ctx, websocket.MessageText, b)
	s.slow.Stop()
	s.hard.Stop()
	if err != nil {
		_ = s.c.CloseNow()
		return false
	}
	return true
}

// answer hands a control frame to the writer. It waits while the writer's
// control queue is full, which stops reading a client that sends faster
// than it reads, and gives up when the stream ends.
func (s *wsSink) answer(f wire.StreamControlFrame) {
	b, err := marshalFrame(f)
	if err != nil {
		return
	}
	select {
	case s.ctrl <- b:
	case <-s.broken:
	case <-s.stop:
	case <-s.done:
	}
}

func (s *wsSink) finish() {
	if s.code == 0 {
		_ = s.c.CloseNow()
		return
	}
	_ = s.c.Close(s.code, s.reason)
}

// serveWebSocket streams over a WebSocket: text frames with the same JSON as
// the SSE data (record frames, without a "type" member).
//
// A reader goroutine reads what the client sends; reading is also what
// answers pings and notices a close, so it runs for the whole connection
// and never writes itself (answers go through the writer's control queue).
// On a durable consumer's box stream the client may send
// {"type":"ack","seq":N}: the consumer's cursor advances (as POST
// /v1/consumers/{owner}/{name}/ack) and the server answers
// {"type":"acked","seq":<cursor now>}. Anything else the client sends — a
// binary or malformed frame, an unknown type, an ack on a stream that is not
// a consumer's, an ack the core refuses as invalid (a seq beyond the box) or
// cannot take right now — is answered with {"type":"error","error":{code,
// message, field}} and the stream goes on: the mistake is the client's to
// see, not a reason to lose its place. Only an ack refused because the
// consumer is gone (not_found) or not the caller's (forbidden) ends the
// stream, with close 1008 and the reason "ack refused: <code>: <message>":
// no later ack on this connection could succeed.
func (a *API) serveWebSocket(w http.ResponseWriter, r *http.Request, st *streamState) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		// Streams authenticate with a token, never a cookie, so another
		// site's page cannot ride on a user's credentials: the origin check
		// would only lock out legitimate browser clients on other origins.
		InsecureSkipVerify: true,
	})
	if err != nil {
		return // Accept has answered the request
	}
	c.SetReadLimit(4 << 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &wsSink{c: c, timeout: a.writeTimeout, closing: a.closing, queue: make(chan []byte, wsQueueFrames),
		ctrl: make(chan []byte, wsCtrlFrames), broken: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go a.readLoop(ctx, cancel, r, st.src, s)
	go s.writeLoop(ctx)

	err = a.pump(ctx, st, s)
	var refused *ackRefused
	switch {
	case errors.Is(err, errClosing):
		s.code, s.reason = websocket.StatusGoingAway, "server shutting down"
	case errors.Is(err, errTooSlow):
		s.code, s.reason = websocket.StatusPolicyViolation, errTooSlow.Error()
		if a.metrics != nil {
			a.metrics.streamSlow(st.src.kind)
		}
	case errors.As(err, &refused):
		d := a.errorBody(r, refused.err).Error
		s.code, s.reason = websocket.StatusPolicyViolation, "ack refused: "+d.Code+": "+d.Message
	case isClientError(err), errors.Is(err, context.Canceled):
		// The client is gone: nothing to say.
	default:
		body := a.errorBody(r, err) // logs an internal error
		s.code, s.reason = websocket.StatusPolicyViolation, body.Error.Message
		if body.Error.Code == wire.CodeInternal {
			s.code = websocket.StatusInternalError
		}
	}
	if len(s.reason) > 120 {
		s.reason = s.reason[:120] // a close reason must fit in a control frame
	}
	close(s.stop)
	<-s.done
}

// ackRefused ends a consumer stream whose ack can never succeed.
type ackRefused struct{ err error }

func (e *ackRefused) Error() string { return "ack refused: " + e.err.Error() }
func (e *ackRefused) Unwrap() error { return e.err }

// readLoop reads the client's frames until the connection ends, then
// cancels the stream. Not ctx for the reads: cancelling a Read closes the
// connection, and the close frame has to go out first.
func (a *API) readLoop(ctx context.Context, cancel context.CancelFunc, r *http.Request, src *source, s *wsSink) {
	defer cancel()
	for {
		typ, b, err := s.c.Read(context.Background())
		if err != nil {
			return
		}
		select {
		case <-s.broken:
			continue // ending: only the close handshake is left to read
		default:
		}
		f, err := a.clientFrame(ctx, src, typ, b)
		switch {
		case err == nil:
			s.answer(*f)
		case errors.Is(err, model.ErrNotFound), errors.Is(err, model.ErrForbidden):
			s.breakWith(&ackRefused{err})
		case ctx.Err() != nil:
			// The stream is ending; the ack may or may not have been taken.
		default:
			d := a.errorBody(r, err).Error // logs an internal error
			s.answer(wire.StreamControlFrame{Type: wire.StreamError, Error: &d})
		}
	}
}

// clientFrame takes one frame from the client and returns the answer.
func (a *API) clientFrame(ctx context.Context, src *source, typ websocket.MessageType, b []byte) (*wire.StreamControlFrame, error) {
	if typ != websocket.MessageText {
		return nil, model.Invalid("", `send text frames of JSON, e.g. {"type":"ack","seq":N}`)
	}
	var f wire.StreamClientFrame
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, model.Invalid("", "unexpected data after the JSON object")
	}
	switch {
	case f.Type == "":
		return nil, model.Invalid("type", `is required; the only client frame is {"type":"ack","seq":N}`)
	case f.Type != wire.StreamAck:
		return nil, model.Invalid("type", fmt.Sprintf(`unknown frame type %q; the only client frame is {"type":"ack","seq":N}`, f.Type))
	case src.ack == nil:
		return nil, model.Invalid("type", "acks are taken only on a durable consumer's box stream (box consumer:NAME); this stream has no cursor to advance")
	case f.Seq == nil:
		return nil, model.Invalid("seq", "is required: the last seq to acknowledge")
	}
	cursor, err := src.ack(ctx, *f.Seq)
	if err != nil {
		return nil, err
	}
	return &wire.StreamControlFrame{Type: wire.StreamAcked, Seq: cursor}, nil
}
