package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// BenchmarkConsumerBackfill: a consumer created over a box of 10,000
// records (1 KiB bodies, half of them in the filter's workspace) examines
// the whole box; each op is one new consumer's backfill. Reports source
// records examined per second.
func BenchmarkConsumerBackfill(b *testing.B) {
	const total = 10_000
	s := newService(b, nil)
	ctx := context.Background()
	owner := agent("did:agent:bench-src")
	for i := range total {
		m := chat("did:ext:alice", []string{owner.DID}, benchText(int64(i), 1024))
		m.Workspace = []string{"alpha", "beta"}[i%2]
		if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for b.Loop() {
		n++
		name := fmt.Sprintf("c%d", n)
		if _, err := s.CreateConsumer(ctx, owner, &wire.ConsumerRequest{Name: name, SourceOwner: owner.DID,
			SourceBox: "INBOX", Filter: model.ConsumerFilter{Workspace: []string{"alpha"}}}); err != nil {
			b.Fatal(err)
		}
		if err := s.pumpConsumer(ctx, consumerKey{owner.DID, name}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if last, _ := s.st.BoxLastSeq(ctx, owner.DID, model.ConsumerBox("c1")); last != total/2 {
		b.Fatalf("consumer took %d records, want %d", last, total/2)
	}
	reportRate(b, total, "examined/s")
}

// BenchmarkPurge: retention deleting finished records whose bodies nothing
// else refers to; each op is a full pass over 5,000 READED records (the
// records and their events are written outside the timer). Reports records
// purged per second, bodies included.
func BenchmarkPurge(b *testing.B) {
	const total = 5000
	clk := newClock()
	s := New(openTestStore(b), Config{Now: clk.Now})
	ctx := context.Background()
	owner := agent("did:agent:bench-purge")
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		for i := range total {
			m := chat("did:ext:alice", []string{owner.DID}, benchText(int64(round*total+i), 1024))
			if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
				b.Fatal(err)
			}
		}
		for {
			r, err := s.Next(ctx, owner, owner.DID, model.Inbox, &wire.NextRequest{})
			if err != nil {
				b.Fatal(err)
			}
			if r == nil {
				break
			}
			if _, err := s.SetState(ctx, owner, r.Record.RecordID, &wire.StateRequest{NewState: model.Readed, LeaseID: r.Record.Lease.ID}); err != nil {
				b.Fatal(err)
			}
		}
		clk.Advance(DefaultRetention + 2*time.Hour)
		b.StartTimer()
		res, err := s.RunRetention(ctx, admin)
		if err != nil {
			b.Fatal(err)
		}
		if res.Records[model.Inbox] != total || res.Messages != total {
			b.Fatalf("purged %+v, want %d records and bodies", res, total)
		}
	}
	reportRate(b, total, "records/s")
}
