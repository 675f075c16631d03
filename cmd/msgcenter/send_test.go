package main

import (
	"testing"
	"time"
)

// A scheduled entry's hint says how to cancel it only while its time is
// to come: a repeat answered after it has nothing left to cancel.
func TestScheduledIDText(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		id   int64
		at   string
		want string
	}{
		{0, "", ""},
		{7, "2026-12-06T12:00:01Z", "7 (cancel with: msgcenter scheduled cancel 7)"},
		{7, "2026-12-06T12:00:00Z", "7 (its time has passed: delivered, unless it was cancelled)"},
		{7, "2026-12-06T11:59:00.5Z", "7 (its time has passed: delivered, unless it was cancelled)"},
		{7, "", "7 (cancel with: msgcenter scheduled cancel 7)"},
	} {
		if got := scheduledIDText(c.id, c.at, now); got != c.want {
			t.Errorf("scheduledIDText(%d, %q) = %q, want %q", c.id, c.at, got, c.want)
		}
	}
}
