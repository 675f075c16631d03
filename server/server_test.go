package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/store/sqlite"
)

// An admin token file left empty by a crash during the first start is
// replaced, not fatal; an existing token is kept and registered.
func TestEnsureAdminToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := core.New(st, core.Config{})
	path := filepath.Join(dir, AdminTokenFile)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ensureAdminToken(ctx, svc, path); err != nil {
		t.Fatalf("empty token file: %v", err)
	}
	b, _ := os.ReadFile(path)
	tok := strings.TrimSpace(string(b))
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 || !strings.HasPrefix(tok, "mct_") {
		t.Fatalf("token file %q mode %v", tok, fi.Mode())
	}
	if id, err := svc.Authenticate(ctx, tok); err != nil || id.DID != core.AdminDID {
		t.Fatalf("new admin token does not authenticate: %v %v", id, err)
	}
	if err := ensureAdminToken(ctx, svc, path); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Fatal("existing token was replaced")
	}
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ensureAdminToken(ctx, svc, path); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("garbage token file: %v", err)
	}
}

// A second lock on a locked data directory fails and names the holder.
func TestLockDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unlock, err := LockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDataDir(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock2, err := LockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

// TestMigrate: a new data directory is made and every migration applied,
// and says so; a second run applies none; an unknown store is refused
// before anything is made.
func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "new")
	n, err := Migrate(t.Context(), Config{DataDir: dir})
	if err != nil || n == 0 {
		t.Fatalf("first migrate: %d, %v", n, err)
	}
	if n, err = Migrate(t.Context(), Config{DataDir: dir}); err != nil || n != 0 {
		t.Fatalf("second migrate: %d, %v", n, err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if _, err := Migrate(t.Context(), Config{DataDir: other, Store: "mysql"}); err == nil || !strings.Contains(err.Error(), "--store must be sqlite or postgres") {
		t.Fatalf("unknown store: %v", err)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unknown store made its directory: %v", err)
	}
}
