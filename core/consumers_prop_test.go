package core

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestConsumerFanOutProperty: whatever the interleaving of sends, consumer
// creations (from the beginning, from now, after a seq), fan-out steps and
// acks, every consumer's box holds exactly the source records after its
// start that its filter matches, once each, in source order; and its
// cursor never moves back.
func TestConsumerFanOutProperty(t *testing.T) {
	t.Parallel()
	// One store for every run (a PostgreSQL schema per run would be slow);
	// each run has a recipient of its own.
	s := newService(t, nil)
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		bob := fmt.Sprintf("did:prop:%d", run)
		type sent struct {
			seq  int64
			ws   string
			text string
		}
		type cons struct {
			name   string
			ws     string // "" takes all
			start  int64
			acked  int64
			filter model.ConsumerFilter
		}
		var src []sent
		var cs []*cons
		check := func() {
			for _, c := range cs {
				var want []string
				for _, m := range src {
					if m.seq > c.start && (c.ws == "" || m.ws == c.ws) {
						want = append(want, m.text)
					}
				}
				if got := texts(syncAll(rt, s, bob, model.ConsumerBox(c.name))); !slices.Equal(got, want) {
					rt.Fatalf("consumer %s (ws %q, start %d) has %v, want %v", c.name, c.ws, c.start, got, want)
				}
			}
		}
		maxOps := 30
		if raceEnabled {
			maxOps = 8
		}
		n := rapid.IntRange(1, maxOps).Draw(rt, "ops")
		for i := range n {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3, 4: // send
				ws := rapid.SampledFrom([]string{"alpha", "beta"}).Draw(rt, "ws")
				text := fmt.Sprintf("m%d", i)
				m := chat(alice, []string{bob}, text)
				m.Workspace = ws
				mustDispatch(rt, s, m)
				src = append(src, sent{seq: int64(len(src) + 1), ws: ws, text: text})
			case 5, 6: // create a consumer
				c := &cons{name: fmt.Sprintf("c%d", i), ws: rapid.SampledFrom([]string{"", "alpha", "beta"}).Draw(rt, "filter")}
				if c.ws != "" {
					c.filter.Workspace = []string{c.ws}
				}
				req := &wire.ConsumerRequest{Name: c.name, SourceOwner: bob, SourceBox: "INBOX", Filter: c.filter}
				switch rapid.IntRange(0, 2).Draw(rt, "start") {
				case 0:
					req.Start = wire.StartBeginning
				case 1:
					req.Start = wire.StartNow
					c.start = int64(len(src))
				case 2:
					c.start = rapid.Int64Range(0, int64(len(src))).Draw(rt, "after")
					req.AfterSeq = &c.start
				}
				if _, err := s.CreateConsumer(ctx, agent(bob), req); err != nil {
					rt.Fatalf("create: %v", err)
				}
				cs = append(cs, c)
			case 7, 8: // a fan-out step for everyone
				if err := s.PumpConsumers(ctx); err != nil {
					rt.Fatalf("pump: %v", err)
				}
				check()
			case 9: // ack somewhere in what a consumer has
				if len(cs) == 0 {
					continue
				}
				c := cs[rapid.IntRange(0, len(cs)-1).Draw(rt, "who")]
				info, err := s.GetConsumer(ctx, agent(bob), bob, c.name)
				if err != nil {
					rt.Fatal(err)
				}
				seq := rapid.Int64Range(0, info.LastSeq).Draw(rt, "ack")
				info, err = s.AckConsumer(ctx, agent(bob), bob, c.name, seq)
				if err != nil {
					rt.Fatalf("ack %d of %d: %v", seq, info.LastSeq, err)
				}
				if info.AckedSeq != max(seq, c.acked) {
					rt.Fatalf("cursor %d after acks up to %d then %d", info.AckedSeq, c.acked, seq)
				}
				c.acked = info.AckedSeq
			}
		}
		if err := s.PumpConsumers(ctx); err != nil {
			rt.Fatalf("pump: %v", err)
		}
		check()
	})
}
