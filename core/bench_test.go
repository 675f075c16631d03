package core

// Benchmarks of the hot paths, each on a fresh SQLite store in b.TempDir()
// with the default durability (WAL, synchronous=NORMAL). They measure; they
// assert nothing about time. Run them with
//
//	go test -run '^$' -bench . -benchmem ./core/
//
// and see docs/benchmarks.md for results and what the profiles say.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// benchBodySizes are the content sizes of the write benchmarks: a chat line
// and a paragraph. The canonical JSON adds ~100 bytes of envelope.
var benchBodySizes = []struct {
	name string
	size int
}{
	{"body=100B", 100},
	{"body=1KiB", 1024},
}

// benchText returns a distinct content of exactly size bytes (for sizes
// above 20) for message number i, so every message has its own id.
func benchText(i int64, size int) string {
	s := strconv.FormatInt(i, 10) + ":"
	if len(s) >= size {
		return s
	}
	return s + strings.Repeat("x", size-len(s))
}

func reportRate(b *testing.B, perOp float64, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)*perOp/s, unit)
	}
}

// BenchmarkDispatch1Recipient: inbound dispatch of distinct messages to one
// recipient: one INBOX record (plus its event and conversation row) per
// message, one write transaction per dispatch.
func BenchmarkDispatch1Recipient(b *testing.B) {
	for _, bs := range benchBodySizes {
		b.Run(bs.name, func(b *testing.B) {
			s := newService(b, nil)
			ctx := context.Background()
			var i int64
			for b.Loop() {
				i++
				m := chat("did:ext:alice", []string{"did:agent:bob"}, benchText(i, bs.size))
				if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, 1, "msgs/s")
		})
	}
}

// BenchmarkPostSendLocal: post_send of distinct messages to one local
// recipient (no routes): an OUTBOX record for the author and an INBOX
// record for the recipient per message.
func BenchmarkPostSendLocal(b *testing.B) {
	for _, bs := range benchBodySizes {
		b.Run(bs.name, func(b *testing.B) {
			s := newService(b, nil)
			ctx := context.Background()
			alice := agent("did:agent:alice")
			var i int64
			for b.Loop() {
				i++
				m := chat(alice.DID, []string{"did:agent:bob"}, benchText(i, bs.size))
				res, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: m})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.LocalRecipients) != 1 {
					b.Fatalf("post_send planned %+v", res)
				}
			}
			reportRate(b, 1, "msgs/s")
		})
	}
}

// BenchmarkDispatchParallel: Dispatch1Recipient with concurrent callers
// (p·GOMAXPROCS goroutines). Today every dispatch is its own transaction
// queued on the single writer connection, so this shows the cost of that
// queue and the room group commit would use.
func BenchmarkDispatchParallel(b *testing.B) {
	for _, p := range []int{1, 8} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			s := newService(b, nil)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(p)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					// One recipient per goroutine would hide contention on
					// the box's seq row; all write to the same inbox.
					m := chat("did:ext:alice", []string{"did:agent:bob"}, benchText(i, 100))
					if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRate(b, 1, "msgs/s")
		})
	}
}

