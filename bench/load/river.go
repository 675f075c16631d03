package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverMaxWorkersDefault is River's worker count for the default queue
// unless MSGLOAD_RIVER_WORKERS says otherwise: the value River's own
// documentation and examples use. See README.md for why it is not
// -consumers.
const riverMaxWorkersDefault = 100

// riverTarget runs the workload against River, a PostgreSQL job queue, in
// a schema of its own per run (created and migrated by Open, dropped by
// Close), as the issue measured it: one committed insert per job, and
// River's own workers and batch completer for the rest.
//
// River pushes jobs to workers rather than letting a consumer pull them,
// so the client is started on the first ClaimAck (the enqueue phase's jobs
// wait, untouched, until then); each worker hands its job's body to a
// channel that ClaimAck receives from and returns nil, and River marks the
// job completed asynchronously. Flush waits for those completions.
type riverTarget struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	schema  string
	jobs    chan []byte
	start   sync.Once
	startEr error
	claimed atomic.Int64 // bodies handed to ClaimAck, over all phases
}

type loadArgs struct {
	Body string `json:"body"`
}

func (loadArgs) Kind() string { return "msgload" }

type loadWorker struct {
	river.WorkerDefaults[loadArgs]
	jobs chan<- []byte
}

func (w *loadWorker) Work(ctx context.Context, job *river.Job[loadArgs]) error {
	select {
	case w.jobs <- []byte(job.Args.Body):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *riverTarget) Name() string { return "river" }

func (t *riverTarget) Open(ctx context.Context, cfg Config) error {
	if cfg.PostgresURL == "" {
		return fmt.Errorf("%w: no -postgres", errSkip)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("river: -postgres: %w", err)
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 || pcfg.ConnConfig.ConnectTimeout > 5*time.Second {
		pcfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	// pgxpool's default (max(4, CPUs)) would cap the producers; give each
	// producer a connection plus room for River's notifier, fetches,
	// completer and maintenance.
	pcfg.MaxConns = int32(cfg.Producers + 10)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("%w: postgres: %v", errSkip, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("%w: postgres: %v", errSkip, err)
	}
	t.pool = pool
	t.schema = "msgload_" + cfg.Run
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{t.schema}.Sanitize()); err != nil {
		t.pool.Close()
		t.pool = nil
		return fmt.Errorf("river: create schema: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: t.schema, Logger: logger})
	if err != nil {
		t.Close()
		return fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Close()
		return fmt.Errorf("river: migrate: %w", err)
	}
	workers := cfg.Consumers
	if v := os.Getenv("MSGLOAD_RIVER_WORKERS"); v != "" {
		if workers, err = strconv.Atoi(v); err != nil || workers < 1 {
			t.Close()
			return fmt.Errorf("river: MSGLOAD_RIVER_WORKERS=%q: want a positive number", v)
		}
	} else {
		workers = max(workers, riverMaxWorkersDefault)
	}
	t.jobs = make(chan []byte)
	w := river.NewWorkers()
	if err := river.AddWorkerSafely(w, &loadWorker{jobs: t.jobs}); err != nil {
		t.Close()
		return err
	}
	t.client, err = river.NewClient(driver, &river.Config{
		Schema:  t.schema,
		Logger:  logger,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: w,
		// FetchCooldown (100ms), FetchPollInterval (1s), the completer
		// and JobTimeout (1m) are River's defaults.
	})
	if err != nil {
		t.Close()
		return fmt.Errorf("river: client: %w", err)
	}
	return nil
}

// Send inserts one job, committed before it returns (no transaction of the
// caller's: the insert is its own).
func (t *riverTarget) Send(ctx context.Context, producer int, body []byte) error {
	_, err := t.client.Insert(ctx, loadArgs{Body: string(body)}, nil)
	return err
}

func (t *riverTarget) ClaimAck(ctx context.Context, consumer int, wait time.Duration, received func([]byte)) (bool, error) {
	t.start.Do(func() { t.startEr = t.client.Start(context.Background()) })
	if t.startEr != nil {
		return false, fmt.Errorf("river: start: %w", t.startEr)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case b := <-t.jobs:
		t.claimed.Add(1)
		received(b)
		return true, nil
	case <-timer.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Flush waits until every job handed out so far is completed in the
// database: River's completer marks finished jobs completed in batches,
// after the worker has returned. n (this phase's count) is covered, as
// the jobs handed out include it.
func (t *riverTarget) Flush(ctx context.Context, n int) error {
	want := max(t.claimed.Load(), int64(n))
	q := "SELECT count(*) FROM " + pgx.Identifier{t.schema, "river_job"}.Sanitize() + " WHERE state = 'completed'"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var done int64
		if err := t.pool.QueryRow(ctx, q).Scan(&done); err != nil {
			return fmt.Errorf("river: flush: %w", err)
		}
		if done >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("river: flush: only %d of %d jobs completed after 2m", done, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (t *riverTarget) Close() error {
	if t.pool == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	if t.client != nil && t.startEr == nil {
		// A no-op for a client never started.
		if err := t.client.StopAndCancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("river: stop: %w", err))
		}
	}
	if _, err := t.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{t.schema}.Sanitize()+" CASCADE"); err != nil {
		errs = append(errs, fmt.Errorf("river: drop schema: %w", err))
	}
	t.pool.Close()
	t.pool = nil
	return errors.Join(errs...)
}
