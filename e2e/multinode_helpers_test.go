package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// testPostgresEnv names the PostgreSQL server the multi-node tests use.
const testPostgresEnv = "MSGCENTER_TEST_POSTGRES_URL"

// pgBaseURL returns the test PostgreSQL URL, or skips the test (with a
// line that shows up in `go test -v` output) when none is configured.
func pgBaseURL(t *testing.T) string {
	t.Helper()
	u := strings.TrimSpace(os.Getenv(testPostgresEnv))
	if u == "" {
		t.Skip(testPostgresEnv + " not set: skipping multi-node PostgreSQL tests")
	}
	return u
}

// withSearchPath returns the connection string base with search_path set to
// schema: a query parameter of a postgres:// URL (pgx passes unknown
// parameters to the server as runtime parameters) or a key=value pair of a
// DSN.
func withSearchPath(t *testing.T, base, schema string) string {
	t.Helper()
	return withParam(t, base, "search_path", schema)
}

// withParam sets one connection parameter in a postgres:// URL or a
// key=value DSN.
func withParam(t *testing.T, base, key, value string) string {
	t.Helper()
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatalf("%s is not a valid URL: %v", testPostgresEnv, err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return base + " " + key + "=" + value
}

// pgCluster is a set of `msgcenter serve` nodes sharing one PostgreSQL
// schema of their own.
type pgCluster struct {
	Schema string
	URL    string // the URL every node got: base URL + search_path
	Nodes  []*server
}

// newPGSchema creates a schema mc_e2e_<random> for one test and drops it
// (CASCADE) when the test ends. Call it before starting the nodes: cleanups
// run last-in first-out, so the nodes are stopped before the drop.
func newPGSchema(t *testing.T) (schema, nodeURL string) {
	t.Helper()
	base := pgBaseURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "mc_e2e_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s (%s): %v", testPostgresEnv, redactURL(base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("cleanup: connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("cleanup: drop schema %s: %v", schema, err)
		}
	})
	return schema, withSearchPath(t, base, schema)
}

// redactURL hides a password in a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// startPGCluster starts n nodes (`msgcenter serve --store postgres`), each
// with its own data directory and port, on a fresh schema, and checks that
// every node's admin token works on every node (tokens live hashed in the
// shared database). Every node is killed when the test ends, before the
// schema is dropped.
func startPGCluster(t *testing.T, n int) *pgCluster {
	t.Helper()
	return startPGClusterParams(t, n, nil)
}

// startPGClusterParams is startPGCluster with extra connection parameters
// (runtime parameters such as synchronous_commit) in every node's URL.
func startPGClusterParams(t *testing.T, n int, params map[string]string) *pgCluster {
	t.Helper()
	schema, nodeURL := newPGSchema(t)
	for k, v := range params {
		nodeURL = withParam(t, nodeURL, k, v)
	}
	c := &pgCluster{Schema: schema, URL: nodeURL}
	for range n {
		args := []string{"--store", "postgres", "--postgres-url", nodeURL}
		c.Nodes = append(c.Nodes, startServer(t, t.TempDir(), args...))
	}
	ctx := testCtx(t, 30*time.Second)
	for _, tokenOf := range c.Nodes {
		for _, on := range c.Nodes {
			if _, err := client.New(on.URL, tokenOf.Token).Events(ctx, wire.EventQuery{Limit: 1}); err != nil {
				t.Fatalf("the admin token of node %s is not accepted by node %s: %v", tokenOf.Addr, on.Addr, err)
			}
		}
	}
	return c
}

// Client returns an SDK client for node i, authenticated with the admin
// token of another node (all are valid everywhere), over a transport that
// keeps enough idle connections for many concurrent workers.
func (c *pgCluster) Client(i int) *client.Client {
	return poolClient(c.Nodes[i], c.Nodes[(i+1)%len(c.Nodes)].Token)
}

// poolClient is an SDK client for s with token whose transport keeps up to
// 64 idle connections (the default 2 would make concurrent workers dial a
// new connection for most requests).
func poolClient(s *server, token string) *client.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	return client.New(s.URL, token, client.WithHTTPClient(&http.Client{Transport: tr}))
}

// listAll pages through a box by time (ascending) with the given states.
func listAll(ctx context.Context, t *testing.T, c *client.Client, owner string, box model.BoxKind, states ...model.State) []wire.RecordWithMsg {
	t.Helper()
	var all []wire.RecordWithMsg
	q := wire.ListQuery{Owner: owner, Box: box, States: states, Limit: wire.MaxLimit}
	for {
		res, err := c.List(ctx, q)
		if err != nil {
			t.Fatalf("list %s %s %v: %v", owner, box, states, err)
		}
		all = append(all, res.Items...)
		if res.NextCursorRecordID == "" || len(res.Items) == 0 {
			return all
		}
		q.CursorSortKey, q.CursorRecordID = res.NextCursorSortKey, res.NextCursorRecordID
	}
}

// eventsOf returns the whole event log of owner.
func eventsOf(ctx context.Context, t *testing.T, c *client.Client, owner string) []model.Event {
	t.Helper()
	var all []model.Event
	after := int64(0)
	for {
		res, err := c.Events(ctx, wire.EventQuery{After: after, Owner: owner, Limit: wire.MaxLimit})
		if err != nil {
			t.Fatalf("events of %s after %d: %v", owner, after, err)
		}
		all = append(all, res.Items...)
		if len(res.Items) == 0 || res.NextAfter <= after {
			return all
		}
		after = res.NextAfter
	}
}

// countEvents counts events of type typ per record id.
func countEvents(evs []model.Event, typ string) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		if e.Type == typ {
			m[e.RecordID]++
		}
	}
	return m
}

// msgText is the body of message i of a test run.
func msgText(run string, i int) string { return fmt.Sprintf("%s message %d", run, i) }
