// Package sqlite is the embedded store.Store driver: one SQLite database
// file in WAL mode, no server, no cgo (modernc.org/sqlite).
//
// Concurrency model: SQLite allows one writer at a time, so the driver owns
// exactly one writer connection and queues every write transaction on it in
// the process, instead of letting several connections fight over the write
// lock with SQLITE_BUSY. Write transactions begin IMMEDIATE so that another
// process on the same file (the CLI, a second server by mistake) waits on
// busy_timeout up front rather than deadlocking on a read-to-write upgrade.
// Reads go to a separate pool of query_only connections; in WAL mode they
// see the last committed state and never wait for the writer.
//
// Durability: a send is acknowledged once its plan is in the apply log
// (applylog.go), everything else once committed. WAL with
// synchronous=NORMAL and a log written without fsync survive a process
// crash (kill -9) without losing an acknowledged write; only an OS crash
// or power loss can lose the last ones. Options.Synchronous = "FULL"
// closes that gap: the log is fsynced before a send is answered (once per
// group), and each commit fsyncs the WAL.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/internal/bodies"
)

var _ store.Store = (*Store)(nil)

// Options tune Open.
type Options struct {
	// Logger receives migration and shutdown messages; nil discards them.
	Logger *slog.Logger
	// Synchronous is SQLite's synchronous setting for the writer: "NORMAL"
	// (the default) or "FULL".
	Synchronous string

	// linger overrides commitEvery. Tests that look at writes not yet
	// committed set it long, so a slow machine cannot commit under them.
	linger time.Duration
	// gatherLinger overrides gatherLinger (gather.go); negative turns the
	// waiting off.
	gatherLinger time.Duration
}

// Store is a store.Store on one SQLite file. It is safe for concurrent use.
type Store struct {
	w   *sql.DB // exactly one connection: all writes queue here
	r   *sql.DB // read-only pool
	log *slog.Logger
	st  stmts
	// applied is how many migrations Open applied (MigrationsApplied).
	applied int

	reqs      chan *writeReq // to writeLoop
	quit      chan struct{}  // closed by Close
	loopDone  chan struct{}  // closed when writeLoop has returned
	closeOnce sync.Once
	closeErr  error
	onGroup   func(size int) // test hook: called by the writer before each group
	linger    time.Duration  // how long logged writes may stay uncommitted (commitEvery)
	deferred  []recordSet    // Apply's records, inserted before the commit (writer goroutine only)
	seqs      seqCache       // boxes' last seqs the writer gave (seqcache.go; writer goroutine only)
	// gatherLinger and recent: how the writer waits for more writes
	// (gather.go); recent is the writer goroutine's only.
	gatherLinger time.Duration
	recent       int

	// The apply log and the writer's open transaction (commit.go).
	applyLog    *applyLog       // nil until Open has replayed it
	pt          pendingTx       // writer goroutine only
	logOff      bool            // the log failed for good: commit every write (writer goroutine only)
	uncommitted atomic.Bool     // answered writes wait for a commit: readers settle first
	barrier     chan chan error // readers ask the writer to commit
	overlay     overlay         // records changed by logged writes no commit covers yet
	broken      atomic.Pointer[error]
	abandon     atomic.Bool // test hook: stop the writer as a crash would, without committing

	rstmts sync.Map // query text → *sql.Stmt on the read pool
	lk     lookups  // in-memory answers to the hot lookups (lookups.go)
	bodies *bodies.Cache

	ck     *sql.DB       // the checkpointer's own connection
	ckKick chan struct{} // the writer asks for a checkpoint
	// ckRestart: the checkpointer asks the writer to restart the WAL (see
	// checkpoint.go).
	ckRestart chan struct{}
	ckDone    chan struct{} // closed when checkpointLoop has returned
	sinceCk   int           // commits since the last kick (writer goroutine only)
	// ckEvery is how many commits make a kick: up to ckEveryCommits,
	// fewer while commits are large (nextCkEvery). The checkpointer sets
	// it.
	ckEvery atomic.Int64
}

