package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// rssWatch samples a process's resident set size (VmRSS from /proc) every
// 100 ms and keeps the peak, so a run can check the server's memory bound
// (issue 5: under 300 MiB throughout).
type rssWatch struct {
	pid  int
	peak atomic.Int64 // KiB
}

func (w *rssWatch) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if kb, err := vmRSS(w.pid); err == nil {
			for {
				old := w.peak.Load()
				if kb <= old || w.peak.CompareAndSwap(old, kb) {
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// takePeak returns the peak since the last call, in MiB, and starts over.
func (w *rssWatch) takePeak() string {
	kb := w.peak.Swap(0)
	if cur, err := vmRSS(w.pid); err == nil {
		w.peak.Store(cur)
	}
	return fmt.Sprintf("rss_peak=%.0fMiB", float64(kb)/1024)
}

func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
