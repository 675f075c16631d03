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

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 on every architecture it exports it to user space for.
const userHZ = 100

// cpuTime returns the CPU time (user + system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime + stime from the text of /proc/PID/stat.
func parseStatCPU(b []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start at the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/PID/stat without a command name: %.40q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat with %d fields after the command name, want 13 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime (fields 14 and 15)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuNote says how much CPU the server used for a phase of n messages.
func cpuNote(pid int, before time.Duration, n int) string {
	after, err := cpuTime(pid)
	if err != nil || n == 0 {
		return ""
	}
	d := after - before
	return fmt.Sprintf("server_cpu=%.1fs (%.0fµs/msg)", d.Seconds(), float64(d.Microseconds())/float64(n))
}
