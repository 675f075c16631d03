// Command prefill fills a msgcenter data directory with many records
// before a load run, to check that costs stay flat as data grows (issue 5:
// enqueue and claim rates with 10 million records stored should be at
// least 80% of the rates on an empty store). It writes through the core
// service, as the server would, with concurrent dispatchers so that group
// commit batches them. It takes the data directory's lock, as the server
// does, so it refuses to run beside a server on the same directory.
//
//	prefill -data DIR -records 10000000 -owners 10000 -body 1024 -fanout 5
//
// With -fanout K each message goes to K recipients (K INBOX records, one
// body), which fills a store K times faster; the store then holds K times
// fewer bodies than records.
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
	records := flag.Int("records", 1_000_000, "INBOX records to create")
	fanout := flag.Int("fanout", 1, "recipients per message")
	owners := flag.Int("owners", 10_000, "recipients the records are spread over")
	body := flag.Int("body", 1024, "body bytes")
	workers := flag.Int("workers", 16, "concurrent dispatchers")
	readPct := flag.Int("read", 50, "percent of records then marked READED (finished, as in a real store)")
	flag.Parse()
	if *fanout < 1 || *fanout > *owners {
		log.Fatalf("-fanout must be between 1 and -owners (%d)", *owners)
	}
	if err := run(*data, *records, *owners, *body, *workers, *readPct, *fanout); err != nil {
		log.Fatal(err)
	}
}

func run(data string, records, owners, body, workers, readPct, fanout int) error {
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
				if i*int64(fanout) >= int64(records) {
					return
				}
				to := make([]string, fanout)
				for j := range to {
					to[j] = fmt.Sprintf("did:prefill:owner%d", (i*int64(fanout)+int64(j))%int64(owners))
				}
				m := &message.Message{From: "did:prefill:sender", To: to, Kind: message.KindChat,
					Content: message.Content{Content: fmt.Sprintf("%s:%d:%s", run, i, pad)}}
				res, err := svc.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: m})
				if err == nil && len(res.DeliveredRecipients) != fanout {
					err = fmt.Errorf("message %d reached %d recipients, want %d", i, len(res.DeliveredRecipients), fanout)
				}
				for j := 0; err == nil && j < fanout; j++ {
					if int((i*int64(fanout)+int64(j))%100) < readPct {
						rid := model.RecordID(to[j], model.Inbox, res.MsgID, "")
						_, err = svc.SetState(ctx, admin, rid, &wire.StateRequest{NewState: model.Readed})
					}
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if n := done.Add(int64(fanout)); n%100_000 < int64(fanout) {
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
