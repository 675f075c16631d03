package api

import (
	"context"
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

// wsSink writes frames on the goroutine that asks: the pump writes the
// records, the reader its answers to the client's frames, one frame at a
// time. A write blocks while the client does not take it, which gives
// back-pressure: a client that reads slowly but steadily slows the stream
// down. One that stops reading is noticed by the frame's timers: a frame
// that has not gone out within the write timeout marks the client too
// slow, the stream stops and the close frame (1008 "client too slow")
// follows as soon as the frame in flight is through. If that frame is not
// through within twice the timeout more (at least wsMinGrace), the
// connection is dropped.
//
// Writing on the pump rather than handing frames to a writer goroutine
// saves a goroutine per connection (its stack was a fifth of an idle
// stream's memory) and a wake-up per frame, which a group's GROUP_INBOX
// pays once per subscriber for each message.
type wsSink struct {
	c       *websocket.Conn
	timeout time.Duration
	closing <-chan struct{}
	// wctx is the connection's context without its Done, for writes: the
	// websocket sets up no timer of its own for a context that cannot end,
	// and the connection's end still cuts a write short by closing the
	// connection (serveWebSocket).
	wctx       context.Context
	broken     chan struct{} // closed when the stream cannot go on (brokenErr)
	brokenOnce sync.Once
	brokenErr  error
	// mu makes writes one at a time: they share the timers, and ending
	// stops answers.
	mu sync.Mutex
	// slow marks the client too slow, hard drops the connection: two
	// timers per connection armed for each frame. A context with a
	// deadline per frame cost three timers and a context per frame, and
	// on a group's GROUP_INBOX a frame goes to every subscriber at once:
	// they were a tenth of the server's CPU per push.
	slow, hard *time.Timer
	ended      bool // the close handshake has begun: no more frames
	code       websocket.StatusCode
	reason     string
	// onSlow counts a client found too slow, when it is found: the frame
	// in flight may take a while yet.
	onSlow func()
}

func newWSSink(ctx context.Context, c *websocket.Conn, timeout time.Duration, closing <-chan struct{}) *wsSink {
	s := &wsSink{c: c, timeout: timeout, closing: closing, wctx: context.WithoutCancel(ctx), broken: make(chan struct{})}
	s.slow = time.AfterFunc(time.Hour, func() { s.breakWith(errTooSlow) })
	s.slow.Stop()
	s.hard = time.AfterFunc(time.Hour, func() { _ = c.CloseNow() })
	s.hard.Stop()
	return s
}

// breakWith ends the stream with err, unless it already ended.
func (s *wsSink) breakWith(err error) {
	s.brokenOnce.Do(func() {
		s.brokenErr = err
		close(s.broken)
		if err == errTooSlow && s.onSlow != nil {
			s.onSlow()
		}
	})
}

func (s *wsSink) send(ctx context.Context, frames []frame) error {
	for _, f := range frames {
		select {
		case <-s.broken:
			return s.brokenErr
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return errClosing
		default:
		}
		if err := s.write(f.data); err != nil {
			select {
			case <-s.broken: // the hard timer's doing: say why
				return s.brokenErr
			default:
				return &clientError{err}
			}
		}
	}
	return nil
}

// errEnded is a write after the close handshake began.
var errEnded = errors.New("websocket stream ended")

// write writes one frame, marking the client too slow when it takes longer
// than the timeout. A failed write closes the connection.
func (s *wsSink) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errEnded
	}
	// Not after the stream broke: a write waiting here behind the frame
	// that found the client too slow would otherwise go out before the
	// close frame, and hold the close up for another timeout.
	select {
	case <-s.broken:
		return s.brokenErr
	default:
	}
	s.slow.Reset(s.timeout)
	s.hard.Reset(s.timeout + max(2*s.timeout, wsMinGrace))
	err := s.c.Write(s.wctx, websocket.MessageText, b)
	s.slow.Stop()
	s.hard.Stop()
	if err != nil {
		_ = s.c.CloseNow()
	}
	return err
}

// interrupted ends the pump's wait when a frame's timer found the client
// slow, or the reader found a reason to end the stream.
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
			s.breakWith(errTooSlow)
			return s.brokenErr
		}
		return &clientError{err}
	}
	return nil
}

// answer writes a control frame, the answer to a client's frame, on the
// reader's goroutine. While the client does not take it the reader stops
// reading, which TCP pushes back to a client that sends faster than it
// reads; the frame's timers end that as they end a slow stream.
func (s *wsSink) answer(f wire.StreamControlFrame) {
	b, err := marshalFrame(f)
	if err != nil {
		return
	}
	_ = s.write(b) // a failed write closed the connection: the reader's next read ends
}

// finish closes the connection with the stored status, once the frame in
// flight (an answer) is through. The close handshake runs without the
// lock: the reader has to go on reading to see the client's close frame.
func (s *wsSink) finish() {
	s.mu.Lock()
	s.ended = true
	s.slow.Stop()
	s.hard.Stop()
	s.mu.Unlock()
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
// answers pings and notices a close, so it runs for the whole connection.
// It writes its answers itself, one frame at a time with the pump's.
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
	// The connection's end (the reader's, or the pump's return) closes it,
	// which ends a write in flight.
	stop := context.AfterFunc(ctx, func() { _ = c.CloseNow() })
	defer stop()
	s := newWSSink(ctx, c, a.writeTimeout, a.closing)
	if a.metrics != nil {
		s.onSlow = func() { a.metrics.streamSlow(st.src.kind) }
	}
	go a.readLoop(ctx, cancel, r, st.src, s)

	err = a.pump(ctx, st, s)
	var refused *ackRefused
	switch {
	case errors.Is(err, errClosing):
		s.code, s.reason = websocket.StatusGoingAway, "server shutting down"
	case errors.Is(err, errTooSlow):
		s.code, s.reason = websocket.StatusPolicyViolation, errTooSlow.Error() // counted by onSlow
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
	// The stream ends for err: an answer still in flight that the slow
	// timer catches now must not count as a slow client, and no answer
	// starts after it.
	s.breakWith(err)
	s.finish()
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
		case errors.Is(err, model.ErrNotFound), errors.Is(err, model.ErrForbidden), errors.Is(err, model.ErrUnauthorized):
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
	// As strictly as a request body: {"seq":1,"seq":3} would otherwise
	// take the last and move the cursor past what the client meant.
	var f wire.StreamClientFrame
	if err := checkBody(b, &f); err != nil {
		return nil, err
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
