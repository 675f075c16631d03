package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/wire"
)

// wsMinGrace is the least time a client found too slow gets to take the
// frame in flight, so that it can still read why it is cut off.
const wsMinGrace = 5 * time.Second

// wsQueueFrames bounds the frames waiting for the WebSocket writer. With the
// page being read, that is all the memory a connection can hold.
const wsQueueFrames = 32

// wsSink hands frames to a writer goroutine through a small queue, which
// gives back-pressure: a client that reads slowly but steadily slows the
// stream down. One that stops reading is noticed by the writer: a frame that
// has not gone out within the write timeout marks the client too slow, the
// stream stops, queued frames are dropped and the close frame (1008 "client
// too slow") follows as soon as the frame in flight is through. If that frame
// is not through within twice the timeout more (at least wsMinGrace), the
// connection is dropped.
type wsSink struct {
	c        *websocket.Conn
	timeout  time.Duration
	closing  <-chan struct{}
	queue    chan []byte
	slow     chan struct{} // closed when a write took longer than timeout
	slowOnce sync.Once
	stop     chan struct{} // closed to make the writer close the connection
	done     chan struct{} // closed when the writer has returned
	code     websocket.StatusCode
	reason   string
}

func (s *wsSink) send(ctx context.Context, frames []frame) error {
	for _, f := range frames {
		select {
		case s.queue <- f.data:
		case <-s.slow:
			return errTooSlow
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

// interrupted ends the pump's wait when the writer found the client slow.
func (s *wsSink) interrupted() (<-chan struct{}, error) { return s.slow, errTooSlow }

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
func (s *wsSink) writeLoop(ctx context.Context) {
	defer close(s.done)
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
			wctx, cancel := context.WithTimeout(ctx, s.timeout+max(2*s.timeout, wsMinGrace))
			slow := time.AfterFunc(s.timeout, func() { s.slowOnce.Do(func() { close(s.slow) }) })
			err := s.c.Write(wctx, websocket.MessageText, b)
			slow.Stop()
			cancel()
			if err != nil {
				_ = s.c.CloseNow()
				return
			}
		}
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
// the SSE data. Messages from the client are read and discarded (reading is
// what answers pings and notices a close); a later version will take
// {"type":"ack","seq":N} there to advance a durable consumer's cursor.
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
	go func() {
		// Not ctx: cancelling a Read closes the connection, and the close
		// frame has to go out first.
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				cancel()
				return
			}
		}
	}()
	s := &wsSink{c: c, timeout: a.writeTimeout, closing: a.closing, queue: make(chan []byte, wsQueueFrames),
		slow: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go s.writeLoop(ctx)

	err = a.pump(ctx, st, s)
	switch {
	case errors.Is(err, errClosing):
		s.code, s.reason = websocket.StatusGoingAway, "server shutting down"
	case errors.Is(err, errTooSlow):
		s.code, s.reason = websocket.StatusPolicyViolation, errTooSlow.Error()
		if a.metrics != nil {
			a.metrics.streamSlow(st.src.kind)
		}
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
