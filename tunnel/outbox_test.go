package tunnel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	tunnelDID = "did:tunnel:t"
	agentDID  = "did:agent:a"
	extDID    = "did:ext:x"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// setup starts a server where extDID is reached through the tunnel, and
// returns the tunnel's and the agent's clients.
func setup(t *testing.T) (*testserver.Server, *client.Client, *client.Client) {
	t.Helper()
	srv := testserver.Start(t, core.Config{})
	tun := srv.Client(t, tunnelDID, model.RoleTunnel)
	ag := srv.Client(t, agentDID, model.RoleAgent)
	if _, err := tun.SetRoutes(context.Background(), extDID, []model.ContactRoute{{Address: "x@example.com"}}); err != nil {
		t.Fatal(err)
	}
	return srv, tun, ag
}

func send(t *testing.T, ag *client.Client, text string) string {
	t.Helper()
	res, err := ag.PostSend(context.Background(), &wire.PostSendRequest{Msg: &message.Message{From: agentDID, To: []string{extDID},
		Content: message.Content{Content: text}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deliveries) != 1 {
		t.Fatalf("post_send %+v: want one delivery", res)
	}
	return res.Deliveries[0].RecordID
}

func state(t *testing.T, srv *testserver.Server, id string) model.Record {
	t.Helper()
	rec, err := srv.Admin.GetRecord(context.Background(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Record
}

// A send slower than the lease keeps its record: the lease is extended
// while it lasts, so no other worker sends it too; and a stop while a send
// is in flight lets it finish and report.
func TestOutboxSlowSendAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("outlasts a 3 s lease")
	}
	t.Parallel()
	srv, tun, ag := setup(t)
	var sends atomic.Int32
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Workers: 3, Lease: 3 * time.Second, Wait: 500 * time.Millisecond, Logger: quiet,
		Sender: tunnel.SenderFunc(func(ctx context.Context, d *tunnel.Delivery) (string, error) {
			sends.Add(1)
			if d.Route.Address != "x@example.com" || d.Route.TargetDID != extDID || d.Msg.Content.Content != "slow" {
				return "", tunnel.Permanent("test", "unexpected delivery")
			}
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return "ext-1", nil
		})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	id := send(t, ag, "slow")
	<-started
	time.Sleep(4500 * time.Millisecond) // past the lease it was claimed with
	if rec := state(t, srv, id); rec.State != model.Sending {
		t.Fatalf("record %s mid-send, want SENDING", rec.State)
	}
	cancel() // a stop while the send is in flight
	time.Sleep(200 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec := state(t, srv, id)
	if rec.State != model.Sent || rec.Delivery.ExternalMsgID != "ext-1" || rec.Delivery.Attempts != 1 {
		t.Fatalf("record after the stop %+v %+v, want SENT by the one send", rec.State, rec.Delivery)
	}
	if n := sends.Load(); n != 1 {
		t.Fatalf("sent %d times", n)
	}
}

// Failures reach the server with the Sender's advice: retryable ones wait
// at least their RetryAfter, others are DEAD at once; a plain error
// (the network) is retryable.
func TestOutboxFailures(t *testing.T) {
	t.Parallel()
	srv, tun, ag := setup(t)
	var mu sync.Mutex
	seen := map[string]int{}
	ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Workers: 2, Lease: 5 * time.Second, Wait: 500 * time.Millisecond, Logger: quiet,
		Sender: tunnel.SenderFunc(func(ctx context.Context, d *tunnel.Delivery) (string, error) {
			mu.Lock()
			seen[d.Msg.Content.Content]++
			mu.Unlock()
			switch d.Msg.Content.Content {
			case "later":
				return "", tunnel.Retry("429", "slow down", time.Hour)
			case "much later":
				// Longer than msgcenter keeps a record waiting: the
				// longest wait, not a refused report.
				return "", tunnel.Retry("flood", "come back next month", 30*24*time.Hour)
			case "never":
				return "", tunnel.Permanent("400", "no such chat")
			default:
				return "", errors.New("connection reset")
			}
		})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	later, never, reset, month := send(t, ag, "later"), send(t, ag, "never"), send(t, ag, "reset"), send(t, ag, "much later")
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, n, r, m := state(t, srv, later), state(t, srv, never), state(t, srv, reset), state(t, srv, month)
		if l.State == model.Wait && l.Delivery.Attempts == 1 && n.State == model.Dead && r.Delivery.Attempts >= 1 &&
			m.State == model.Wait && m.Delivery.Attempts == 1 {
			if m.Delivery.RetryAfterMS != 7*24*3_600_000 || m.Delivery.ErrorCode != "flood" {
				t.Fatalf("a wait longer than msgcenter keeps: %+v", m.Delivery)
			}
			now := time.Now().UnixMilli()
			if l.Delivery.NextRetryAtMS < now+50*60*1000 || l.Delivery.ErrorCode != "429" || l.Delivery.RetryAfterMS != 3_600_000 {
				t.Fatalf("retry-after record %+v", l.Delivery)
			}
			if n.Delivery.ErrorCode != "400" || !strings.Contains(n.Delivery.ErrorMessage, "no such chat") {
				t.Fatalf("dead record %+v", n.Delivery)
			}
			if r.Delivery.ErrorCode != "send_error" || !strings.Contains(r.Delivery.ErrorMessage, "connection reset") {
				t.Fatalf("network failure %+v", r.Delivery)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: later %s %+v, never %s %+v, reset %s %+v", l.State, l.Delivery, n.State, n.Delivery, r.State, r.Delivery)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["later"] != 1 || seen["never"] != 1 || seen["much later"] != 1 {
		t.Fatalf("sends %v: a message retried before its time", seen)
	}
}

// A token the server refuses ends Run with the reason; a missing Sender or
// a bad DID is refused before anything starts.
func TestOutboxRefused(t *testing.T) {
	t.Parallel()
	srv := testserver.Start(t, core.Config{})
	ctx := context.Background()
	bad := client.New(srv.URL, "not-a-token")
	nop := tunnel.SenderFunc(func(context.Context, *tunnel.Delivery) (string, error) { return "", nil })
	err := (&tunnel.Outbox{Client: bad, DID: tunnelDID, Sender: nop, Logger: quiet}).Run(ctx)
	if !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("bad token: %v", err)
	}
	ag := srv.Client(t, agentDID, model.RoleAgent)
	err = (&tunnel.Outbox{Client: ag, DID: tunnelDID, Sender: nop, Logger: quiet}).Run(ctx)
	if !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("another identity's token: %v", err)
	}
	if err := (&tunnel.Outbox{Client: ag, DID: "bad did", Sender: nop}).Run(ctx); err == nil || !strings.Contains(err.Error(), "did") {
		t.Fatalf("bad DID: %v", err)
	}
	if err := (&tunnel.Outbox{Client: ag, DID: tunnelDID}).Run(ctx); err == nil {
		t.Fatal("no Sender: no error")
	}
}
