package lookup

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A fill that read the database before a write committed must not put the
// old answer back after the write forgot the key.
func TestFillAfterForgetIsDropped(t *testing.T) {
	t.Parallel()
	var c Cache[bool]
	_, gen, ok := c.Get("k")
	if ok {
		t.Fatal("empty cache had k")
	}
	c.Forget("k") // the write commits while the reader is in the database
	c.Put(gen, "k", false)
	if _, _, ok := c.Get("k"); ok {
		t.Fatal("a fill older than the forget was kept")
	}
	_, gen, _ = c.Get("k")
	c.Put(gen, "k", true)
	if v, _, ok := c.Get("k"); !ok || !v {
		t.Fatalf("current fill: got %v, %v; want true, true", v, ok)
	}
}

func TestBounded(t *testing.T) {
	t.Parallel()
	var c Cache[int]
	for i := range Max + 10 {
		_, gen, _ := c.Get("")
		c.Put(gen, fmt.Sprint(i), i)
	}
	if n := len(c.m); n > Max {
		t.Fatalf("cache holds %d entries, bound is %d", n, Max)
	}
	if v, _, ok := c.Get(fmt.Sprint(Max + 9)); !ok || v != Max+9 {
		t.Fatal("the newest entry is gone")
	}
}

// With a TTL an answer is kept for that long and no longer, also when the
// clock steps back; GetMany follows the same rule.
func TestTTL(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	c := Cache[string]{TTL: 5 * time.Second, Now: func() time.Time { return now }}
	_, gen, _ := c.Get("k")
	c.Put(gen, "k", "v")
	at := now
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {5*time.Second - time.Nanosecond, true}, {5 * time.Second, false}, {-time.Hour, false}} {
		now = at.Add(tc.after)
		if _, _, ok := c.Get("k"); ok != tc.want {
			t.Fatalf("%v after the fill: cached = %v, want %v", tc.after, ok, tc.want)
		}
		if _, missing, _ := c.GetMany([]string{"k"}); (len(missing) == 0) != tc.want {
			t.Fatalf("%v after the fill: GetMany missing %v, want cached = %v", tc.after, missing, tc.want)
		}
	}
}

// Remember keeps answers, not errors.
func TestRemember(t *testing.T) {
	t.Parallel()
	var c Cache[int]
	fills := 0
	fill := func(v int, err error) func() (int, error) {
		return func() (int, error) { fills++; return v, err }
	}
	notFound := errors.New("not found")
	for range 2 {
		if _, err := Remember(&c, "missing", fill(0, notFound)); !errors.Is(err, notFound) {
			t.Fatalf("err = %v", err)
		}
	}
	for range 2 {
		if v, err := Remember(&c, "k", fill(7, nil)); err != nil || v != 7 {
			t.Fatalf("Remember = %v, %v", v, err)
		}
	}
	if fills != 3 {
		t.Fatalf("%d fills, want 3: two for the error, one for the answer", fills)
	}
}