// BenchmarkClaimAck: get_next (claim with lease, body included, the
// default) and report_delivery ok on a box pre-filled with b.N records.
// inbox: an agent works its INBOX (UNREAD → READING → READED);
// tunnel_outbox: a tunnel sender works its TUNNEL_OUTBOX
// (WAIT → SENDING → SENT).
func BenchmarkClaimAck(b *testing.B) {
	inbox := func(b *testing.B, ackNext bool) {
		s := newService(b, nil)
		ctx := context.Background()
		worker := agent("did:agent:worker")
		b.StopTimer()
		for i := range b.N {
			m := chat("did:ext:alice", []string{worker.DID}, benchText(int64(i), 100))
			if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		b.StartTimer()
		if ackNext {
			benchAckNext(b, s, worker, model.Inbox)
		} else {
			benchClaimAck(b, s, worker, model.Inbox)
		}
	}
	b.Run("box=inbox", func(b *testing.B) { inbox(b, false) })
	// ack_next: each ack claims the next record in the same call
	// (report_delivery with next), as a worker using AckNext does.
	b.Run("box=inbox/ack_next", func(b *testing.B) { inbox(b, true) })
	// group_member: the messages came through a members group, so each
	// ack is also the member's read receipt (store.Update.Receipt).
	b.Run("box=inbox/group_member", func(b *testing.B) {
		s := newService(b, nil)
		ctx := context.Background()
		b.StopTimer()
		group, members := benchGroup(b, s, 2, model.DeliverToMembers)
		for i := range b.N {
			m := &message.Message{From: group, Source: "did:agent:author", Kind: message.KindGroupMsg,
				Content: message.Content{Content: benchText(int64(i), 100)}}
			if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		b.StartTimer()
		benchClaimAck(b, s, agent(members[0]), model.Inbox)
	})
	b.Run("box=tunnel_outbox", func(b *testing.B) {
		s := newService(b, nil)
		ctx := context.Background()
		b.StopTimer()
		if _, err := s.SetRoutes(ctx, admin, "did:ext:bob", []model.ContactRoute{{TunnelDID: tunnel.DID, Address: "tg:42", Platform: "telegram"}}); err != nil {
			b.Fatal(err)
		}
		alice := agent("did:agent:alice")
		for i := range b.N {
			m := chat(alice.DID, []string{"did:ext:bob"}, benchText(int64(i), 100))
			res, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: m})
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Deliveries) != 1 {
				b.Fatalf("post_send planned %+v", res)
			}
		}
		b.ResetTimer()
		b.StartTimer()
		benchClaimAck(b, s, tunnel, model.TunnelOutbox)
	})
}

func benchClaimAck(b *testing.B, s *Service, who model.Identity, box model.BoxKind) {
	ctx := context.Background()
	ok := &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}}
	for range b.N {
		rec, err := s.Next(ctx, who, who.DID, box, &wire.NextRequest{})
		if err != nil {
			b.Fatal(err)
		}
		if rec == nil {
			b.Fatal("get_next found nothing in a pre-filled box")
		}
		ok.LeaseID = rec.Record.Lease.ID
		if _, err := s.ReportDelivery(ctx, who, rec.Record.RecordID, ok); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, 1, "msgs/s")
}

func benchAckNext(b *testing.B, s *Service, who model.Identity, box model.BoxKind) {
	ctx := context.Background()
	rec, err := s.Next(ctx, who, who.DID, box, &wire.NextRequest{})
	if err != nil || rec == nil {
		b.Fatalf("get_next: %v, %v", rec, err)
	}
	noBody := false // the worker has the acked record's body already
	ok := &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, WithObject: &noBody, Next: &wire.NextRequest{}}
	for i := range b.N {
		ok.LeaseID = rec.Record.Lease.ID
		res, err := s.ReportDelivery(ctx, who, rec.Record.RecordID, ok)
		if err != nil {
			b.Fatal(err)
		}
		if res.Next == nil && i < b.N-1 {
			b.Fatalf("ack %d of %d claimed nothing next", i+1, b.N)
		}
		rec = res.Next
	}
	reportRate(b, 1, "msgs/s")
}

// BenchmarkGroupFanout1000: one group message (from the group, with its
// author in source) dispatched to a group of 1,000 subscribers in one
// transaction per op. members: 1,001 records (the GROUP_INBOX copy and one
// INBOX record per subscriber); group: the GROUP_INBOX record alone, which
// the subscribers read.
func BenchmarkGroupFanout1000(b *testing.B) {
	for _, d := range []model.GroupDelivery{model.DeliverToMembers, model.DeliverToGroup} {
		b.Run(string(d), func(b *testing.B) { benchGroupFanout(b, d) })
	}
}

// benchGroup makes did:group:g with n subscribers delivering d.
func benchGroup(b *testing.B, s *Service, n int, d model.GroupDelivery) (group string, members []string) {
	group = "did:group:g"
	members = make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf("did:agent:m%04d", i)
	}
	if _, err := s.SetSubscribers(context.Background(), admin, group, &wire.SubscribersRequest{Subscribers: members, Delivery: d}); err != nil {
		b.Fatal(err)
	}
	return group, members
}

