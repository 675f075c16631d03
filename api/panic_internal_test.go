package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A handler that panics is answered as any internal error is (500, the
// JSON body, the details only in the log); one that had begun its answer
// has its connection dropped.
func TestWrapRecoversPanic(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	a := &API{log: slog.New(slog.NewTextHandler(&logged, nil))}
	rt := func(h handlerFunc) http.Handler {
		return a.wrap(route{Route: Route{Method: "POST", Pattern: "/v1/x", AnyQuery: true}, public: true, h: h})
	}

	rec := httptest.NewRecorder()
	rt(func(http.ResponseWriter, *http.Request, model.Identity) error { panic("secret detail") }).
		ServeHTTP(rec, httptest.NewRequest("POST", "/v1/x", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500: %s", rec.Code, rec.Body)
	}
	var body wire.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != wire.CodeInternal {
		t.Fatalf("body %s (%v), want the internal error", rec.Body, err)
	}
	if strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("the panic's value reached the client: %s", rec.Body)
	}
	if !strings.Contains(logged.String(), "secret detail") || !strings.Contains(logged.String(), "panic_internal_test.go") {
		t.Errorf("the log lacks the panic or its stack: %s", logged.String())
	}

	started := rt(func(w http.ResponseWriter, _ *http.Request, _ model.Identity) error {
		w.WriteHeader(http.StatusOK)
		panic("mid-answer")
	})
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Fatalf("a panic after the answer began: recovered %v, want http.ErrAbortHandler", p)
		}
	}()
	started.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/x", nil))
	t.Fatal("the panic after the answer began was swallowed")
}
