package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// The consumer scenario's clients (consumers_test.go): claimWorkers work a
// consumer's box as a queue over HTTP; wsConsumerReader reads one as a log
// over the WebSocket stream, acknowledging with ack frames.

// claimWorkers claim, finish and fail consumer records.
type claimWorkers struct {
	t     *testing.T
	ctx   context.Context
	agent []*client.Client
	byID  map[string]*consMsg
	stop  chan struct{}

	mu         sync.Mutex
	finished   map[string]model.State // record id -> the terminal state it reached
	failedOnce map[string]bool        // record id -> a retryable failure was reported
	claims     atomic.Int64
	reclaimed  atomic.Int64
}

func (w *claimWorkers) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return w.ctx.Err() != nil
	}
}

// run claims records of consumer name through node n (the other node
// while n fails) until stopped.
func (w *claimWorkers) run(name string, n int) {
	box := model.ConsumerBox(name)
	for !w.stopped() {
		got, err := w.agent[n].Next(w.ctx, consAgent, box, &wire.NextRequest{LeaseMS: 4000, WaitMS: 300, WithObject: ptr(false)})
		if err != nil {
			n = (n + 1) % len(w.agent)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if got == nil {
			continue
		}
		w.claims.Add(1)
		rec := got.Record
		m := w.byID[rec.MsgID]
		w.mu.Lock()
		prev, done := w.finished[rec.RecordID]
		w.mu.Unlock()
		if done {
			w.reclaimed.Add(1)
			w.t.Errorf("consumer %s: record seq %d (message %d) claimed again after it became %s", name, rec.Seq, m.i, prev)
		}
		res := wire.DeliveryResult{OK: true}
		if name == consUrgent {
			switch m.fate() {
			case fateDead:
				res = wire.DeliveryResult{ErrorCode: "bad_payload", ErrorMessage: "cannot handle this one"}
			case fateRetry:
				w.mu.Lock()
				first := !w.failedOnce[rec.RecordID]
				w.failedOnce[rec.RecordID] = true
				w.mu.Unlock()
				if first {
					res = wire.DeliveryResult{ErrorCode: "busy", Retryable: true}
				}
			}
		}
		w.report(n, rec, res)
	}
}

// report reports how a claimed record went, retrying (on the other node)
// until the answer arrives or the record shows the report landed or the
// lease is gone.
func (w *claimWorkers) report(n int, rec model.Record, res wire.DeliveryResult) {
	leaseID := rec.Lease.ID
	for !w.stopped() {
		out, err := w.agent[n].ReportDelivery(w.ctx, rec.RecordID, &wire.DeliveryRequest{Result: &res, LeaseID: leaseID})
		if err == nil {
			w.noteFinal(out.Record)
			return
		}
		n = (n + 1) % len(w.agent)
		got, gerr := w.agent[n].GetRecord(w.ctx, rec.RecordID, false)
		if gerr == nil && (got.Record.State != model.Reading || got.Record.Lease == nil || got.Record.Lease.ID != leaseID) {
			w.noteFinal(got.Record) // landed with its answer lost, or the lease expired
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *claimWorkers) noteFinal(r model.Record) {
	if r.State.IsTerminal() {
		w.mu.Lock()
		w.finished[r.RecordID] = r.State
		w.mu.Unlock()
	}
}

// wsConsumerReader reads a consumer's box over raw WebSockets without a
// cursor, so each connection starts after the consumer's acknowledged
// cursor; it reads a few frames, acknowledges with {"type":"ack","seq":N}
// (sometimes short of what it read), waits for {"type":"acked"} and
// reconnects, alternating nodes. Frames past the cursor come again after a
// reconnect: it checks they are the same records.
type wsConsumerReader struct {
	t      *testing.T
	ctx    context.Context
	d      *deployment
	token  string
	name   string
	byID   map[string]*consMsg
	stop   chan struct{}
	target atomic.Int64 // the box's final last seq, once known

	mu    sync.Mutex
	acked int64 // the cursor as the server confirmed it
	// unanswered are the acks sent whose answers were lost: each may
	// have landed, even after a later connection started (the node that
	// read it may commit it after the connection is cut), or not.
	unanswered map[int64]bool
	seen       map[int64]string
	sessions   int
	resumed    int // sessions whose first frame came right after a confirmed cursor above 0
}

// confirm records the cursor the server confirmed; acks at or below it
// need no answer any more. r.mu is held.
func (r *wsConsumerReader) confirm(seq int64) {
	r.acked = max(r.acked, seq)
	for a := range r.unanswered {
		if a <= r.acked {
			delete(r.unanswered, a)
		}
	}
}

func (r *wsConsumerReader) confirmed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

func (r *wsConsumerReader) run() {
	rng := rand.New(rand.NewPCG(11, 12))
	hdr := http.Header{"Authorization": {"Bearer " + r.token}}
	for n := 0; ; n++ {
		select {
		case <-r.stop:
			return
		default:
		}
		if r.ctx.Err() != nil { // (stop is closed before the context ends)
			r.t.Errorf("%s reader: gave up at cursor %d", r.name, r.confirmed())
			return
		}
		if tg := r.target.Load(); tg > 0 && r.confirmed() == tg {
			return
		}
		base := "ws" + strings.TrimPrefix(r.d.URL(n%r.d.N()), "http")
		u := fmt.Sprintf("%s/v1/boxes/%s/%s/stream", base, consAgent, model.ConsumerBox(r.name))
		c, _, err := websocket.Dial(r.ctx, u, &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the node is restarting
			continue
		}
		c.SetReadLimit(1 << 20)
		if err := r.session(c, rng); err != nil {
			r.t.Error(err)
			_ = c.CloseNow()
			return
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
}

// session is one connection. It returns an error only for a broken
// promise; a connection that fails just ends the session.
func (r *wsConsumerReader) session(c *websocket.Conn, rng *rand.Rand) error {
	type msg struct {
		b   []byte
		err error
	}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	in := make(chan msg, 64)
	go func() {
		for {
			_, b, err := c.Read(ctx)
			select {
			case in <- msg{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	r.mu.Lock()
	r.sessions++
	r.mu.Unlock()

	last := int64(-1) // the last seq this session read; -1 before the first frame
	// record takes a record frame.
	record := func(b []byte) error {
		var f wire.StreamFrame
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s reader: frame %s: %v", r.name, b, err)
		}
		m := r.byID[f.Record.MsgID]
		if m == nil || f.Seq != f.Record.Seq {
			return fmt.Errorf("%s reader: frame seq %d of record seq %d, message %s", r.name, f.Seq, f.Record.Seq, f.Record.MsgID)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if last < 0 {
			// The first frame of a connection without a cursor comes
			// right after the consumer's cursor.
			switch {
			case f.Seq == r.acked+1:
				if r.acked > 0 {
					r.resumed++
				}
			case r.unanswered[f.Seq-1]:
				r.confirm(f.Seq - 1) // a lost answer's ack did land
			default:
				return fmt.Errorf("%s reader: a connection without a cursor started at seq %d, but the cursor is %d (unanswered acks %v)",
					r.name, f.Seq, r.acked, r.unanswered)
			}
		} else if f.Seq != last+1 {
			return fmt.Errorf("%s reader: seq %d after %d: a gap or a duplicate", r.name, f.Seq, last)
		}
		if prev, ok := r.seen[f.Seq]; ok && prev != f.Record.MsgID {
			return fmt.Errorf("%s reader: seq %d was message %s, now %s", r.name, f.Seq, prev, f.Record.MsgID)
		}
		r.seen[f.Seq] = f.Record.MsgID
		last = f.Seq
		return nil
	}

	limit := 1 + rng.IntN(10)
	idle := time.NewTimer(300 * time.Millisecond)
	defer idle.Stop()
	first := int64(0)
	for read := 0; read < limit; {
		select {
		case x := <-in:
			if x.err != nil {
				return nil // cut (a kill, a restart)
			}
			if err := record(x.b); err != nil {
				return err
			}
			if first == 0 {
				first = last
			}
			read++
			idle.Reset(300 * time.Millisecond)
		case <-idle.C:
			read = limit // nothing more for now
		case <-r.stop:
			return nil
		}
	}
	// Acknowledge: usually all that was read, sometimes less; with nothing
	// read, re-acknowledge the cursor, which also tells a lost answer's
	// fate.
	r.mu.Lock()
	ack := r.acked
	r.mu.Unlock()
	if last > 0 {
		ack = last
		if rng.IntN(4) == 0 && last > first {
			ack = first + rng.Int64N(last-first)
		}
	}
	r.mu.Lock()
	if ack > r.acked {
		if r.unanswered == nil {
			r.unanswered = map[int64]bool{}
		}
		r.unanswered[ack] = true // until its answer comes
	}
	r.mu.Unlock()
	b, _ := json.Marshal(wire.StreamClientFrame{Type: wire.StreamAck, Seq: &ack})
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		return nil
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case x := <-in:
			if x.err != nil {
				return nil
			}
			var cf wire.StreamControlFrame
			if err := json.Unmarshal(x.b, &cf); err != nil {
				return fmt.Errorf("%s reader: frame %s: %v", r.name, x.b, err)
			}
			if cf.Type == "" { // a record frame meanwhile
				if err := record(x.b); err != nil {
					return err
				}
				continue
			}
			if cf.Type != wire.StreamAcked {
				return fmt.Errorf("%s reader: ack %d answered %s", r.name, ack, x.b)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			switch {
			case cf.Seq == ack:
			case cf.Seq > ack && r.unanswered[cf.Seq]:
				// An ack whose answer was lost landed, maybe after this
				// connection started: the cursor never moves back.
			default:
				return fmt.Errorf("%s reader: ack %d answered cursor %d (confirmed %d, unanswered acks %v)", r.name, ack, cf.Seq, r.acked, r.unanswered)
			}
			r.confirm(cf.Seq)
			return nil
		case <-timeout.C:
			return fmt.Errorf("%s reader: no answer to ack %d within 10s", r.name, ack)
		case <-r.stop:
			return nil
		}
	}
}
