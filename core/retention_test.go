package core

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
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

// A group's log goes after GROUP_INBOX's period whatever its records'
// states (no one finishes them), once every member's consumer of it has
// examined them; the bodies go with the last record. In members mode the
// members' own inbox records are theirs: unread, they stay, and keep the
// body.
func TestRetentionGroupLog(t *testing.T) {
	t.Parallel()
	for _, d := range []model.GroupDelivery{model.DeliverToMembers, model.DeliverToGroup} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			s := newService(t, clk)
			ctx := context.Background()
			const grp = "did:test:group"
			if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{bob, carol}, Delivery: d}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateConsumer(ctx, agent(carol), &wire.ConsumerRequest{Name: "all", SourceOwner: grp, SourceBox: "GROUP_INBOX"}); err != nil {
				t.Fatal(err)
			}
			m := &message.Message{From: grp, Source: bob, Kind: message.KindGroupMsg, Content: message.Content{Content: "g"}}
			if _, err := s.PostSend(ctx, admin, &wire.PostSendRequest{Msg: m}); err != nil {
				t.Fatal(err)
			}
			log := syncAll(t, s, grp, model.GroupInbox)
			if len(log) != 1 || log[0].Record.State != model.Unread {
				t.Fatalf("the group's log: %+v", log)
			}
			clk.Advance(DefaultRetention + time.Hour)
			// The pump has not fed carol's consumer yet: the record stays.
			res, err := s.RunRetention(ctx, admin)
			if err != nil {
				t.Fatal(err)
			}
			if res.Records[model.GroupInbox] != 0 {
				t.Fatalf("purged a group record carol's consumer has not examined: %+v", res)
			}
			pumpAll(t, s)
			if res, err = s.RunRetention(ctx, admin); err != nil {
				t.Fatal(err)
			}
			if res.Records[model.GroupInbox] != 1 {
				t.Fatalf("an unread group record older than the period stayed: %+v", res)
			}
			if got := syncAll(t, s, grp, model.GroupInbox); len(got) != 0 {
				t.Fatalf("the group's log after retention: %+v", got)
			}
			// carol's consumer copy (unread) still refers to the body, and in
			// members mode so do the members' unread inbox records.
			if _, err := s.GetMessage(ctx, admin, log[0].Record.MsgID); err != nil {
				t.Fatalf("the body went while records refer to it: %v", err)
			}
			if d == model.DeliverToMembers {
				if got := texts(syncAll(t, s, carol, model.Inbox)); len(got) != 1 {
					t.Fatalf("carol's inbox after the group's log went: %v", got)
				}
			}
		})
	}
}

// GROUP_INBOX=off keeps a group's log for ever.
func TestRetentionGroupLogKeptForever(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := New(openTestStore(t), Config{Now: clk.Now, Retention: RetentionConfig{
		Terminal: map[model.BoxKind]time.Duration{model.GroupInbox: -1}}})
	ctx := context.Background()
	const grp = "did:test:group"
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{bob}, Delivery: model.DeliverToGroup}); err != nil {
		t.Fatal(err)
	}
	m := &message.Message{From: grp, Source: bob, Kind: message.KindGroupMsg, Content: message.Content{Content: "g"}}
	if _, err := s.PostSend(ctx, admin, &wire.PostSendRequest{Msg: m}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * DefaultRetention)
	res, err := s.RunRetention(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records[model.GroupInbox] != 0 || res.Messages != 0 {
		t.Fatalf("GROUP_INBOX=off, yet retention took %+v", res)
	}
	if got := syncAll(t, s, grp, model.GroupInbox); len(got) != 1 {
		t.Fatalf("the group's log: %+v", got)
	}
}

// With a period shorter than the bodies' grace, a body outlives its last
// record by the grace, not for ever: a later pass takes it.
func TestRetentionShortPeriodBodiesGoLater(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := New(openTestStore(t), Config{Now: clk.Now, Retention: RetentionConfig{Terminal: map[model.BoxKind]time.Duration{
		model.Inbox: time.Minute, model.Outbox: time.Minute}}})
	ctx := context.Background()
	res, err := s.PostSend(ctx, agent(alice), &wire.PostSendRequest{Msg: chat(alice, []string{bob}, "brief")})
	if err != nil {
		t.Fatal(err)
	}
	in := syncAll(t, s, bob, model.Inbox)
	if _, err := s.SetState(ctx, agent(bob), in[0].Record.RecordID, &wire.StateRequest{NewState: model.Readed}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	got, err := s.RunRetention(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if got.Records[model.Inbox] != 1 || got.Records[model.Outbox] != 1 || got.Messages != 0 {
		t.Fatalf("first pass: %+v (want both records, the body kept for its grace)", got)
	}
	clk.Advance(messageGrace)
	if got, err = s.RunRetention(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if got.Messages != 1 {
		t.Fatalf("pass after the grace: %+v (want the body)", got)
	}
	if _, err := s.GetMessage(ctx, admin, res.MsgID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the body outlived its records and its grace: %v", err)
	}
}

// Idempotency keys go after the longest record period, and a key gone
// binds anew; with a family kept forever, keys are too.
func TestRetentionIdempotencyKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		terminal map[model.BoxKind]time.Duration
		keep     time.Duration
	}{
		{"default", nil, DefaultRetention},
		{"longest family", map[model.BoxKind]time.Duration{model.Inbox: 90 * 24 * time.Hour}, 90 * 24 * time.Hour},
		{"a family kept forever", map[model.BoxKind]time.Duration{model.Outbox: -1}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			s := New(openTestStore(t), Config{Now: clk.Now, Retention: RetentionConfig{Terminal: c.terminal}})
			ctx := context.Background()
			p, err := s.RetentionPolicy(admin)
			if err != nil || p.IdempotencyKeysMS != keepMS(c.keep) {
				t.Fatalf("policy %+v, %v; want idempotency keys kept %v", p, err, c.keep)
			}
			send := func(text string) error {
				_, err := s.PostSend(ctx, agent(alice), &wire.PostSendRequest{Msg: chat(alice, []string{bob}, text), IdempotencyKey: "order-42"})
				return err
			}
			if err := send("first"); err != nil {
				t.Fatal(err)
			}
			if err := send("second"); !errors.Is(err, model.ErrConflict) {
				t.Fatalf("the key reused at once: %v; want a conflict", err)
			}
			clk.Advance(100 * 24 * time.Hour)
			res, err := s.RunRetention(ctx, admin)
			if err != nil {
				t.Fatal(err)
			}
			err = send("second")
			if c.keep < 0 {
				if res.IdempotencyKeys != 0 || !errors.Is(err, model.ErrConflict) {
					t.Fatalf("keys kept forever: purged %d, reuse %v; want 0 and a conflict", res.IdempotencyKeys, err)
				}
				return
			}
			if res.IdempotencyKeys != 1 || err != nil {
				t.Fatalf("purged %d keys, reuse %v; want 1 and the key bound anew", res.IdempotencyKeys, err)
			}
		})
	}
}
