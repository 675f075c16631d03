// Package testserver starts a real msgcenter node (embedded SQLite, a
// listening HTTP server) for the tests of packages that speak to msgcenter
// over its API (tunnels, the MCP server), and stops it when the test ends.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/server"
	"github.com/msgcenter/msgcenter/wire"
)

// Server is a running node.
type Server struct {
	URL   string
	Admin *client.Client
}

// Start runs a node with cfg (zero fields take serve's defaults) until the
// test ends.
func Start(t testing.TB, cfg core.Config) *Server {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{DataDir: dir, Listen: "127.0.0.1:0", Core: cfg,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: func(a string) { ready <- a }})
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("server did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("server did not start within 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	tok, err := os.ReadFile(filepath.Join(dir, server.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr
	return &Server{URL: url, Admin: client.New(url, strings.TrimSpace(string(tok)))}
}

// Client returns a client with a new token for did in role.
func (s *Server) Client(t testing.TB, did string, role model.Role) *client.Client {
	t.Helper()
	res, err := s.Admin.CreateToken(context.Background(), &wire.TokenRequest{DID: did, Role: role})
	if err != nil {
		t.Fatal(err)
	}
	return client.New(s.URL, res.Token)
}

// Record returns a record as it is now.
func (s *Server) Record(t testing.TB, id string) model.Record {
	t.Helper()
	rec, err := s.Admin.GetRecord(context.Background(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Record
}

// Reply post_sends text (and title) from agent to did, which must be
// routed through one tunnel, and returns the delivery's record id.
func (s *Server) Reply(t testing.TB, agent, did, title, text string) string {
	t.Helper()
	res, err := s.Admin.PostSend(context.Background(), &wire.PostSendRequest{Msg: &message.Message{From: agent, To: []string{did},
		Content: message.Content{Title: title, Content: text}}})
	if err != nil || len(res.Deliveries) != 1 {
		t.Fatalf("post_send %+v, %v: want one delivery through a tunnel", res, err)
	}
	return res.Deliveries[0].RecordID
}

// WaitFor polls cond for up to 15 s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 15s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Run runs fn (an Outbox's or a Poller's Run) until the test ends, and
// fails the test if it returns an error.
func Run(t testing.TB, fn func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}
