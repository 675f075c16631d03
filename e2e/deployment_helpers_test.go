package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// deployment is a running msgcenter on either store driver: one SQLite
// server, or PostgreSQL nodes sharing one schema. Scenarios that must hold
// on both drivers take one. A node keeps its data directory and address
// across a restart, so clients made before it keep working after.
type deployment struct {
	t      *testing.T
	driver string // "sqlite" or "postgres"
	nodes  []*server
	dirs   []string
	args   [][]string // each node's serve arguments besides --data and --listen
	urls   []string   // each node's base URL; never changes, so any goroutine may read it
	pgURL  string     // the nodes' PostgreSQL URL (with search_path), for postgres
	// Token is an admin token every node accepts.
	Token string
}

// sqliteDeployment starts one SQLite server with extra serve arguments.
func sqliteDeployment(t *testing.T, extra ...string) *deployment {
	t.Helper()
	dir := t.TempDir()
	srv := startServer(t, dir, extra...)
	return &deployment{t: t, driver: "sqlite", nodes: []*server{srv}, dirs: []string{dir},
		args: [][]string{extra}, urls: []string{srv.URL}, Token: srv.Token}
}

// pgDeployment starts n PostgreSQL nodes on a fresh schema, each with the
// extra serve arguments (startPGCluster takes none), and checks that every
// node's admin token works on every node.
func pgDeployment(t *testing.T, n int, extra ...string) *deployment {
	t.Helper()
	_, nodeURL := newPGSchema(t)
	d := &deployment{t: t, driver: "postgres", pgURL: nodeURL}
	for range n {
		args := append([]string{"--store", "postgres", "--postgres-url", nodeURL}, extra...)
		dir := t.TempDir()
		srv := startServer(t, dir, args...)
		d.nodes = append(d.nodes, srv)
		d.urls = append(d.urls, srv.URL)
		d.dirs = append(d.dirs, dir)
		d.args = append(d.args, args)
	}
	d.Token = d.nodes[0].Token
	ctx := testCtx(t, 30*time.Second)
	for _, tokenOf := range d.nodes {
		for _, on := range d.nodes {
			if _, err := client.New(on.URL, tokenOf.Token).Events(ctx, wire.EventQuery{Limit: 1}); err != nil {
				t.Fatalf("the admin token of node %s is not accepted by node %s: %v", tokenOf.Addr, on.Addr, err)
			}
		}
	}
	return d
}

// N is the number of nodes.
func (d *deployment) N() int { return len(d.urls) }

// URL is node i's base URL (stable across restarts).
func (d *deployment) URL(i int) string { return d.urls[i] }

// Client is a client of node i with token, over a transport that keeps
// enough idle connections for many concurrent workers (as poolClient).
func (d *deployment) Client(i int, token string) *client.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	return client.New(d.urls[i], token, client.WithHTTPClient(&http.Client{Transport: tr}))
}

// Admin is an admin client of node i.
func (d *deployment) Admin(i int) *client.Client { return d.Client(i, d.Token) }

// Kill kill -9s node i.
func (d *deployment) Kill(i int) { d.nodes[i].Kill() }

// Restart starts node i again on its data directory and address, after
// Kill.
func (d *deployment) Restart(i int) {
	d.t.Helper()
	old := d.nodes[i]
	args := append(append([]string(nil), d.args[i]...), "--listen", old.Addr)
	d.nodes[i] = startServer(d.t, d.dirs[i], args...)
	if d.nodes[i].URL != d.urls[i] {
		d.t.Fatalf("node %d restarted on %s, not on its address %s", i, d.nodes[i].URL, d.urls[i])
	}
}

// newToken creates a token of role for did through node 0.
func (d *deployment) newToken(ctx context.Context, did string, role model.Role) string {
	d.t.Helper()
	res, err := d.Admin(0).CreateToken(ctx, &wire.TokenRequest{DID: did, Role: role})
	if err != nil {
		d.t.Fatalf("create %s token for %s: %v", role, did, err)
	}
	return res.Token
}

// holdFanOut locks the rows of owner's consumers names from a transaction
// of the test's own (PostgreSQL only): a fan-out step's compare-and-set on
// a row waits for the lock, so these consumers examine nothing more of
// their source until release is called, while plain reads of the rows
// (retention's, GET) go on. So does everything else, except acks of their
// cursors, which wait too.
func (d *deployment) holdFanOut(ctx context.Context, owner string, names ...string) (release func()) {
	d.t.Helper()
	if d.pgURL == "" {
		d.t.Fatal("holdFanOut needs PostgreSQL")
	}
	conn, err := pgx.Connect(ctx, d.pgURL)
	if err != nil {
		d.t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = conn.Close(context.Background()) // ends the transaction, and its locks
		})
	}
	d.t.Cleanup(release)
	tx, err := conn.Begin(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, `SELECT 1 FROM consumers WHERE owner = $1 AND name = ANY($2) FOR UPDATE`, owner, names)
	if err != nil || tag.RowsAffected() != int64(len(names)) {
		d.t.Fatalf("lock the rows of consumers %v of %s: %v %v", names, owner, tag, err)
	}
	return release
}

// metric reads the value of one sample of node i's /metrics, 0 when the
// sample is absent (a counter never incremented is not exposed).
func (d *deployment) metric(ctx context.Context, i int, sample string) float64 {
	d.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL(i)+"/metrics", nil)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("GET /metrics of node %d: %v", i, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET /metrics of node %d: status %d, %v", i, resp.StatusCode, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				d.t.Fatalf("/metrics of node %d: %q: %v", i, line, err)
			}
			return f
		}
	}
	return 0
}

// metricSum is metric summed over every node.
func (d *deployment) metricSum(ctx context.Context, sample string) float64 {
	d.t.Helper()
	var sum float64
	for i := range d.urls {
		sum += d.metric(ctx, i, sample)
	}
	return sum
}

// eventually polls cond every 50 ms until it returns "" or the deadline
// passes, then fails the test with cond's last explanation.
func eventually(ctx context.Context, t *testing.T, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not reached within %s: %s", what, d, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// purgedEvents sums the record counts of every retention.purged event in
// the whole event log, by box family.
func purgedEvents(ctx context.Context, t *testing.T, c *client.Client) (map[model.BoxKind]int64, int) {
	t.Helper()
	sum := map[model.BoxKind]int64{}
	n := 0
	for _, e := range eventsOf(ctx, t, c, "") {
		if e.Type != model.EventPurged {
			continue
		}
		n++
		var d wire.RetentionResult
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			t.Fatalf("retention.purged event %d: detail %q: %v", e.EventID, e.Detail, err)
		}
		for f, k := range d.Records {
			sum[f] += k
		}
	}
	return sum, n
}

// boxRecords returns the records present in a box, by record id.
func boxRecords(ctx context.Context, t *testing.T, c *client.Client, owner string, box model.BoxKind) map[string]model.Record {
	t.Helper()
	out := map[string]model.Record{}
	after := int64(0)
	for {
		res, err := c.Sync(ctx, wire.SyncQuery{Owner: owner, Box: box, AfterSeq: after, Limit: wire.MaxLimit})
		if err != nil {
			t.Fatalf("sync %s %s after %d: %v", owner, box, after, err)
		}
		for _, r := range res.Items {
			out[r.Record.RecordID] = r.Record
		}
		if len(res.Items) == 0 || res.LastSeq <= after {
			return out
		}
		after = res.LastSeq
	}
}
