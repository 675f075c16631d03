package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A change made whose next claim failed is answered 200 with the claim's
// error in next_error (mapped as any error is, internal details withheld);
// any other error is the request's.
func TestWriteStateResult(t *testing.T) {
	a := &API{log: slog.New(slog.DiscardHandler)}
	acked := &wire.StateResult{RecordWithMsg: wire.RecordWithMsg{Record: model.Record{RecordID: "cyrec:1", State: model.Readed}}}
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		nextErr *wire.ErrorDetail
	}{
		{"no error", nil, 200, nil},
		{"claim found the message gone", &core.NextError{Err: model.NotFound("message")}, 200,
			&wire.ErrorDetail{Code: wire.CodeNotFound, Message: "message not found"}},
		{"claim failed in the store", &core.NextError{Err: errors.New("disk on fire")}, 200,
			&wire.ErrorDetail{Code: wire.CodeInternal, Message: "internal error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := *acked
			w := httptest.NewRecorder()
			if err := a.writeStateResult(w, httptest.NewRequest("POST", "/v1/records/cyrec:1/state", nil), &res, tc.err); err != nil {
				t.Fatalf("error %v, want an answer", err)
			}
			var got wire.StateResult
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status || got.Record.State != model.Readed || (got.NextError == nil) != (tc.nextErr == nil) ||
				(got.NextError != nil && *got.NextError != *tc.nextErr) {
				t.Fatalf("status %d, body %s", w.Code, w.Body)
			}
		})
	}
	// The change itself failed: the error is the request's.
	err := a.writeStateResult(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil), nil, model.Conflict("", "x"))
	if !errors.Is(err, model.ErrConflict) {
		t.Fatalf("a failed change answered %v", err)
	}
}
