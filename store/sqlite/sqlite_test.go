package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/sqlite"
	"github.com/msgcenter/msgcenter/store/storetest"
)

// TestConformance runs the shared driver conformance suite against a fresh
// SQLite database per subtest.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	})
}
