package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A dead letter is listed with whom it was for and why it died; a plain
// box's list has neither column.
func TestPrintRecordsShowsTargetAndLastError(t *testing.T) {
	t.Parallel()
	dead := model.Record{RecordID: "cyrec:1", State: model.Dead, Seq: 1, Delivery: model.Delivery{Attempts: 4,
		LastError: "http_500:\nboom " + strings.Repeat("x", 100)}, Route: &model.Route{TargetDID: "did:ext:carol"}, BoxKind: model.TunnelOutbox}
	plain := model.Record{RecordID: "cyrec:2", State: model.Wait, Seq: 2, BoxKind: model.TunnelOutbox}
	inbound := model.Record{RecordID: "cyrec:3", State: model.Unread, Seq: 3, BoxKind: model.Inbox,
		Route: &model.Route{Address: "https://alice.example/reply"}}
	for _, tc := range []struct {
		name    string
		recs    []model.Record
		want    []string
		notWant []string
	}{
		{"dead letters", []model.Record{dead, plain}, []string{"TARGET", "LAST_ERROR", "did:ext:carol", "http_500: boom xxx"}, nil},
		{"a plain box", []model.Record{plain}, nil, []string{"TARGET", "LAST_ERROR"}},
		{"an inbox: a route back is no target", []model.Record{inbound}, nil, []string{"TARGET", "alice.example"}},
	} {
		var b strings.Builder
		items := make([]wire.RecordWithMsg, len(tc.recs))
		for i, r := range tc.recs {
			items[i].Record = r
		}
		if err := printRecords(&b, items); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%s: output has %q:\n%s", tc.name, w, out)
			}
		}
		if strings.Contains(out, strings.Repeat("x", 70)) {
			t.Errorf("%s: the last error is not cut:\n%s", tc.name, out)
		}
	}
}

// A stream that keeps failing the same way says so once; a new reason is
// said again.
func TestRetryNoticeOncePerReason(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	notice := retryNotice(&b)
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	notice(refused, time.Second)
	notice(refused, 2*time.Second)
	notice(errors.New("503 unavailable"), time.Second)
	if got := strings.Count(b.String(), "\n"); got != 2 || !strings.Contains(b.String(), "connection refused") || !strings.Contains(b.String(), "503") {
		t.Fatalf("notices:\n%s", b.String())
	}
}
