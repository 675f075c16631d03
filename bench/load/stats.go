package main

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// pct returns the p-th percentile (0..100), nearest rank.
func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (l *latencies) String() string {
	return fmt.Sprintf("p50=%s p99=%s p999=%s", ms(l.pct(50)), ms(l.pct(99)), ms(l.pct(99.9)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

// result is one phase of one target.
type result struct {
	target, phase string
	n             int
	elapsed       time.Duration
	lat           *latencies
	skipped       string
	note          string // e.g. the server's peak RSS during the phase
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}