func benchGroupFanout(b *testing.B, d model.GroupDelivery) {
	const subs = 1000
	s := newService(b, nil)
	ctx := context.Background()
	group, _ := benchGroup(b, s, subs, d)
	agents := subs
	if d == model.DeliverToGroup {
		agents = 0
	}
	var i int64
	for b.Loop() {
		i++
		m := &message.Message{From: group, Source: "did:agent:author", Kind: message.KindGroupMsg,
			Content: message.Content{Content: benchText(i, 100)}}
		res, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m})
		if err != nil {
			b.Fatal(err)
		}
		if res.DeliveredGroup != group || len(res.DeliveredAgents) != agents {
			b.Fatalf("group dispatch delivered to %q and %d agents, want %q and %d", res.DeliveredGroup, len(res.DeliveredAgents), group, agents)
		}
	}
	reportRate(b, float64(agents+1), "records/s")
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(s*1000/float64(b.N), "ms/op")
	}
}

// BenchmarkSync10000: a box of 10,000 records (distinct messages) read
// whole per op, by seq, in pages of 1,000. with_object=true also returns
// each record's message body (the client's usual call); with_object=false
// is the records alone, for comparison.
func BenchmarkSync10000(b *testing.B) {
	const total, page = 10_000, 1000
	s := newService(b, nil)
	ctx := context.Background()
	reader := agent("did:agent:reader")
	for i := range total {
		m := chat("did:ext:alice", []string{reader.DID}, benchText(int64(i), 100))
		if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
			b.Fatal(err)
		}
	}
	for _, withObj := range []bool{true, false} {
		b.Run(fmt.Sprintf("with_object=%t", withObj), func(b *testing.B) {
			for b.Loop() {
				n, after := 0, int64(0)
				for {
					res, err := s.Sync(ctx, reader, wire.SyncQuery{Owner: reader.DID, Box: model.Inbox,
						AfterSeq: after, Limit: page, WithObject: withObj})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Items) == 0 {
						break
					}
					if withObj && len(res.Items[0].Msg) == 0 {
						b.Fatal("sync with_object returned no body")
					}
					n += len(res.Items)
					after = res.LastSeq
				}
				if n != total {
					b.Fatalf("synced %d records, want %d", n, total)
				}
			}
			reportRate(b, total, "records/s")
		})
	}
}

// BenchmarkSyncTail: the read a box stream makes after each change, the
// newest record of a box past the stream's cursor (limit 500, one record
// found, with its body). Its cost is the call's fixed cost, not the rows'.
func BenchmarkSyncTail(b *testing.B) {
	s := newService(b, nil)
	ctx := context.Background()
	reader := agent("did:agent:reader")
	for i := range 100 {
		m := chat("did:ext:alice", []string{reader.DID}, benchText(int64(i), 100))
		if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		res, err := s.Sync(ctx, reader, wire.SyncQuery{Owner: reader.DID, Box: model.Inbox,
			AfterSeq: 99, Limit: 500, WithObject: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Items) != 1 || len(res.Items[0].Msg) == 0 {
			b.Fatalf("sync after 99 of 100: %d items", len(res.Items))
		}
	}
}

// BenchmarkGroupReceipts: the read state of a group that delivers to
// itself is a receipt per reader. Eight goroutines mark one group message
// READED as its 1,000 members, in turn.
func BenchmarkGroupReceipts(b *testing.B) {
	const subs = 1000
	s := newService(b, nil)
	ctx := context.Background()
	group, members := benchGroup(b, s, subs, model.DeliverToGroup)
	m := &message.Message{From: group, Source: "did:agent:author", Kind: message.KindGroupMsg,
		Content: message.Content{Content: benchText(0, 100)}}
	res, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(4) // 8 goroutines on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			reader := members[i%subs]
			if _, err := s.SetReadState(ctx, agent(reader), &wire.ReceiptRequest{MsgID: res.MsgID, ReaderDID: reader,
				GroupID: group, Status: model.ReceiptReaded, AtMS: i}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, 1, "receipts/s")
}