// busyTimeoutMS bounds how long a connection waits for a lock held by
// another process (or a checkpoint) before failing with SQLITE_BUSY.
const busyTimeoutMS = 10000

// Open opens (creating if missing) the database at path, applies pending
// migrations and prepares the hot statements.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	syncMode := strings.ToUpper(strings.TrimSpace(opts.Synchronous))
	switch syncMode {
	case "":
		syncMode = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("sqlite: synchronous must be NORMAL or FULL, not %q", opts.Synchronous)
	}
	// SQLite's own error for a missing directory is "unable to open
	// database file", which does not say what to fix.
	if dir := filepath.Dir(path); dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("sqlite: directory %s does not exist or is not a directory", dir)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The log's lock comes first: a second Store on a live database must be
	// refused before it touches anything (applylog.go).
	alog, err := openApplyLog(path+logFileSuffix, syncMode == "FULL")
	if err != nil {
		return nil, err
	}

	w, err := sql.Open("sqlite", dsn(path,
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous("+syncMode+")",
		// A small page cache for the writer, measured: SQLite walks the
		// cache's whole hash table at the end of every write transaction
		// (pcache1Truncate), which at 32 MiB took 11% of the server's CPU
		// under load; 4 MiB gave +25-40% on concurrent dispatch, and the
		// pages it drops are in the OS page cache anyway.
		"_pragma=cache_size(-4000)",
		// A transaction that dirties more pages than that (a fan-out to
		// thousands) keeps up to 32 MiB of them in memory until its commit
		// rather than spilling them into the WAL and rewriting those frames
		// at commit (walRewriteChecksums): 5% on GroupFanout1000. Bounded,
		// so that a fan-out to a huge group cannot take unbounded memory.
		"_pragma=cache_spill(8192)",
		"_pragma=temp_store(MEMORY)",
		// Keep the WAL file from staying huge after a burst.
		"_pragma=journal_size_limit(67108864)",
		// Checkpoints run on their own connection (checkpoint.go), not
		// inside whichever request's commit crosses the threshold.
		"_pragma=wal_autocheckpoint(0)",
		"_txlock=immediate",
	))
	if err != nil {
		alog.close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	// Every field the writer goroutine reads is set before it starts.
	linger := opts.linger
	if linger <= 0 {
		linger = commitEvery
	}
	gl := opts.gatherLinger
	if gl == 0 {
		gl = gatherLinger
	}
	s := &Store{w: w, log: log, linger: linger, gatherLinger: gl, reqs: make(chan *writeReq), quit: make(chan struct{}),
		loopDone: make(chan struct{}), bodies: bodies.New(bodies.DefaultBytes), ckKick: make(chan struct{}, 1),
		ckRestart: make(chan struct{}, 1), barrier: make(chan chan error)}
	s.ckEvery.Store(ckFirstCommits)
	go s.writeLoop()
	opened := false
	defer func() {
		if !opened {
			s.stopLoop()
			s.st.close()
			for _, db := range []*sql.DB{s.r, s.ck, w} {
				if db != nil {
					db.Close()
				}
			}
			alog.close()
		}
	}()
	// Migrate before the read pool exists: the writer's first connection is
	// what switches a new file to WAL, and readers must not see a
	// half-migrated schema.
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}

	r, err := sql.Open("sqlite", dsn(path,
		"_pragma=query_only(1)",
		"_pragma=cache_size(-8000)",
		"_pragma=temp_store(MEMORY)",
	))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	s.r = r

	if err := s.st.prepare(ctx, w, r); err != nil {
		return nil, err
	}
	// Writes acknowledged before the last stop that no commit covers,
	// applied by the writer goroutine before anything else.
	ctl := &writeReq{ctx: ctx, done: make(chan error, 1), ctl: func() error { return s.recoverLog(ctx, alog) }}
	if err := s.submit(ctx, ctl); err != nil {
		return nil, err
	}
	ck, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	s.ck, s.ckDone = ck, make(chan struct{})
	go s.checkpointLoop()
	opened = true
	return s, nil
}

