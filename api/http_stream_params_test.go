package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestStreamQueryParams: a stream takes its cursor, the lastEventId an
// EventSource polyfill adds on reconnect (between the header and the
// cursor parameter), and a cache buster; any other parameter is a 400
// naming it, as on every route, so that a mistyped cursor does not replay
// the log from its start.
func TestStreamQueryParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fill(t, "m", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := boxPath(didAlice, model.Inbox, "stream")

	s := mustSSE(t, ctx, e, stream+"?after_seq=2&lastEventId=5&_=1", e.alice, nil)
	checkRun(t, []wire.StreamFrame{s.nextFrame(t), s.nextFrame(t)}, 6, "m", 5)
	s.close()
	s = mustSSE(t, ctx, e, stream+"?after_seq=2&lastEventId=5", e.alice, map[string]string{"Last-Event-ID": "7"})
	checkRun(t, []wire.StreamFrame{s.nextFrame(t)}, 8, "m", 7)
	s.close()

	for path, field := range map[string]string{
		stream + "?lastEventId=x":                  "lastEventId",
		stream + "?lastEventId=9999":               "lastEventId", // past the box's end
		stream + "?after=8":                        "after",
		stream + "?lastEventId=1&lastEventId=2":    "lastEventId",
		"/v1/events/stream?after_seq=5":            "after_seq",
		"/v1/events/stream?after=0&lastEventId=-1": "lastEventId",
	} {
		wantSSERefused(t, ctx, e, path, e.admin, nil, field)
	}
}
