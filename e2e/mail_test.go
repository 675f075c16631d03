package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Parts of a burst are acknowledged once stored: a kill -9 right after
// the last answer loses none of them, and the restarted server writes
// their one Mail when the burst's window ends, exactly once.
func TestMailSurvivesKill9(t *testing.T) {
	t.Parallel()
	const (
		rcpt     = "did:agent:mailbox"
		parts    = 12
		windowMS = 1500
	)
	dir := t.TempDir()
	srv := startServer(t, dir)
	ctx := testCtx(t, 60*time.Second)
	run := time.Now().UnixNano()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids []string
	)
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &message.Message{From: fmt.Sprintf("did:tg:user:%d", i%3), To: []string{rcpt}, Nonce: fmt.Sprintf("%d-%d", run, i),
				Content: message.Content{Content: fmt.Sprintf("line %d", i)}}
			res, err := srv.Client().Dispatch(ctx, &wire.DispatchRequest{Msg: m,
				IngressCtx: &model.Route{TunnelDID: "did:tunnel:tg", ChatID: "chat-9"},
				Aggregate:  &wire.Aggregate{Key: "tg:chat-9", WindowMS: ptr(int64(windowMS))}})
			if err != nil {
				t.Errorf("dispatch part %d: %v", i, err)
				return
			}
			if res.Aggregate == nil || res.Aggregate.BucketID == 0 || res.Aggregate.Duplicate {
				t.Errorf("part %d answered %+v", i, res.Aggregate)
				return
			}
			mu.Lock()
			ids = append(ids, res.MsgID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	srv.Kill()
	if t.Failed() {
		return
	}

	srv2 := startServer(t, dir)
	c := srv2.Client()
	got, err := c.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{WaitMS: 15_000})
	if err != nil {
		t.Fatalf("claim the Mail after the restart: %v", err)
	}
	if got == nil {
		t.Fatalf("no Mail within 15 s of the restart: its parts were lost across kill -9; server output:\n%s", srv2.Log())
	}
	m, err := message.Decode(got.Msg)
	if err != nil {
		t.Fatalf("Mail body: %v", err)
	}
	var mm core.MailMachine
	if err := json.Unmarshal(m.Content.Machine, &mm); err != nil {
		t.Fatalf("Mail machine content: %v", err)
	}
	var inMail []string
	for _, p := range mm.Mail.Parts {
		inMail = append(inMail, p.MsgID)
	}
	slices.Sort(inMail)
	slices.Sort(ids)
	if !slices.Equal(inMail, ids) {
		t.Fatalf("the Mail holds %d parts, want the %d acknowledged:\n got %v\nwant %v", len(inMail), len(ids), inMail, ids)
	}
	if m.From != "did:tunnel:tg" || got.Record.Route == nil || got.Record.Route.ChatID != "chat-9" {
		t.Errorf("Mail from %s with route %+v", m.From, got.Record.Route)
	}
	if p, err := c.PendingMail(ctx, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 0 {
		t.Errorf("pending after the Mail: %+v, %v", p, err)
	}
	// Written once: nothing else arrives, and the inbox holds only it.
	if extra, err := c.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{WaitMS: 500}); err != nil || extra != nil {
		t.Errorf("a second claim found %+v (err %v), want nothing", extra, err)
	}
	if recs := syncAll(ctx, t, c, rcpt, model.Inbox); len(recs) != 1 {
		t.Errorf("the inbox holds %d records, want the one Mail", len(recs))
	}
}
