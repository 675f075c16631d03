package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a parenthesis, as a process may
	// choose; utime 250 and stime 50 ticks.
	line := "4242 (msg center) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000 200\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseStatCPU = %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "4242 no parens", "4242 (short) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 ten 50 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded", bad)
		}
	}
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Fatalf("cpuTime of this process: %v", err)
	}
}
