package main

import (
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A dead letter is listed with whom it was for and why it died; a plain
// box's list has neither column.
func TestPrintRecordsShowsTargetAndLastError(t *testing.T) {
	t.Parallel()
	dead := model.Record{RecordID: "cyrec:1", State: model.Dead, Seq: 1, Delivery: model.Delivery{Attempts: 4,
		LastError: "http_500:\nboom " + strings.Repeat("x", 100)}, Route: &model.Route{TargetDID: "did:ext:carol"}}
	plain := model.Record{RecordID: "cyrec:2", State: model.Unread, Seq: 2}
	for _, tc := range []struct {
		name    string
		recs    []model.Record
		want    []string
		notWant []string
	}{
		{"dead letters", []model.Record{dead, plain}, []string{"TARGET", "LAST_ERROR", "did:ext:carol", "http_500: boom xxx"}, nil},
		{"a plain box", []model.Record{plain}, nil, []string{"TARGET", "LAST_ERROR"}},
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
