package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A store that cannot be reached is a 503 the client may retry after a
// moment, saying so, not a 500 that reads as a bug; the driver's words
// stay in the log.
func TestUnavailableStoreIs503(t *testing.T) {
	t.Parallel()
	a := &API{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h := a.wrap(route{Route: Route{Method: "GET", Pattern: "/v1/x", AnyQuery: true}, public: true,
		h: func(http.ResponseWriter, *http.Request, model.Identity) error {
			return fmt.Errorf("postgres: get record: %w: %w", model.ErrUnavailable, fmt.Errorf("FATAL: terminating connection (SQLSTATE 57P01)"))
		}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/x", nil))
	var body wire.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || body.Error.Code != wire.CodeUnavailable ||
		strings.Contains(rec.Body.String(), "SQLSTATE") {
		t.Fatalf("%d Retry-After %q %s; want 503 unavailable with Retry-After and no driver details", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}
