// Package postgres is the store.Store driver for PostgreSQL (pgx/v5 with a
// connection pool), for deployments where several msgcenter nodes share one
// database. It has the same semantics as store/sqlite and passes the same
// conformance suite (store/storetest).
//
// Concurrency model: unlike SQLite there is no single writer, so every rule
// that SQLite gets from serialized writes is enforced by row locks here:
//
//   - Claims pick and take a record in one UPDATE whose subquery uses
//     FOR UPDATE SKIP LOCKED: two claimers never get the same record and
//     never wait for each other.
//   - Seqs come from a per-box counter row (box_seqs) that Apply locks for
//     the rest of its transaction, so per box, seq order is commit order
//     (see lockBoxes in records_write.go).
//   - Updates are compare-and-sets (WHERE state = From [AND lease_id = ...]),
//     and so is a consumer's advance (WHERE source_seq = From).
//   - Retention takes records and bodies FOR UPDATE SKIP LOCKED, so it never
//     waits for writers; a writer reusing a body holds that body's row lock
//     until it commits, which keeps the purge off it (see purge.go).
//   - Event ids come from a sequence, taken by transactions that commit in
//     any order; ListEvents returns only ids no transaction in flight can
//     still fill in below, which it proves with transaction ids and without
//     a lock (see events.go).
//   - Idempotency keys, message bodies and scheduled entries are unique keys
//     written with ON CONFLICT, so concurrent duplicates wait for the first
//     writer and then see its row.
//
// Transactions run at READ COMMITTED, PostgreSQL's default; every statement
// that depends on what another transaction committed takes the lock it needs
// explicitly. A deadlock between two writers (possible when an Apply and an
// Update touch the same conversation row in opposite orders) is retried.
//
// Durability is PostgreSQL's: a write is acknowledged after COMMIT returns.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/bodies"
	"github.com/msgcenter/msgcenter/store/internal/lookup"
)

var _ store.Store = (*Store)(nil)

// Options tune Open and Migrate.
type Options struct {
	// Logger receives migration messages; nil discards them.
	Logger *slog.Logger
	// Schema, when set, is the schema msgcenter's tables live in: it is
	// created if missing and put first on every connection's search_path.
	// Tests use it to give each store an isolated, disposable namespace.
	// Empty means the connection's default (usually "public").
	Schema string
}

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use, and any number of Stores (in any number of processes)
// may share one database.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// channel is the LISTEN/NOTIFY channel of this schema: notifications
	// are per database, and nodes of different schemas must not wake
	// each other.
	channel string
	// events proves which event ids are final (events.go).
	events eventHorizon
	// group batches concurrent Applys into shared transactions (group.go).
	group *grouper
	// upkeep runs the background chores (upkeep.go).
	upkeep *upkeep
	// tokens remembers the identities Token found, for tokenTTL: every
	// request names its token, and the lookup was a round trip per
	// request. Other nodes' writes cannot be heard here, so a token
	// re-bound or deleted through another node (or by hand) keeps its old
	// identity on this one for up to tokenTTL (docs/deploy.md says so).
	// PutToken through this node forgets at once; unknown tokens are not
	// remembered, so a new token works everywhere at once and guessing
	// cannot fill the memory.
	tokens lookup.Cache[model.Identity]
	// holders remembers HoldsToken's answers as tokens does identities.
	holders lookup.Cache[bool]
	// bodies remembers the message bodies this node wrote or read: a
	// claim's answer carries its body, and reading it back was a round
	// trip per claim. Bodies never change under their ids, so there is
	// nothing another node could make stale (package bodies).
	bodies *bodies.Cache
	// contacts remembers groups, routes and blocks while this node hears
	// other nodes' changes to them (lookups.go).
	contacts contacts
}

// tokenTTL is how long a node remembers a token's identity.
const tokenTTL = 5 * time.Second

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN; pgxpool's pool_* parameters are honoured), applies pending
// migrations and returns the store.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := newPool(ctx, url, opts.Schema)
	if err != nil {
		return nil, err
	}
	if _, err := migrate(ctx, pool, opts.Schema, log); err != nil {
		pool.Close()
		return nil, err
	}
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: current schema: %w", err)
	}
	s := &Store{pool: pool, log: log, channel: channelFor(schema), events: eventHorizon{wait: eventWait},
		tokens: lookup.Cache[model.Identity]{TTL: tokenTTL}, holders: lookup.Cache[bool]{TTL: tokenTTL}, bodies: bodies.New(bodies.DefaultBytes)}
	s.contacts.setClock(nil)
	s.group = newGrouper(s, groupWriters(pool.Config().MaxConns))
	s.upkeep = s.startUpkeep(s.chores())
	return s, nil
}

