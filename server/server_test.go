package server

import (
	"context"
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
