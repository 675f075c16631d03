package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migrations are numbered files NNNN_name.sql, applied in order. The
// database's PRAGMA user_version is the number of the last one applied, so
// no bookkeeping table is needed and the version travels with the file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlite: migration %s: name must start with a positive number and '_'", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("sqlite: migrations must be numbered 1, 2, 3…: %s is number %d", m.name, i+1)
		}
	}
	return out, nil
}

// migrate brings the schema up to date in one transaction: a crash halfway
// leaves the database at its old version, never between two.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	latest := len(ms)
	return s.write(ctx, func(tx *sql.Tx) error {
		var cur int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
			return fmt.Errorf("sqlite: read schema version: %w", err)
		}
		if cur > latest {
			return fmt.Errorf("sqlite: database schema version %d is newer than this msgcenter (knows %d); upgrade msgcenter", cur, latest)
		}
		for _, m := range ms[cur:] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
			}
			s.log.Info("sqlite: applied migration", "migration", m.name)
		}
		if cur == latest {
			return nil
		}
		// PRAGMA takes no bound parameters; latest is our own integer.
		if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(latest)); err != nil {
			return fmt.Errorf("sqlite: set schema version: %w", err)
		}
		return nil
	})
}