// dsn builds a modernc file: URI. The path is escaped because SQLite parses
// it as a URI: a literal '?', '#' or '%' in a directory name would
// otherwise cut it short.
func dsn(path string, params ...string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	q := append([]string{"_pragma=busy_timeout(" + fmt.Sprint(busyTimeoutMS) + ")"}, params...)
	for i, p := range q {
		k, v, _ := strings.Cut(p, "=")
		q[i] = k + "=" + url.QueryEscape(v)
	}
	return "file:" + esc + "?" + strings.Join(q, "&")
}

// Close waits for the write in progress, fails writes still queued, and
// releases the statements and both pools. It runs PRAGMA optimize first, as
// SQLite recommends for long-lived connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopLoop() // commits what the log holds (commit.go)
		<-s.ckDone
		if _, err := s.w.Exec("PRAGMA optimize"); err != nil {
			s.log.Warn("sqlite: optimize on close failed", "err", err)
		}
		s.st.close()
		s.rstmts.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
		s.closeErr = errors.Join(s.r.Close(), s.ck.Close(), s.w.Close(), s.applyLog.close())
	})
	return s.closeErr
}

func (s *Store) stopLoop() {
	close(s.quit)
	<-s.loopDone
}

// read runs fn in one read transaction, for reads made of several queries
// that must see the same snapshot.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.settle(ctx); err != nil {
		return err
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to lose
	return fn(tx)
}

// readStmt returns the read pool's prepared statement for q, preparing it
// on first use. The reads are a small, fixed set of texts (filters only
// switch between a few variants), and parsing them on every call cost about
// an eighth of a dispatch's CPU.
func (s *Store) readStmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if v, ok := s.rstmts.Load(q); ok {
		return v.(*sql.Stmt), nil
	}
	st, err := s.r.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if v, loaded := s.rstmts.LoadOrStore(q, st); loaded {
		st.Close()
		return v.(*sql.Stmt), nil
	}
	return st, nil
}

// query runs a read through the statement cache.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	return s.queryCommitted(ctx, q, args...)
}

// queryCommitted is query without settle: it sees only what is committed,
// for reads whose callers look in the overlay first.
func (s *Store) queryCommitted(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// Reads of the contact tables (groups, group_subscribers, blocks, routes,
// tokens) skip settle. No logged write touches them: they change only in
// writes answered after their commit (commit.go), so what is committed
// already holds every such write that was answered. Settling would instead
// commit the sends in the writer's open transaction: a dispatch to a group
// reads its subscribers first, so each fan-out committed the one before it
// and no two shared a commit (docs/benchmarks.md, fifteenth round).

// queryContacts is query for the contact tables.
func (s *Store) queryContacts(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := s.failure(); err != nil {
		return nil, err
	}
	return s.queryCommitted(ctx, q, args...)
}

// queryRowContacts is queryRow for the contact tables.
func (s *Store) queryRowContacts(ctx context.Context, q string, args ...any) rowScanner {
	if err := s.failure(); err != nil {
		return errRow{err}
	}
	return s.queryRowCommitted(ctx, q, args...)
}

// rowScanner is a *sql.Row, or a read that failed before it ran.
type rowScanner interface {
	Scan(dest ...any) error
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// queryRow runs a one-row read through the statement cache.
func (s *Store) queryRow(ctx context.Context, q string, args ...any) rowScanner {
	if err := s.settle(ctx); err != nil {
		return errRow{err}
	}
	return s.queryRowCommitted(ctx, q, args...)
}

// queryRowCommitted is queryRow without settle.
func (s *Store) queryRowCommitted(ctx context.Context, q string, args ...any) rowScanner {
	st, err := s.readStmt(ctx, q)
	if err != nil {
		return s.r.QueryRowContext(ctx, q, args...) // reports the same error
	}
	return st.QueryRowContext(ctx, args...)
}

// limitOr returns n, or def when the caller left the limit unset.
func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// defaultLimit bounds list calls that pass no limit.
const defaultLimit = 1000

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}
