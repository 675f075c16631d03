package api

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSNoFrameAfterTooSlow: the reader's answer is the frame in flight
// when the client is found too slow, and the pump is waiting to write its
// own frame. The pump's frame must not go out: the close frame (1008)
// follows the frame in flight, and the pump hears why it cannot write.
func TestWSNoFrameAfterTooSlow(t *testing.T) {
	t.Parallel()
	const answerSize = 8 << 20 // more than the kernel buffers on both sides hold
	type result struct{ sendErr error }
	out := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := newWSSink(ctx, c, 300*time.Millisecond, make(chan struct{}))
		answered := make(chan struct{})
		go func() { // the reader's answer: more than the client's socket takes
			defer close(answered)
			_ = s.write(bytes.Repeat([]byte("a"), answerSize))
		}()
		for s.mu.TryLock() { // until the answer is being written
			s.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
		err = s.send(ctx, []frame{{id: 1, data: []byte("B")}}) // the pump, behind it
		<-answered
		s.code, s.reason = websocket.StatusPolicyViolation, errTooSlow.Error()
		s.breakWith(err)
		s.finish()
		out <- result{err}
	}))
	defer srv.Close()

	// A small receive buffer, and nothing read until the write timeout
	// has passed: the answer cannot go through in time.
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+srv.URL[len("http"):], &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(2 * answerSize)
	time.Sleep(600 * time.Millisecond)
	var sizes []int
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != errTooSlow.Error() {
				t.Errorf("after frames of %v bytes: %v, want close 1008 %q", sizes, err, errTooSlow)
			}
			break
		}
		sizes = append(sizes, len(b))
	}
	if len(sizes) != 1 || sizes[0] != answerSize {
		t.Errorf("frames of %v bytes reached the client, want only the answer in flight (%d)", sizes, answerSize)
	}
	if r := <-out; !errors.Is(r.sendErr, errTooSlow) {
		t.Errorf("the pump's send returned %v, want %v", r.sendErr, errTooSlow)
	}
}
