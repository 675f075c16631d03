// Package server runs one msgcenter node: it locks the data directory,
// opens the store, makes sure an admin token exists, starts the core's
// background work and serves the HTTP API until its context ends, then
// drains in-flight requests and stops cleanly.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/mcpserver"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
	"github.com/msgcenter/msgcenter/store/sqlite"
)

// Defaults of `msgcenter serve`.
const (
	DefaultDataDir = "msgcenter-data"
	DefaultListen  = "127.0.0.1:7420"
	AdminTokenFile = "admin.token"
	dbFile         = "msgcenter.db"
)

// Config configures a node.
type Config struct {
	DataDir string
	Listen  string
	// Store is "sqlite" (default: a database file under DataDir) or
	// "postgres" (PostgresURL; any number of nodes may share it).
	Store       string
	PostgresURL string
	// Durability is "normal" (default: nothing acknowledged is lost when
	// the process dies) or "full" (also survives an OS crash).
	Durability string
	Core       core.Config
	Logger     *slog.Logger
	// ShutdownTimeout bounds the drain of in-flight requests (default 30 s).
	ShutdownTimeout time.Duration
	// Ready, if set, is called with the address the node listens on.
	Ready func(addr string)
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	syncMode := "NORMAL"
	switch strings.ToLower(cfg.Durability) {
	case "", "normal":
	case "full":
		syncMode = "FULL"
	default:
		return fmt.Errorf("--durability must be normal or full, got %q", cfg.Durability)
	}
	log := cfg.Logger
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	unlock, err := LockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()

	st, err := openStore(ctx, cfg, syncMode)
	if err != nil {
		return err
	}
	defer st.Close()

	metrics := api.NewMetrics()
	cfg.Core.Metrics = metrics
	cfg.Core.Logger = log
	svc := core.New(st, cfg.Core)
	metrics.WatchService(svc)
	logRetention(log, svc.Config().Retention)
	tokenPath := filepath.Join(cfg.DataDir, AdminTokenFile)
	if err := ensureAdminToken(ctx, svc, tokenPath); err != nil {
		return err
	}
	h := api.New(svc, api.Options{Logger: log, Metrics: metrics})

	bgCtx, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = svc.Run(bgCtx) }()
	stopBackground := func() { stopBG(); wg.Wait() }
	// Take requests only once this node hears other nodes' writes (see
	// core.Service.Listening); a database that will not let us listen
	// should not keep the node down, so after a while serve anyway.
	select {
	case <-svc.Listening():
	case <-time.After(15 * time.Second):
		log.Warn("not yet listening for other nodes' changes; serving anyway (long polls fall back to periodic checks)")
	case <-ctx.Done():
		stopBackground()
		return nil
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		stopBackground()
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	addr := ln.Addr().String()
	log.Info("msgcenter listening", "addr", addr, "url", "http://"+addr, "data", cfg.DataDir, "admin_token_file", tokenPath)
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}

	fresh := &freshConns{m: map[net.Conn]struct{}{}}
	// The MCP tools over HTTP sit beside the API, not in it: they call
	// the API, on this node, with each request's own token.
	mcpHTTP := mcpserver.HTTPHandler("http://"+loopback(ln.Addr()), svc.Authenticate, log)
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == mcpserver.HTTPPath {
			mcpHTTP.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), ConnState: fresh.track}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		log.Info("shutting down: draining in-flight requests")
		h.Close()
		// Shutdown treats a connection that has not sent a request yet as
		// busy for seconds; no request has started on one, so closing it
		// after a short grace loses nothing.
		grace := time.AfterFunc(300*time.Millisecond, fresh.closeAll)
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		grace.Stop()
	}
	stopBackground()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// openStore opens the configured store driver.
