package core

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/msgcenter/msgcenter/wire"
)

// BenchmarkDispatchAggregated: inbound dispatch of distinct messages as
// parts of bursts (16 chats in turn, to one recipient): a part row, its
// bucket's update and an event per message, one commit per dispatch. The
// bursts never end during the run (a long window): this is the cost of a
// part, against BenchmarkDispatch1Recipient's cost of a record.
func BenchmarkDispatchAggregated(b *testing.B) {
	for _, bs := range benchBodySizes {
		b.Run(bs.name, func(b *testing.B) {
			s := New(openTestStore(b), Config{MailMaxParts: math.MaxInt32})
			ctx := context.Background()
			a := make([]*wire.Aggregate, 16)
			for i := range a {
				a[i] = &wire.Aggregate{Key: fmt.Sprintf("chat-%d", i), WindowMS: ptr(int64(3_600_000))}
			}
			var i int64
			for b.Loop() {
				i++
				m := chat("did:ext:alice", []string{"did:agent:bob"}, benchText(i, bs.size))
				if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m, Aggregate: a[i%16]}); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, 1, "parts/s")
		})
	}
}

// BenchmarkMailFlush: writing Mails of 10 parts of 1 KiB each: per op, one
// burst is read, built into its Mail, checked and written with its parts'
// removal. The bursts are stored before the timer starts.
func BenchmarkMailFlush(b *testing.B) {
	s := New(openTestStore(b), Config{})
	ctx := context.Background()
	const parts = 10
	for n := range b.N {
		a := &wire.Aggregate{Key: fmt.Sprintf("chat-%d", n), WindowMS: ptr(int64(3_600_000))}
		for p := range parts {
			m := chat("did:ext:alice", []string{"did:agent:bob"}, benchText(int64(n*parts+p), 1024))
			if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m, Aggregate: a}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	n, err := s.flushMail(ctx, math.MaxInt64)
	if err != nil {
		b.Fatal(err)
	}
	if n != b.N {
		b.Fatalf("flushed %d Mails, want %d", n, b.N)
	}
	reportRate(b, 1, "mails/s")
}
