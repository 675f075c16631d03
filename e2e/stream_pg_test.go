package e2e

import (
	"testing"

	"github.com/msgcenter/msgcenter/client"
)

// TestStreamChaos5000Postgres is TestStreamChaos5000 on PostgreSQL: one
// node, 5,000 messages from 8 producers, each client (raw WebSocket, and
// the SDK over SSE) cut off 100 times at random points; every message must
// arrive exactly once, in seq order.
func TestStreamChaos5000Postgres(t *testing.T) {
	t.Parallel()
	c := startPGCluster(t, 1)
	srv := c.Nodes[0]
	runStreamScenario(t, streamScenario{base: srv.URL, token: srv.Token,
		producers: []*client.Client{c.Client(0)}, total: 5000, cuts: 100})
}
