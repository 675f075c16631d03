package api_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestAgentStreamsAreBounded: an agent holds at most api.MaxAgentStreams
// streams open on a node; one more is a 429 naming the bound, and closing
// one makes room. An admin is not bounded.
func TestAgentStreamsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	box := boxPath(didAlice, model.Inbox, "stream")
	var open []*sseStream
	defer func() {
		for _, s := range open {
			s.close()
		}
	}()
	for range api.MaxAgentStreams {
		open = append(open, mustSSE(t, ctx, e, box, e.alice, nil))
	}
	over := func(token string) resp {
		_, r, err := openSSE(ctx, e, box, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		r.Body.Close()
		return resp2(r, b)
	}
	wantErr(t, over(e.alice), http.StatusTooManyRequests, wire.CodeTooMany, "")
	open[0].close()
	open = open[1:]
	deadline := time.Now().Add(10 * time.Second)
	for { // the server sees the close a moment later
		s, r, err := openSSE(ctx, e, box, e.alice, nil)
		if err == nil && r.StatusCode == http.StatusOK {
			open = append(open, s)
			break
		}
		if r != nil {
			r.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a stream closed: %v %v", r.StatusCode, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range api.MaxAgentStreams + 1 {
		open = append(open, mustSSE(t, ctx, e, box, e.admin, nil))
	}
}
