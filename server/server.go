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
	"strings"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/core"
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
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()

	st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, dbFile), sqlite.Options{Logger: log, Synchronous: syncMode})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	metrics := api.NewMetrics()
	cfg.Core.Metrics = metrics
	cfg.Core.Logger = log
	svc := core.New(st, cfg.Core)
	metrics.WatchService(svc)
	tokenPath := filepath.Join(cfg.DataDir, AdminTokenFile)
	if err := ensureAdminToken(ctx, svc, tokenPath); err != nil {
		return err
	}
	h := api.New(svc, api.Options{Logger: log, Metrics: metrics})

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	addr := ln.Addr().String()
	log.Info("msgcenter listening", "addr", addr, "url", "http://"+addr, "data", cfg.DataDir, "admin_token_file", tokenPath)
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}

	bgCtx, stopBG := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = svc.Run(bgCtx) }()

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		log.Info("shutting down: draining in-flight requests")
		h.Close()
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
	}
	stopBG()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// ensureAdminToken creates the admin token file on first start, and makes
// sure the token in an existing file is known to the store.
func ensureAdminToken(ctx context.Context, svc *core.Service, path string) error {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		if err := svc.EnsureToken(ctx, tok, adminIdentity()); err != nil {
			return fmt.Errorf("admin token file %s: %w", path, err)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read admin token: %w", err)
	}
	tok := core.NewToken()
	if err := svc.EnsureToken(ctx, tok, adminIdentity()); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write admin token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write admin token: %w", err)
	}
	return f.Close()
}
