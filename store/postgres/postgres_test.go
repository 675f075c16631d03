package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
	"github.com/msgcenter/msgcenter/store/storetest"
)

const urlEnv = "MSGCENTER_TEST_POSTGRES_URL"

const skipMsg = urlEnv + " not set: skipping PostgreSQL driver tests"

// TestMain prints the skip line on stderr too: t.Skip messages only show
// with -v, and a driver that silently tests nothing must be noticed.
func TestMain(m *testing.M) {
	if os.Getenv(urlEnv) == "" {
		fmt.Fprintln(os.Stderr, skipMsg)
	}
	os.Exit(m.Run())
}

// testURL returns the server's URL with a bounded pool per store: the suite
// opens a store per parallel subtest, and pgxpool's default (one connection
// per CPU) times the -parallel default (one test per CPU) would exhaust
// max_connections on a large machine.
func testURL(t *testing.T) string {
	t.Helper()
	raw := os.Getenv(urlEnv)
	if raw == "" {
		t.Skip(skipMsg)
	}
	if strings.Contains(raw, "pool_max_conns") {
		return raw
	}
	if u, err := url.Parse(raw); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("pool_max_conns", "4")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return raw + " pool_max_conns=4" // key=value DSN
}

var (
	adminOnce sync.Once
	admin     *pgxpool.Pool
	adminErr  error
)

// adminPool is a pool without a schema on its search_path, for creating and
// dropping test schemas.
func adminPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	// Resolve the URL first: its Skip must not run inside the Once, or the
	// Once would count as done with no pool for every later test.
	u := testURL(t)
	adminOnce.Do(func() {
		admin, adminErr = pgxpool.New(context.Background(), u)
	})
	if adminErr != nil {
		t.Fatalf("connect to %s: %v", urlEnv, adminErr)
	}
	return admin
}

// newSchema returns a fresh schema name, dropped with everything in it when
// t ends.
func newSchema(t *testing.T) string {
	t.Helper()
	pool := adminPool(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "msgc_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

func openStore(t *testing.T, schema string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), testURL(t), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestConformance runs the shared driver conformance suite against a fresh
// schema per subtest.
func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openStore(t, newSchema(t))
	})
}

func schemaVersions(t *testing.T, schema string) []int {
	t.Helper()
	rows, err := adminPool(t).Query(t.Context(),
		"SELECT version FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" ORDER BY version")
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return vs
}

// Migrate applies every migration once; a node refuses a database whose
// schema is newer than it knows, with a message that says what to do.
func TestMigrateVersionGuard(t *testing.T) {
	u := testURL(t)
	schema := newSchema(t)
	ctx := t.Context()
	opts := postgres.Options{Schema: schema}

	n, err := postgres.Migrate(ctx, u, opts)
	if err != nil || n < 1 {
		t.Fatalf("Migrate on an empty schema = %d, %v; want ≥ 1 applied", n, err)
	}
	known := n
	if n, err := postgres.Migrate(ctx, u, opts); err != nil || n != 0 {
		t.Fatalf("second Migrate = %d, %v; want 0, nil", n, err)
	}
	if vs := schemaVersions(t, schema); len(vs) != known || vs[0] != 1 || vs[len(vs)-1] != known {
		t.Fatalf("schema_migrations = %v, want 1..%d", vs, known)
	}
	openStore(t, schema) // an up-to-date schema opens

	newer := known + 7
	if _, err := adminPool(t).Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+
		" (version, name) VALUES ($1, 'from_the_future.sql')", newer); err != nil {
		t.Fatalf("insert future version: %v", err)
	}
	want := fmt.Sprintf("database schema version %d is newer than this msgcenter (knows %d); upgrade msgcenter", newer, known)
	if s, err := postgres.Open(ctx, u, opts); err == nil || !strings.Contains(err.Error(), want) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open on a newer schema: err = %v; want one containing %q", err, want)
	}
	if _, err := postgres.Migrate(ctx, u, opts); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Migrate on a newer schema: err = %v; want one containing %q", err, want)
	}
}

// Several nodes starting at once against an empty database: all open, and
// each migration is applied exactly once.
func TestConcurrentOpen(t *testing.T) {
	u := testURL(t)
	schema := newSchema(t)
	const nodes = 3
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, nodes)
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(t.Context(), u, postgres.Options{Schema: schema})
		})
	}
	wg.Wait()
	for i := range nodes {
		if errs[i] != nil {
			t.Errorf("Open #%d: %v", i, errs[i])
			continue
		}
		stores[i].Close()
	}
	if t.Failed() {
		return
	}
	vs := schemaVersions(t, schema)
	for i, v := range vs {
		if v != i+1 {
			t.Fatalf("schema_migrations = %v; want each version once, 1..n", vs)
		}
	}
	if len(vs) == 0 {
		t.Fatal("schema_migrations is empty after Open")
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	_, err := postgres.Open(ctx, "postgres://user:s3cret@127.0.0.1:notaport/db", postgres.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open(bad URL) = %v; want an error that does not echo the password", err)
	}
}
