package api

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"time"
)

// sseSink writes Server-Sent Events. Writes go straight to the connection
// (one page, then a flush) under a write deadline, so a client that stops
// reading costs at most one page of memory and is cut off when the
// deadline passes.
type sseSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
}

func (s *sseSink) write(b []byte) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(b); err != nil {
		return &clientError{err}
	}
	return nil
}

func (s *sseSink) send(_ context.Context, frames []frame) error {
	for _, f := range frames {
		s.buf = append(s.buf[:0], "id: "...)
		s.buf = strconv.AppendInt(s.buf, f.id, 10)
		s.buf = append(s.buf, "\ndata: "...)
		s.buf = append(s.buf, f.data...)
		s.buf = append(s.buf, "\n\n"...)
		if err := s.write(s.buf); err != nil {
			return err
		}
	}
	return s.flush()
}

// interrupted: an SSE write fails by itself at its deadline.
func (s *sseSink) interrupted() <-chan struct{} { return nil }

func (s *sseSink) cause() error { return nil }

func (s *sseSink) heartbeat(context.Context) error {
	if err := s.write([]byte(": ping\n\n")); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseSink) flush() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		return &clientError{err}
	}
	return nil
}

// serveSSE streams as text/event-stream. A failed read after the headers
// went out is sent as an `event: error` with the JSON error body; on
// shutdown the response just ends (EventSource reconnects with
// Last-Event-ID).
func (a *API) serveSSE(w http.ResponseWriter, r *http.Request, st *streamState) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &sseSink{w: w, rc: http.NewResponseController(w), timeout: a.writeTimeout}
	// retry: how long EventSource waits before reconnecting.
	if err := s.write([]byte("retry: 1000\n\n")); err != nil {
		return
	}
	if err := s.flush(); err != nil {
		return
	}
	err := a.pump(r.Context(), st, s)
	switch {
	case errors.Is(err, errClosing), errors.Is(err, context.Canceled):
	case isClientError(err):
		if errors.Is(err, os.ErrDeadlineExceeded) && a.metrics != nil {
			a.metrics.streamSlow(st.src.kind)
		}
	default:
		b, merr := marshalFrame(a.errorBody(r, err))
		if merr == nil {
			_ = s.write(append(append([]byte("event: error\ndata: "), b...), "\n\n"...))
			_ = s.flush()
		}
	}
}

// clientError is a failed write to the client: it went away, or did not read
// in time. Anything else that ends a stream is the server's.
type clientError struct{ err error }

func (e *clientError) Error() string { return "write to stream client: " + e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

func isClientError(err error) bool {
	var ce *clientError
	return errors.As(err, &ce)
}
