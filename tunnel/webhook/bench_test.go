package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/internal/testserver"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/tunnel"
	"github.com/msgcenter/msgcenter/tunnel/webhook"
	"github.com/msgcenter/msgcenter/wire"
)

// BenchmarkOutbox drains b.N messages from a tunnel's outbox through the
// webhook Sender to a local receiver: claim, signed post, ack, per message,
// against a live server (SQLite). The backlog is written before the clock
// starts.
func BenchmarkOutbox(b *testing.B) {
	for _, workers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			srv := testserver.Start(b, core.Config{})
			ctx := context.Background()
			var got atomic.Int64
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
			defer recv.Close()
			tun := srv.Client(b, tunnelDID, model.RoleTunnel)
			if _, err := tun.SetRoutes(ctx, "did:hook:r", []model.ContactRoute{{Address: recv.URL}}); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			for i := range b.N {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					_, err := srv.Admin.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: agentDID,
						To: []string{"did:hook:r"}, Content: message.Content{Content: fmt.Sprintf("message %d", i)}}})
					if err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			b.ResetTimer()
			rctx, cancel := context.WithCancel(ctx)
			ob := &tunnel.Outbox{Client: tun, DID: tunnelDID, Sender: &webhook.Sender{Secret: secret}, Workers: workers,
				Wait: 100 * time.Millisecond, Logger: quiet}
			done := make(chan error, 1)
			go func() { done <- ob.Run(rctx) }()
			for got.Load() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
