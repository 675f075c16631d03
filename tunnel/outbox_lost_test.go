package tunnel_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/wire"
)

// A report whose answer is lost on the way back (the server applied it)
// is tried again and answered as a repeat: the record is delivered, and
// no other record is left claimed by nobody meanwhile (as one claimed in
// the lost call would be).
func TestOutboxLostReportAnswer(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{BackoffBase: 100 * time.Millisecond})
	ctx := context.Background()
	tok, err := srv.Admin.CreateToken(ctx, &wire.TokenRequest{DID: tunnelDID, Role: model.RoleTunnel})
	if err != nil {
		t.Fatal(err)
	}
	ag := srv.Client(t, agentDID, model.RoleAgent)
	if _, err := srv.Admin.SetRoutes(ctx, extDID, []model.ContactRoute{{TunnelDID: tunnelDID, Address: "x@example.com"}}); err != nil {
		t.Fatal(err)
	}
	// A proxy that loses the answer to the first delivery report.
	up, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(up)
	var dropped atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/delivery") && dropped.CompareAndSwap(false, true) {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r) // the server applies it ...
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // ... and the answer never arrives
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	tun := client.New(proxy.URL, tok.Token)

	a, b := send(t, ag, "a"), send(t, ag, "b")
	var mu sync.Mutex
	sends := map[string]int{}
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Workers: 1, Lease: 3 * time.Second, Wait: 200 * time.Millisecond, Logger: quiet,
		Sender: tunnel.SenderFunc(func(ctx context.Context, d *tunnel.Delivery) (string, error) {
			mu.Lock()
			sends[d.Msg.Content.Content]++
			mu.Unlock()
			return "ok", nil
		})}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(rctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(15 * time.Second)
	for state(t, srv, a).State != model.Sent || state(t, srv, b).State != model.Sent {
		if time.Now().After(deadline) {
			t.Fatalf("not both SENT after 15s: %+v / %+v", state(t, srv, a), state(t, srv, b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !dropped.Load() {
		t.Fatal("no report was dropped")
	}
	rb := state(t, srv, b)
	if rb.Delivery.Attempts != 1 || rb.Delivery.LastError != "" {
		t.Fatalf("b, claimed by the report whose answer was lost, was never worked until its lease ran out: %+v", rb.Delivery)
	}
}
