//go:build unix

package sqlite

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func BenchmarkApply(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/b.db", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m := fmt.Sprintf("m%d", i)
		_, err := s.Apply(ctx, &store.Plan{MsgID: m, MsgBody: []byte(`{"hello":"world"}`), NowMS: int64(i),
			Records: []model.Record{rec("bob", model.Inbox, m, "t", int64(i)), rec("alice", model.Outbox, m, "t", int64(i))}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimUpdate(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/b.db", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var recs []model.Record
	for i := range b.N {
		recs = append(recs, rec("w", model.TunnelOutbox, fmt.Sprintf("m%d", i), "", int64(i)))
	}
	for len(recs) > 0 {
		n := min(1000, len(recs))
		if _, err := s.Apply(ctx, &store.Plan{MsgID: "m", MsgBody: []byte("{}"), NowMS: 1, Records: recs[:n]}); err != nil {
			b.Fatal(err)
		}
		recs = recs[n:]
	}
	b.ResetTimer()
	for range b.N {
		r, err := s.Claim(ctx, store.ClaimParams{Owner: "w", Box: model.TunnelOutbox, From: model.Wait,
			To: model.Sending, NowMS: 2, LeaseID: "l", LeaseUntilMS: 1000})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Update(ctx, &store.Update{RecordID: r.RecordID, From: model.Sending,
			ExpectLeaseID: "l", To: model.Sent, NowMS: 3}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplyParallel(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/b.db", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	c0 := cpuNow()
	defer func() { b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			m := fmt.Sprintf("m%d", i)
			_, err := s.Apply(ctx, &store.Plan{MsgID: m, MsgBody: []byte(`{"hello":"world"}`), NowMS: i,
				Records: []model.Record{rec("bob", model.Inbox, m, "t", i), rec("alice", model.Outbox, m, "t", i)}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkClaimParallel(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/b.db", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var recs []model.Record
	for i := range b.N {
		recs = append(recs, rec("w", model.TunnelOutbox, fmt.Sprintf("m%d", i), "", int64(i)))
	}
	for len(recs) > 0 {
		n := min(1000, len(recs))
		if _, err := s.Apply(ctx, &store.Plan{MsgID: "m", MsgBody: []byte("{}"), NowMS: 1, Records: recs[:n]}); err != nil {
			b.Fatal(err)
		}
		recs = recs[n:]
	}
	b.SetParallelism(8)
	b.ResetTimer()
	c0 := cpuNow()
	defer func() { b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := s.Claim(ctx, store.ClaimParams{Owner: "w", Box: model.TunnelOutbox, From: model.Wait,
				To: model.Sending, NowMS: 2, LeaseID: "l", LeaseUntilMS: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Update(ctx, &store.Update{RecordID: r.RecordID, From: model.Sending,
				ExpectLeaseID: "l", To: model.Sent, NowMS: 3}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cpuNow is the process's CPU time: on a shared machine it says more about
// the cost of an operation than wall time does.
func cpuNow() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
