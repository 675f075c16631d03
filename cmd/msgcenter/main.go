// Command msgcenter is msgcenter's single binary: `msgcenter serve` runs the
// server, every other subcommand is a thin CLI over the Go SDK (package
// client) for operators, scripts and tunnel authors.
//
// With no flags the CLI talks to http://127.0.0.1:7420 with the admin token
// that `msgcenter serve` writes to ./msgcenter-data/admin.token, so a local
// server needs no configuration. Every command takes --json to print the
// server's JSON answer instead of a human rendering.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Ctrl-C cancels in-flight requests (box next --wait long-polls) instead
	// of leaving a claim half made.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Getenv)
	stop()
	os.Exit(code)
}

// stdio is where a run reads and writes; tests pass buffers.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// run executes one command line and returns the process exit code:
// 0 success, 1 a failed operation (API error, unreachable server), 2 a usage
// mistake (bad flag, missing argument), 130 interrupted.
func run(ctx context.Context, args []string, s stdio, getenv func(string) string) int {
	g := &globals{getenv: getenv}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	return reportError(s.err, cmd, g, err)
}
