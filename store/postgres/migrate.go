package postgres

import (
	"context"
	"embed"
	"fmt"
	"log/slog"

	"github.com/msgcenter/msgcenter/store/migrations"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrations are numbered files NNNN_name.sql, applied in order, each
// recorded as one row of schema_migrations. A table rather than a single
// version number so an operator can see when each step ran.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

func loadMigrations() ([]migrations.Migration, error) {
	ms, err := migrations.Load(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return ms, nil
}

// Migrate brings the database at url up to date and returns how many
// migrations it applied (0 when it already was). It is what
// `msgcenter migrate` runs, for operators who migrate before rolling out
// nodes, or whose nodes connect with a role that may not run DDL. Open
// migrates too, so calling it is never required.
func Migrate(ctx context.Context, url string, opts Options) (applied int, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := newPool(ctx, url, opts.Schema)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return migrate(ctx, pool, opts.Schema, log)
}

// migrateLockClass is the first key of the advisory lock migrations take;
// the second is a hash of the schema name, so that test stores in different
// schemas migrate in parallel while nodes sharing one schema queue.
const migrateLockClass = 0x6d736763 // "msgc"

// migrate applies pending migrations in one transaction: a crash (or a
// failing migration) leaves the database at its old version, never between
// two. Several nodes may start at once; the transaction-scoped advisory
// lock makes them take turns, and the ones that come second find nothing
// left to do. It refuses to touch a database whose schema is newer than
// this build knows: an old binary must not run against tables it does not
// understand.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, log *slog.Logger) (int, error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, err
	}
	latest := len(ms)
	var applied int
	err = retry(ctx, log, func() error {
		applied = 0
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))",
				int32(migrateLockClass), "msgcenter:"+schema); err != nil {
				return fmt.Errorf("postgres: take migration lock: %w", err)
			}
			// Existence is checked before any CREATE, because CREATE ... IF NOT
			// EXISTS still demands the CREATE privilege: a node whose role may
			// not run DDL can start once `msgcenter migrate` has run.
			if schema != "" {
				var exists bool
				if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
					schema).Scan(&exists); err != nil {
					return fmt.Errorf("postgres: look up schema %s: %w", schema, err)
				}
				if !exists {
					if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
						return fmt.Errorf("postgres: create schema %s: %w", schema, err)
					}
				}
			}
			var hasTable bool
			if err := tx.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&hasTable); err != nil {
				return fmt.Errorf("postgres: read schema version: %w", err)
			}
			if !hasTable {
				if _, err := tx.Exec(ctx, `CREATE TABLE schema_migrations (
					version    INTEGER PRIMARY KEY,
					name       TEXT NOT NULL,
					applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
					return fmt.Errorf("postgres: create schema_migrations: %w", err)
				}
			}
			var cur int
			if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&cur); err != nil {
				return fmt.Errorf("postgres: read schema version: %w", err)
			}
			if cur > latest {
				return fmt.Errorf("postgres: database schema version %d is newer than this msgcenter (knows %d); upgrade msgcenter", cur, latest)
			}
			if cur < latest {
				// A migration that rewrites a table reads all of it: let it
				// scan (newPool costs scans out for the store's queries).
				if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = on"); err != nil {
					return fmt.Errorf("postgres: allow scans for migrations: %w", err)
				}
			}
			for _, m := range ms[cur:] {
				// No arguments: pgx sends it with the simple protocol, which
				// accepts a file of several statements.
				if _, err := tx.Exec(ctx, m.SQL); err != nil {
					return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
				}
				if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
					m.Version, m.Name); err != nil {
					return fmt.Errorf("postgres: record migration %s: %w", m.Name, err)
				}
				applied++
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for _, m := range ms[latest-applied:] {
		log.Info("postgres: applied migration", "migration", m.Name, "schema", schema)
	}
	return applied, nil
}
