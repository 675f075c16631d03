package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statistics for young tables.
//
// PostgreSQL plans with the statistics of a table's last ANALYZE. On a new
// database those describe an empty table until autovacuum's first ANALYZE,
// which comes a minute or more later (autovacuum_naptime, then 50 rows plus
// a tenth of the table changed), and meanwhile every plan is made for a
// table of a few rows. With none, a claimer's probes of an empty box
// (Claimable, NextVisible) walked records_box_seq over every record the box
// ever had instead of records_box_state over its unread ones: 3,153 pages
// and 7.5 ms per probe after 5,929 messages, against 3 pages and 0.04 ms
// once analyzed, and half of PostgreSQL's CPU under mixed load
// (docs/benchmarks.md, twenty-first round). So each node analyzes the
// schema's tables that have doubled since their last ANALYZE: a few dozen
// times over a table's life, after which autovacuum's own rule is the
// sooner. An ANALYZE also invalidates the plans that connections cached
// for the table.

const (
	// analyzeEvery is how often a node looks for grown tables: a table
	// that doubles is planned for its old size this long at most.
	analyzeEvery = 2 * time.Second
	// analyzeMin is the rows a table holds at its first ANALYZE.
	analyzeMin = 1000
	// analyzeLockWait bounds the wait for another node's ANALYZE of the
	// same table (the lock it takes conflicts with itself).
	analyzeLockWait = "100ms"
)

// sqlGrownTables lists the tables of the current schema that hold twice
// the rows they held at their last ANALYZE, or $1 rows if never analyzed
// (reltuples is -1 then). Tables that change without growing (counters,
// conversations) are left to autovacuum: analyzing them would only make
// every connection plan again the statements that write them. Only tables
// this role may analyze (its own, or its roles'): PostgreSQL would skip
// the others with a warning in its log at every look.
const sqlGrownTables = `SELECT quote_ident(t.relname) FROM pg_stat_user_tables t
	JOIN pg_class c ON c.oid = t.relid
	WHERE t.schemaname = current_schema() AND t.n_live_tup >= GREATEST($1::real, 2 * c.reltuples)
		AND pg_has_role(c.relowner, 'USAGE')
	ORDER BY t.relname`

// analyzeGrown analyzes the grown tables and returns their names. Another
// node analyzing the same table makes this run skip it; tables of another
// role are left to autovacuum.
func (s *Store) analyzeGrown(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, sqlGrownTables, analyzeMin)
	if err != nil {
		return nil, fail("list grown tables", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fail("list grown tables", err)
	}
	if len(tables) == 0 {
		return nil, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+analyzeLockWait+"'"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "ANALYZE "+strings.Join(tables, ", "))
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
		return nil, nil
	}
	if err != nil {
		return nil, fail("analyze "+strings.Join(tables, ", "), err)
	}
	return tables, nil
}
