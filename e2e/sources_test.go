package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinaryIsCurrent checks that the binary every test here runs was
// built after the last change to any source. It also makes go test's result
// cache honest for this package: the binary comes from a `go build`
// subprocess the cache cannot see, but the files this test stats are part of
// the cache key, so a changed source re-runs the package instead of
// replaying a stale "ok".
func TestBinaryIsCurrent(t *testing.T) {
	bin, err := os.Stat(binPath)
	if err != nil {
		t.Fatalf("built binary: %v", err)
	}
	n := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".sql") && name != "go.mod" && name != "go.sum" {
			return nil
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		n++
		if fi.ModTime().After(bin.ModTime()) {
			t.Errorf("%s changed after the test binary was built", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("found only %d source files above e2e/: is the test running from the repository?", n)
	}
}
