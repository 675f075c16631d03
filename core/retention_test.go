package core

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestRetentionPurgesOnlyWhatItMay(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	sendTo(t, s, "", "x1", "x2", "x3", "x4")
	inbox := syncAll(t, s, bob, model.Inbox)
	for i, to := range []model.State{model.Readed, model.Archived} {
		if _, err := s.SetState(ctx, agent(bob), inbox[i].Record.RecordID, &wire.StateRequest{NewState: to}); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer that has not examined the source yet needs all of it.
	createConsumer(t, s, "slow", model.ConsumerFilter{}, "", nil)

	clk.Advance(DefaultRetention - time.Hour)
	res, err := s.RunRetention(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 0 || res.Messages != 0 {
		t.Fatalf("purged records younger than the retention: %+v", res)
	}
	clk.Advance(2 * time.Hour)
	if res, _ = s.RunRetention(ctx, admin); res.Records[model.Inbox] != 0 {
		t.Fatalf("purged records a consumer still needs: %+v", res)
	}
	if res.Events == 0 {
		t.Fatal("events older than the retention were kept")
	}
	pumpAll(t, s)
	res, err = s.RunRetention(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records[model.Inbox] != 2 || res.Messages != 0 {
		t.Fatalf("after the consumer caught up: %+v (want the 2 finished inbox records, no body: the consumer refers to them)", res)
	}
	if got := texts(syncAll(t, s, bob, model.Inbox)); len(got) != 2 || got[0] != "x3" || got[1] != "x4" {
		t.Fatalf("inbox after retention: %v", got)
	}

	// The consumer acks seq 2 and holds seq 1 claimed; only what is acked
	// and not held goes, and x2's body with it (nothing else refers to it).
	claimed, err := s.Next(ctx, agent(bob), bob, model.ConsumerBox("slow"), &wire.NextRequest{})
	if err != nil || claimed.Record.Seq != 1 {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	if _, err := s.AckConsumer(ctx, agent(bob), bob, "slow", 2); err != nil {
		t.Fatal(err)
	}
	res, err = s.RunRetention(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records[model.ConsumerFamily] != 1 || res.Messages != 1 {
		t.Fatalf("acked purge: %+v", res)
	}
	left := syncAll(t, s, bob, model.ConsumerBox("slow"))
	if len(left) != 3 || left[0].Record.Seq != 1 || left[1].Record.Seq != 3 {
		t.Fatalf("consumer box after acked purge: %+v", left)
	}
	if _, err := s.GetMessage(ctx, admin, inbox[1].Record.MsgID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("x2's body outlived every record: %v", err)
	}
	if _, err := s.GetMessage(ctx, admin, inbox[0].Record.MsgID); err != nil {
		t.Fatalf("x1's body went while the consumer still holds it: %v", err)
	}

	// The purge is in the event log, with its counts.
	ev, err := s.Events(ctx, admin, wire.EventQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var purged []model.Event
	for _, e := range ev.Items {
		if e.Type == model.EventPurged {
			purged = append(purged, e)
		}
	}
	if len(purged) < 2 {
		t.Fatalf("%d retention.purged events, want one per pass that purged", len(purged))
	}
	var detail struct {
		Records  map[string]int64 `json:"records"`
		Messages int64            `json:"messages"`
	}
	if err := json.Unmarshal([]byte(purged[len(purged)-1].Detail), &detail); err != nil || detail.Records["CONSUMER"] != 1 || detail.Messages != 1 {
		t.Fatalf("last purge event detail %q: %+v %v", purged[len(purged)-1].Detail, detail, err)
	}
	if _, err := s.RunRetention(ctx, agent(bob)); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("an agent ran retention: %v", err)
	}
}

func TestRetentionPolicyPerFamily(t *testing.T) {
	t.Parallel()
	clk := newClock()
	cfg := Config{Now: clk.Now, Retention: RetentionConfig{Terminal: map[model.BoxKind]time.Duration{
		model.Inbox: -1, model.Outbox: time.Hour}}}
	s := New(openTestStore(t), cfg)
	ctx := context.Background()
	if _, err := s.PostSend(ctx, agent(alice), &wire.PostSendRequest{Msg: chat(alice, []string{bob}, "hello")}); err != nil {
		t.Fatal(err)
	}
	in := syncAll(t, s, bob, model.Inbox)
	if _, err := s.SetState(ctx, agent(bob), in[0].Record.RecordID, &wire.StateRequest{NewState: model.Readed}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	res, err := s.RunRetention(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records[model.Outbox] != 1 || res.Records[model.Inbox] != 0 {
		t.Fatalf("per-family policy: %+v (want the SENT outbox copy gone, the inbox kept forever)", res)
	}
	p, err := s.RetentionPolicy(admin)
	if err != nil {
		t.Fatal(err)
	}
	if p.TerminalMS[model.Inbox] != 0 || p.TerminalMS[model.Outbox] != time.Hour.Milliseconds() ||
		p.TerminalMS[model.ConsumerFamily] != DefaultRetention.Milliseconds() || !p.Enabled {
		t.Fatalf("policy: %+v", p)
	}
}
