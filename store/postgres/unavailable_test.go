package postgres_test

import (
	"errors"
	"net/url"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// TestTerminatedSessionsAreUnavailableNotInternal: when the server ends
// the store's sessions (an administrator's termination, a restart), a
// request either works (its statement never reached the server and was
// tried again on a new connection) or fails as model.ErrUnavailable, which
// the API answers 503 with Retry-After, never as an internal error.
func TestTerminatedSessionsAreUnavailableNotInternal(t *testing.T) {
	u, err := url.Parse(testURL(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("%s is not a postgres:// URL, which this test tags with an application_name", "MSGCENTER_TEST_POSTGRES_URL")
	}
	q := u.Query()
	q.Set("application_name", "msgcenter-unavailable-test")
	u.RawQuery = q.Encode()
	s, err := postgres.Open(t.Context(), u.String(), postgres.Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for round := range 3 {
		for range 4 { // sessions in the pool
			if _, err := s.GetRecord(ctx, "cyrec:0"); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("GetRecord before the termination: %v", err)
			}
		}
		var n int
		if err := adminPool(t).QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = 'msgcenter-unavailable-test'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no session of the store was found to end")
		}
		for i := range 4 {
			_, err := s.GetRecord(ctx, "cyrec:0")
			if !errors.Is(err, model.ErrNotFound) && !errors.Is(err, model.ErrUnavailable) {
				t.Fatalf("round %d, request %d after the server ended %d sessions: %v; want not found, or unavailable", round, i, n, err)
			}
		}
	}
}
