package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// body returns a distinct ASCII body of exactly size bytes (at least the
// key): "<run>:<i>:" then padding. Distinct bodies matter: msgcenter ids
// are content hashes, so equal bodies would be one message.
func body(run string, i int64, size int) []byte {
	k := key(run, i)
	if len(k) >= size {
		return []byte(k)
	}
	return []byte(k + strings.Repeat("x", size-len(k)))
}

func key(run string, i int64) string { return run + ":" + strconv.FormatInt(i, 10) + ":" }

// keyOf returns the key a body starts with.
func keyOf(b []byte) string {
	s := string(b)
	first := strings.IndexByte(s, ':')
	if first < 0 {
		return s
	}
	second := strings.IndexByte(s[first+1:], ':')
	if second < 0 {
		return s
	}
	return s[:first+second+2]
}

// seqs hands out message numbers across phases, so every body of a run is
// distinct.
var seqs atomic.Int64

func enqueue(ctx context.Context, t Target, cfg Config, n int) result {
	r := result{target: t.Name(), phase: "enqueue", lat: &latencies{}}
	var left atomic.Int64
	left.Store(int64(n))
	var errs errOnce
	start := time.Now()
	var wg sync.WaitGroup
	for p := range cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && errs.get() == nil {
				b := body(cfg.Run, seqs.Add(1), cfg.Size)
				t0 := time.Now()
				if err := t.Send(ctx, p, b); err != nil {
					errs.set(err)
					return
				}
				r.lat.add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r.elapsed, r.n = time.Since(start), n
	if err := errs.get(); err != nil {
		r.skipped = "error: " + err.Error()
	}
	return r
}

func claim(ctx context.Context, t Target, cfg Config, n int) result {
	r := result{target: t.Name(), phase: "claim+ack", lat: &latencies{}}
	var got atomic.Int64
	var errs errOnce
	deadline := time.Now().Add(5 * time.Minute)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range cfg.Consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(n) && errs.get() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				ok, err := t.ClaimAck(ctx, c, time.Second, func([]byte) {})
				if err != nil {
					errs.set(err)
					return
				}
				if ok {
					got.Add(1)
					r.lat.add(time.Since(t0))
				}
			}
		}()
	}
	wg.Wait()
	if rl, ok := t.(Releaser); ok {
		if err := rl.Release(ctx); err != nil {
			errs.set(err)
		}
	}
	if f, ok := t.(Flusher); ok && errs.get() == nil {
		if err := f.Flush(ctx, n); err != nil {
			errs.set(err)
		}
	}
	r.elapsed, r.n = time.Since(start), int(got.Load())
	if err := errs.get(); err != nil {
		r.skipped = "error: " + err.Error()
	} else if r.n < n {
		r.skipped = fmt.Sprintf("only %d of %d claimed within the deadline", r.n, n)
	}
	return r
}

// mixed offers rate msgs/s for d while consumers take them; latency is
// from the send's acknowledgement to the moment a consumer has the
// message. A message claimed before its producer saw the acknowledgement
// counts as 0.
func mixed(ctx context.Context, t Target, cfg Config, rate int, d time.Duration) result {
	r := result{target: t.Name(), phase: "mixed", lat: &latencies{}}
	var acked sync.Map // key -> time.Time of the send's ack
	var early sync.Map // key -> time.Time claimed before the ack was seen
	var sent, got atomic.Int64
	var errs errOnce
	start := time.Now()
	stopSend := start.Add(d)
	var prod sync.WaitGroup
	interval := time.Duration(float64(time.Second) * float64(cfg.Producers) / float64(rate))
	for p := range cfg.Producers {
		prod.Add(1)
		go func() {
			defer prod.Done()
			next := time.Now().Add(time.Duration(p) * interval / time.Duration(cfg.Producers))
			for errs.get() == nil {
				if now := time.Now(); now.Before(next) {
					time.Sleep(next.Sub(now))
				}
				if time.Now().After(stopSend) {
					return
				}
				next = next.Add(interval)
				i := seqs.Add(1)
				if err := t.Send(ctx, p, body(cfg.Run, i, cfg.Size)); err != nil {
					errs.set(err)
					return
				}
				now := time.Now()
				k := key(cfg.Run, i)
				if _, ok := early.LoadAndDelete(k); ok {
					r.lat.add(0)
				} else {
					acked.Store(k, now)
				}
				sent.Add(1)
			}
		}()
	}
	sendDone := make(chan struct{})
	go func() { prod.Wait(); close(sendDone) }()
	var cons sync.WaitGroup
	for c := range cfg.Consumers {
		cons.Add(1)
		go func() {
			defer cons.Done()
			for errs.get() == nil {
				select {
				case <-sendDone:
					if got.Load() >= sent.Load() {
						return
					}
				default:
				}
				ok, err := t.ClaimAck(ctx, c, 200*time.Millisecond, func(b []byte) {
					now := time.Now()
					k := keyOf(b)
					if v, ok := acked.LoadAndDelete(k); ok {
						r.lat.add(now.Sub(v.(time.Time)))
					} else {
						early.Store(k, now)
					}
				})
				if err != nil {
					errs.set(err)
					return
				}
				if ok {
					got.Add(1)
				}
			}
		}()
	}
	cons.Wait()
	if rl, ok := t.(Releaser); ok {
		if err := rl.Release(ctx); err != nil {
			errs.set(err)
		}
	}
	if f, ok := t.(Flusher); ok && errs.get() == nil {
		if err := f.Flush(ctx, int(got.Load())); err != nil {
			errs.set(err)
		}
	}
	r.elapsed, r.n = time.Since(start), int(got.Load())
	if err := errs.get(); err != nil {
		r.skipped = "error: " + err.Error()
	}
	return r
}

func group(ctx context.Context, t Target, cfg Config, g int, delivery string, sends int) result {
	phase := fmt.Sprintf("group/%d", g)
	if delivery == "group" {
		phase = fmt.Sprintf("group-once/%d", g)
	}
	r := result{target: t.Name(), phase: phase, lat: &latencies{}}
	gr, ok := t.(Grouper)
	if !ok {
		r.skipped = errUnsupported.Error()
		return r
	}
	// The first send sets the group up; it is not measured.
	if err := gr.SendGroup(ctx, g, delivery, body(cfg.Run, seqs.Add(1), cfg.Size)); err != nil {
		r.skipped = "error: " + err.Error()
		return r
	}
	start := time.Now()
	for range sends {
		t0 := time.Now()
		if err := gr.SendGroup(ctx, g, delivery, body(cfg.Run, seqs.Add(1), cfg.Size)); err != nil {
			r.skipped = "error: " + err.Error()
			return r
		}
		r.lat.add(time.Since(t0))
	}
	r.elapsed, r.n = time.Since(start), sends
	return r
}

// errOnce keeps the first error of many goroutines.
type errOnce struct {
	mu  sync.Mutex
	err error
}

func (e *errOnce) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *errOnce) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
