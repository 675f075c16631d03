package bodies

import (
	"bytes"
	"fmt"
	"testing"
)

func TestBodyCacheStaysWithinBudget(t *testing.T) {
	t.Parallel()
	c := New(64 << 10)
	body := bytes.Repeat([]byte("x"), 1024)
	for i := range 1000 {
		c.Put(fmt.Sprint(i), body)
	}
	total := 0
	for _, m := range []map[string][]byte{c.cur, c.old} {
		for _, b := range m {
			total += len(b)
		}
	}
	if total > c.limit {
		t.Fatalf("cache holds %d bytes, budget %d", total, c.limit)
	}
	if _, _, ok := c.Get("999"); !ok {
		t.Fatal("the newest body was dropped")
	}
	if _, _, ok := c.Get("0"); ok {
		t.Fatal("the oldest body survived 1000 puts into a 64-body budget")
	}
	c.Put("huge", make([]byte, c.limit))
	if _, _, ok := c.Get("huge"); ok {
		t.Fatal("a body over an eighth of the budget was cached")
	}
}

// A hit in the old generation moves the body to the new one, so a body
// read often survives turnover.
func TestBodyCacheKeepsWhatIsRead(t *testing.T) {
	t.Parallel()
	c := New(16 << 10)
	body := make([]byte, 1024)
	c.Put("hot", body)
	for i := range 100 {
		c.Put(fmt.Sprint(i), body)
		if _, _, ok := c.Get("hot"); !ok {
			t.Fatalf("a body read after every put was dropped at put %d", i)
		}
	}
}

func TestBodyCacheFillAfterForgetIsDropped(t *testing.T) {
	t.Parallel()
	c := New(1 << 20)
	_, gen, _ := c.Get("m")
	c.ForgetAll() // retention deleted bodies while the reader was in the database
	c.PutIfCurrent(gen, "m", []byte("old"))
	if _, _, ok := c.Get("m"); ok {
		t.Fatal("a body read before retention deleted it was cached after")
	}
}

// GetMany answers what Get would, id by id, and its generation guards a
// fill as Get's does.
func TestBodyCacheGetMany(t *testing.T) {
	t.Parallel()
	c := New(64 << 10)
	c.Put("a", []byte("A"))
	c.Put("c", []byte("C"))
	found, missing, gen := c.GetMany([]string{"a", "b", "c", "d"})
	if len(found) != 2 || string(found["a"]) != "A" || string(found["c"]) != "C" {
		t.Fatalf("found %q", found)
	}
	if len(missing) != 2 || missing[0] != "b" || missing[1] != "d" {
		t.Fatalf("missing %q, want [b d]", missing)
	}
	c.ForgetAll()
	c.PutIfCurrent(gen, "b", []byte("B"))
	if _, _, ok := c.Get("b"); ok {
		t.Fatal("a fill from before ForgetAll was kept")
	}
}
