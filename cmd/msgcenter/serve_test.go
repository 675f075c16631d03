package main

// serve and migrate: their flags, the environment and the store they pick.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve's flags come from MSGCENTER_<NAME> when not given, and a value a
// flag refuses names the variable; the flag wins over the variable.
func TestServeFlagsFromEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, nil, map[string]string{"MSGCENTER_MAX_ATTEMPTS": "x"}, "serve", "--data", dir)
	if r.code != 2 || !strings.Contains(r.stderr, `MSGCENTER_MAX_ATTEMPTS="x"`) {
		t.Fatalf("bad variable: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, map[string]string{"MSGCENTER_DEFAULT_LEASE": "100ms"}, "serve", "--data", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "--default-lease must be at least 1s") {
		t.Fatalf("variable not read: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, map[string]string{"MSGCENTER_LOG_LEVEL": "loud"}, "serve", "--data", dir, "--log-level", "chatty")
	if r.code != 2 || !strings.Contains(r.stderr, `"chatty"`) {
		t.Fatalf("the flag did not win: exit %d stderr %q", r.code, r.stderr)
	}
}

// A PostgreSQL URL with the default SQLite store is a mistake, not a node
// quietly running on a database of its own.
func TestPostgresURLWithoutPostgresStore(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"migrate"}, {"serve", "--listen", "127.0.0.1:0"}, {"migrate", "--store", "sqlite"}} {
		dir := t.TempDir()
		r := runCLI(t, nil, map[string]string{"MSGCENTER_POSTGRES_URL": "postgres://nowhere.invalid/db"}, append(args, "--data", dir)...)
		if r.code != 2 || !strings.Contains(r.stderr, "add --store postgres") {
			t.Errorf("%v with a PostgreSQL URL: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "msgcenter.db")); err == nil {
			t.Errorf("%v made an SQLite database", args)
		}
	}
}

// serve and migrate that cannot reach their PostgreSQL are told about the
// database, not about a server the CLI would talk to.
func TestUnreachablePostgresHint(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, nil, "migrate", "--store", "postgres", "--postgres-url", "postgres://postgres@127.0.0.1:1/db?connect_timeout=2", "--data", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "check --postgres-url") || strings.Contains(r.stderr, "--server") {
		t.Errorf("migrate with PostgreSQL unreachable: exit %d, stderr %q", r.code, r.stderr)
	}
}
