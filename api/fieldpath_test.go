package api

import (
	"strings"
	"testing"
)

func TestPathAt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		at   string // the path wanted at the end of this substring's first occurrence
		want string
	}{
		{`{"routes":[{"a":1},{"priority":"high"}]}`, `"high"`, "routes[1].priority"},
		{`{"routes":[{"a":1},{"priority":"high"}]}`, `{"a":1`, "routes[0].a"},
		{`{"recipient":["x"]}`, `[`, "recipient"},
		{`{"a":{"b":[1,2,{"c":true}]}}`, `true`, "a.b[2].c"},
		{`{"a":{"b":[1,2]},"d":3}`, `3`, "d"},
		{`[5,[6,7]]`, `7`, "[1][1]"},
	} {
		off := int64(strings.Index(c.body, c.at) + len(c.at))
		if got := pathAt([]byte(c.body), off); got != c.want {
			t.Errorf("pathAt(%s, after %s) = %q, want %q", c.body, c.at, got, c.want)
		}
	}
	if got := withoutIndexes("routes[12].x[3]"); got != "routes.x" {
		t.Errorf("withoutIndexes = %q", got)
	}
}

// FuzzPathAt: any body and offset give a path or "", never a panic, and
// without its indexes a path has no brackets left.
func FuzzPathAt(f *testing.F) {
	f.Add([]byte(`{"routes":[{"a":1},{"priority":"high"}]}`), int64(37))
	f.Add([]byte(`{"recipient":["x"]}`), int64(14))
	f.Add([]byte(`[[[1]],{"":{}}]`), int64(5))
	f.Fuzz(func(t *testing.T, body []byte, off int64) {
		p := withoutIndexes(pathAt(body, off))
		if strings.ContainsAny(p, "[]") && !strings.Contains(string(body), "[") && !strings.Contains(string(body), "]") {
			t.Fatalf("path %q has brackets no key of the body has", p)
		}
	})
}
