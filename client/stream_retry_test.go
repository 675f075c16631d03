package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A stream whose server fails tells WithStreamRetry's function why and
// how long it waits, each time, then goes on from where it was.
func TestStreamRetryIsReported(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"starting"}}`))
			return
		}
		if r.URL.RawQuery != "after_seq=7" {
			t.Errorf("reconnected with %q, want after_seq=7", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("id: 8\ndata: {\"seq\":8,\"record\":{\"seq\":8}}\n\n"))
	}))
	defer srv.Close()
	type retry struct {
		err  error
		wait time.Duration
	}
	var retries []retry
	c := New(srv.URL, "tok", WithStreamRetry(func(err error, wait time.Duration) { retries = append(retries, retry{err, wait}) }))
	stop := errors.New("stop")
	err := c.StreamBox(context.Background(), "did:x:a", model.Inbox, 7, func(f wire.StreamFrame) error {
		if f.Seq != 8 {
			t.Errorf("frame %d, want 8", f.Seq)
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("StreamBox: %v", err)
	}
	if len(retries) != 2 || retries[0].wait != streamBackoffMin || retries[1].wait != 2*streamBackoffMin {
		t.Fatalf("retries %+v; want two, waiting %v then %v", retries, streamBackoffMin, 2*streamBackoffMin)
	}
	var ae *APIError
	if !errors.As(retries[0].err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("the first retry's error %v; want the 503", retries[0].err)
	}
}
