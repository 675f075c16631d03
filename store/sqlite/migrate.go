package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/msgcenter/msgcenter/store/migrations"
)

// Migrations are numbered files NNNN_name.sql, applied in order. The
// database's PRAGMA user_version is the number of the last one applied, so
// no bookkeeping table is needed and the version travels with the file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

func loadMigrations() ([]migrations.Migration, error) {
	ms, err := migrations.Load(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return ms, nil
}

// migrate brings the schema up to date in one transaction: a crash halfway
// leaves the database at its old version, never between two.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	latest := len(ms)
	// A migration that rebuilds tables sorts every row for each index it
	// builds. The writer keeps temporary data in memory (temp_store, right
	// for its own small sorts), which for 0005 on 2 million records took
	// the process to 1 GiB; so while migrations run, sorts spill to
	// temporary files (SQLite's: SQLITE_TMPDIR, TMPDIR, else /var/tmp).
	if err := s.tempStore(ctx, "FILE"); err != nil {
		return err
	}
	defer s.tempStore(ctx, "MEMORY")
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		s.applied = 0
		var cur int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
			return fmt.Errorf("sqlite: read schema version: %w", err)
		}
		if cur > latest {
			return fmt.Errorf("sqlite: database schema version %d is newer than this msgcenter (knows %d); upgrade msgcenter", cur, latest)
		}
		for _, m := range ms[cur:] {
			// Some migrations rebuild tables (0005: about 35 s per
			// million records): say so before, not only after.
			start := time.Now()
			if cur > 0 {
				s.log.Info("sqlite: applying migration", "migration", m.Name)
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("sqlite: migration %s: %w", m.Name, err)
			}
			s.log.Info("sqlite: applied migration", "migration", m.Name, "took", time.Since(start).Round(time.Millisecond))
		}
		if cur == latest {
			return nil
		}
		s.applied = latest - cur
		// PRAGMA takes no bound parameters; latest is our own integer.
		if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(latest)); err != nil {
			return fmt.Errorf("sqlite: set schema version: %w", err)
		}
		return nil
	})
}

// MigrationsApplied is how many migrations Open applied to the file.
func (s *Store) MigrationsApplied() int { return s.applied }

// tempStore sets the writer's temp_store between transactions (SQLite
// refuses to change it inside one).
func (s *Store) tempStore(ctx context.Context, mode string) error {
	return s.submit(ctx, &writeReq{ctx: ctx, done: make(chan error, 1), ctl: func() error {
		// mode is one of our own constants: PRAGMA takes no parameters.
		if _, err := s.w.ExecContext(ctx, "PRAGMA temp_store = "+mode); err != nil {
			return fmt.Errorf("sqlite: temp_store %s: %w", mode, err)
		}
		return nil
	}})
}
