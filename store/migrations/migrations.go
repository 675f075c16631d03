// Package migrations loads a driver's embedded, numbered schema migrations
// (files NNNN_name.sql). Each driver keeps its own SQL and its own way of
// recording what ran; the naming and ordering rules are shared so that the
// two drivers' histories can be read side by side.
package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load reads every *.sql file in dir of fsys, ordered by number. The
// numbers must run 1, 2, 3… without a gap, so a missing or misnamed file
// stops the driver instead of silently skipping a step.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations must be numbered 1, 2, 3…: %s is number %d", m.Name, i+1)
		}
	}
	return out, nil
}
