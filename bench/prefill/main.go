// Command prefill fills a msgcenter data directory with many records
// before a load run, to check that costs stay flat as data grows (issue 5:
// enqueue and claim rates with 10 million records stored should be at
// least 80% of the rates on an empty store). It writes through the core
// service, as the server would, with concurrent dispatchers so that group
// commit batches them. It takes the data directory's lock, as the server
// does, so it refuses to run beside a server on the same directory.
//
//	prefill -data DIR -records 10000000 -owners 10000 -body 1024
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/server"
	"github.com/msgcenter/msgcenter/store/sqlite"
	"github.com/msgcenter/msgcenter/wire"
)

func main() {
	data := flag.String("data", "msgcenter-data", "the server's --data directory (created if missing)")
	records := flag.Int("records", 1_000_000, "messages to dispatch (one INBOX record each)")
	owners := flag.Int("owners", 10_000, "recipients the records are spread over")
	body := flag.Int("body", 1024, "body bytes")
	workers := flag.Int("workers", 16, "concurrent dispatchers")
	readPct := flag.Int("read", 50, "percent of records then marked READED (finished, as in a real store)")
	flag.Parse()
	if err := run(*data, *records, *owners, *body, *workers, *readPct); err != nil {
		log.Fatal(err)
	}
}

func run(data string, records, owners, body, workers, readPct int) error {
	ctx := context.Background()
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	unlock, err := server.LockDataDir(data)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := sqlite.Open(ctx, filepath.Join(data, "msgcenter.db"), sqlite.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	svc := core.New(st, core.Config{})
	admin := model.Identity{DID: core.AdminDID, Role: model.RoleAdmin}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	pad := strings.Repeat("x", max(0, body-40))
	var next, done atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(records) {
					return
				}
				to := fmt.Sprintf("did:prefill:owner%d", i%int64(owners))
				m := &message.Message{From: "did:prefill:sender", To: []string{to}, Kind: message.KindChat,
					Content: message.Content{Content: fmt.Sprintf("%s:%d:%s", run, i, pad)}}
				res, err := svc.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: m})
				if err == nil && int(i%100) < readPct && len(res.DeliveredRecipients) == 1 {
					rid := model.RecordID(to, model.Inbox, res.MsgID, "")
					_, err = svc.SetState(ctx, admin, rid, &wire.StateRequest{NewState: model.Readed})
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if n := done.Add(1); n%100_000 == 0 {
					el := time.Since(start)
					fmt.Printf("%d records, %.0f/s\n", n, float64(n)/el.Seconds())
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	fmt.Printf("done: %d records in %s\n", done.Load(), time.Since(start).Round(time.Second))
	return nil
}
