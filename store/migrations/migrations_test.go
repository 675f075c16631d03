package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	ok := fstest.MapFS{
		"m/0002_b.sql": {Data: []byte("B")},
		"m/0001_a.sql": {Data: []byte("A")},
		"m/readme.txt": {Data: []byte("ignored")},
	}
	got, err := Load(ok, "m")
	if err != nil || len(got) != 2 || got[0].Name != "0001_a.sql" || got[1].SQL != "B" || got[1].Version != 2 {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":        {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"unnumbered": {"m/init.sql": {}},
		"zero":       {"m/0000_a.sql": {}},
	} {
		if _, err := Load(fsys, "m"); err == nil || !strings.Contains(err.Error(), "migration") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