func openStore(ctx context.Context, cfg Config, syncMode string) (store.Store, error) {
	switch strings.ToLower(cfg.Store) {
	case "", "sqlite":
		dbPath := filepath.Join(cfg.DataDir, dbFile)
		// SQLite gives its -wal and -shm files the database file's mode, so
		// creating it 0600 keeps messages and token hashes private even in
		// a data directory that others may list.
		if f, err := os.OpenFile(dbPath, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
			f.Close()
		}
		st, err := sqlite.Open(ctx, dbPath, sqlite.Options{Logger: cfg.Logger, Synchronous: syncMode})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		return st, nil
	case "postgres", "postgresql":
		if cfg.PostgresURL == "" {
			return nil, fmt.Errorf("--store postgres needs --postgres-url (or MSGCENTER_POSTGRES_URL)")
		}
		st, err := postgres.Open(ctx, cfg.PostgresURL, postgres.Options{Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("open PostgreSQL store: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("--store must be sqlite or postgres, got %q", cfg.Store)
}

// Migrate applies the store's pending migrations and returns how many it
// applied (`msgcenter migrate`).
func Migrate(ctx context.Context, cfg Config) (int, error) {
	switch strings.ToLower(cfg.Store) {
	case "postgres", "postgresql":
		if cfg.PostgresURL == "" {
			return 0, fmt.Errorf("--store postgres needs --postgres-url (or MSGCENTER_POSTGRES_URL)")
		}
		return postgres.Migrate(ctx, cfg.PostgresURL, postgres.Options{Logger: cfg.Logger})
	}
	if k := strings.ToLower(cfg.Store); k != "" && k != "sqlite" {
		return 0, fmt.Errorf("--store must be sqlite or postgres, got %q", cfg.Store)
	}
	// As serve does: a new data directory is made, not refused.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return 0, fmt.Errorf("data directory: %w", err)
	}
	// The data directory's lock, as serve takes it: migrating beside a
	// running server is refused with the server's pid.
	unlock, err := LockDataDir(cfg.DataDir)
	if err != nil {
		return 0, err
	}
	defer unlock()
	st, err := openStore(ctx, cfg, "NORMAL")
	if err != nil {
		return 0, err
	}
	n := 0
	if s, ok := st.(interface{ MigrationsApplied() int }); ok {
		n = s.MigrationsApplied()
	}
	return n, st.Close()
}

// ensureAdminToken creates the admin token file on first start, and makes
// sure the token in an existing file is known to the store. The file is
// written to a temporary name and renamed into place, so a crash during the
// first start never leaves an empty or partial token behind.
func ensureAdminToken(ctx context.Context, svc *core.Service, path string) error {
	b, err := os.ReadFile(path)
	switch {
	case err == nil && strings.TrimSpace(string(b)) != "":
		tok := strings.TrimSpace(string(b))
		if err := svc.EnsureToken(ctx, tok, adminIdentity()); err != nil {
			return fmt.Errorf("admin token file %s: %w (delete it to get a new one)", path, err)
		}
		return nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read admin token: %w", err)
	}
	tok := core.NewToken()
	if err := svc.EnsureToken(ctx, tok, adminIdentity()); err != nil {
		return err
	}
	if err := writeFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	return nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// freshConns tracks connections that have not sent a request yet.
type freshConns struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		f.m[c] = struct{}{}
	} else {
		delete(f.m, c)
	}
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.m {
		c.Close()
		delete(f.m, c)
	}
}

// logRetention says at start which retention policy is in force.
func logRetention(log *slog.Logger, r core.RetentionConfig) {
	keep := func(d time.Duration) string {
		if d < 0 {
			return "forever"
		}
		return d.String()
	}
	var fams []string
	for _, f := range core.Families() {
		fams = append(fams, string(f)+"="+keep(r.Terminal[f]))
	}
	log.Info("retention", "finished_records", strings.Join(fams, ","), "events", keep(r.Events),
		"interval", r.Interval.String(), "background", !r.Disabled)
}

// loopback is how this process reaches its own listener: a wildcard
// address (0.0.0.0, [::]) is no address to connect to everywhere.
func loopback(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	ip := net.IPv4(127, 0, 0, 1)
	if tcp.IP.To4() == nil {
		ip = net.IPv6loopback
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}