// newPool builds the connection pool, with search_path set when a schema
// is given.
func newPool(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message quotes the URL and redacts the password only on a
		// best-effort basis: never echo it, it may end up in logs.
		return nil, errors.New("postgres: invalid database URL: expected postgres://user[:password]@host[:port]/dbname[?param=value...] or a key=value DSN")
	}
	if schema != "" {
		// A startup parameter rather than a SET after connect: it applies to
		// every connection the pool ever opens, including after a reconnect,
		// and costs no round trip. The schema need not exist yet.
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "msgcenter"
	}
	// A plan made while a table is nearly empty reads it whole, which is
	// cheapest then; a connection's prepared statement keeps that generic
	// plan until the table's statistics change, on a new database up to
	// autovacuum's first ANALYZE a minute or more later. Meanwhile every
	// ack read the whole records table, and a queue filling from empty ran
	// at a third of its rate (docs/benchmarks.md, twenty-first round).
	// Every query here is meant to run on an index, so sequential scans are
	// costed out: a plan no longer depends on how small its tables were
	// when it was made. They still run where no index serves, and the few
	// queries that read whole tables allow them again (reading). Only
	// prepared statements keep plans: in the other exec modes (PgBouncer in
	// transaction mode needs one) every statement is planned for its
	// arguments, and a SET would outlive this session on the pooler's
	// connection. A SET after connecting, not a startup parameter, which
	// PgBouncer refuses. A URL that sets enable_seqscan wins.
	if _, set := cfg.ConnConfig.RuntimeParams["enable_seqscan"]; !set &&
		cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET enable_seqscan = off")
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	// NewWithConfig connects lazily; fail at Open, not at the first request,
	// when the server is unreachable or refuses us.
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s: %w", cfg.ConnConfig.Host, err)
	}
	return pool, nil
}

// Close releases every connection of the pool, waiting for the ones in use.
func (s *Store) Close() error {
	s.upkeep.stop()
	s.group.close()
	s.pool.Close()
	return nil
}

// maxAttempts bounds how often a transaction that lost a deadlock or a
// serialization check is run again.
const maxAttempts = 5

// retryable reports whether err is a transient conflict between concurrent
// transactions after which the whole transaction may simply run again.
func retryable(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true // the request never reached the server (a pooled connection found closed)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40P01", // deadlock_detected
		"40001": // serialization_failure
		return true
	}
	return false
}

// retry runs fn until it succeeds, fails with a non-transient error, or has
// lost maxAttempts deadlocks. fn must be a whole transaction (or a single
// autocommit statement): PostgreSQL rolled back all of it.
func retry(ctx context.Context, log *slog.Logger, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == maxAttempts || !retryable(err) {
			return err
		}
		// Rare, and worth seeing: frequent deadlocks mean a lock order to
		// fix, frequent closed connections a server that keeps ending them.
		log.Warn("postgres: retrying a transaction that lost a deadlock or serialization check, or whose connection was found closed", "attempt", attempt, "err", err)
		// A short, growing pause lets the winner of the deadlock commit.
		select {
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// inTx runs fn in one transaction, committed if fn returns nil and rolled
// back otherwise, retried as a whole on deadlock. fn may run more than once,
// so it must reset whatever it reports.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := retry(ctx, s.log, func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
	if err != nil && !errors.Is(err, model.ErrUnavailable) && unreachable(err) {
		// A BEGIN or COMMIT that could not reach the server, which fn's
		// own error wrapping (fail) never saw.
		err = fmt.Errorf("postgres: %w: %w", model.ErrUnavailable, err)
	}
	return err
}

// reading runs fn on the pool, or, when it reads a whole table, in a
// read-only transaction where sequential scans are allowed again (newPool
// costs them out): there a scan is the right plan at any size.
func (s *Store) reading(ctx context.Context, wholeTable bool, fn func(db querier) error) error {
	if !wholeTable {
		return fn(s.pool)
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = on"); err != nil {
			return err
		}
		return fn(tx)
	})
}

// querier is what pgxpool.Pool and pgx.Tx have in common for reads.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// limitOr returns n, or def when the caller left the limit unset.
func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// defaultLimit bounds list calls that pass no limit (as in store/sqlite).
const defaultLimit = 1000

// fail wraps a database error with what was being done. pgx.ErrNoRows never
// reaches callers: every method turns it into model.NotFound (or an empty
// result) before calling fail.
func fail(what string, err error) error {
	if unreachable(err) {
		return fmt.Errorf("postgres: %s: %w: %w", what, model.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

// unreachable reports whether err says the database could not be used at
// all, rather than that it refused the request: a connection that could
// not be made or was closed under the request (an administrator's
// termination, a restart, a failover), which a moment later may work.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection_exception
			pe.Code == "57P01", // admin_shutdown
			pe.Code == "57P02", // crash_shutdown
			pe.Code == "57P03": // cannot_connect_now
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}
