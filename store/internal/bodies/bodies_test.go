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
		c.PutIfCurrent(c.gen, fmt.Sprint("r", i), body[:512])
	}
	held := func(ms ...map[string][]byte) (total int) {
		for _, m := range ms {
			for _, b := range m {
				total += len(b)
			}
		}
		return total
	}
	if n := held(c.written); n > c.writtenLimit || n != c.writtenBytes || len(c.written) != len(c.queue)-c.head {
		t.Fatalf("written part holds %d bytes (counted %d) in %d bodies, %d queued; budget %d",
			n, c.writtenBytes, len(c.written), len(c.queue)-c.head, c.writtenLimit)
	}
	if n := held(c.cur, c.old); n > c.readLimit {
		t.Fatalf("read part holds %d bytes, budget %d", n, c.readLimit)
	}
	if _, _, ok := c.Get("999"); !ok {
		t.Fatal("the newest body was dropped")
	}
	if _, _, ok := c.Get("0"); ok {
		t.Fatal("the oldest body survived 1000 puts into a 56-body budget")
	}
	c.Put("huge", make([]byte, c.writtenLimit))
	if _, _, ok := c.Get("huge"); ok {
		t.Fatal("a body over an eighth of the budget was cached")
	}
}

// A consumer draining a backlog reads each body in the order it was
// written, once for its claim and once more for its ack: every body that
// fits in the written part is there when its claim comes, and the ack of a
// body read back finds it in the read part. A single LRU missed every claim
// of this backlog (each hit and each fill pushed out the next bodies due).
func TestBodyCacheDrainsABacklog(t *testing.T) {
	t.Parallel()
	const size = 1300 // a 1 KiB text in its message's JSON
	for _, n := range []int{10_000, 20_000} {
		c := New(DefaultBytes)
		body := make([]byte, size)
		for i := range n {
			c.Put(fmt.Sprint(i), body)
		}
		claims, acks := 0, 0
		for i := range n {
			id := fmt.Sprint(i)
			if _, gen, ok := c.Get(id); !ok {
				claims++
				c.PutIfCurrent(gen, id, body) // what the stores do after reading it
			}
			if _, _, ok := c.Get(id); !ok {
				acks++
			}
		}
		fits := min(n, c.writtenLimit/size)
		if claims != n-fits || acks != 0 {
			t.Errorf("draining %d: %d claims and %d acks missed, want %d and 0", n, claims, acks, n-fits)
		}
	}
}

// A consumer a little behind its producers: each step writes one body and
// drains the oldest, read twice. Nothing is missed while the backlog fits;
// a cache that moved a body to the back on a hit would evict the next ones
// due and miss nearly all of them.
func TestBodyCacheFollowsAProducer(t *testing.T) {
	t.Parallel()
	c := New(1 << 20)
	body := make([]byte, 1000)
	backlog := c.writtenLimit/len(body) - 100
	next, due := 0, 0
	put := func() { c.Put(fmt.Sprint(next), body); next++ }
	for range backlog {
		put()
	}
	missed := 0
	for range 20_000 {
		put()
		for range 2 {
			if _, _, ok := c.Get(fmt.Sprint(due)); !ok {
				missed++
			}
		}
		due++
	}
	if missed != 0 {
		t.Fatalf("%d of 40,000 reads missed with a backlog of %d bodies in a budget of %d", missed, backlog, c.writtenLimit/len(body))
	}
}

// The queue of written ids is compacted as it goes: its slice stays within
// a small multiple of the bodies held, however many went through.
func TestBodyCacheQueueStaysSmall(t *testing.T) {
	t.Parallel()
	c := New(64 << 10)
	body := make([]byte, 1024)
	for i := range 200_000 {
		c.Put(fmt.Sprint(i), body)
	}
	if held := len(c.written); cap(c.queue) > 4*held+16 {
		t.Fatalf("queue capacity %d for %d bodies held", cap(c.queue), held)
	}
}

// Empty bodies (a message referred to but never given) are not cached, so
// they cannot pile up at no cost to the budget; a body of the default size
// limit read back is.
func TestBodyCacheSizes(t *testing.T) {
	t.Parallel()
	c := New(DefaultBytes)
	c.Put("empty", []byte{})
	c.PutIfCurrent(c.gen, "empty2", nil)
	if found, _, _ := c.GetMany([]string{"empty", "empty2"}); len(found) != 0 {
		t.Fatalf("empty bodies cached: %q", found)
	}
	big := make([]byte, 1<<20)
	c.PutIfCurrent(c.gen, "big", big)
	if _, _, ok := c.Get("big"); !ok {
		t.Fatal("a 1 MiB body read back was not cached")
	}
	c.Put("w", []byte("W"))
	c.Put("w", []byte("W"))
	if c.writtenBytes != 1 || len(c.queue)-c.head != 1 {
		t.Fatalf("a body put twice is held as %d bytes, %d queued", c.writtenBytes, len(c.queue)-c.head)
	}
}

// A body read back often survives the turnover of other bodies read back.
func TestBodyCacheKeepsWhatIsRead(t *testing.T) {
	t.Parallel()
	c := New(16 << 10) // a read part of 2 KiB: 256-byte bodies at most
	body := make([]byte, 256)
	c.PutIfCurrent(c.gen, "hot", body)
	for i := range 100 {
		c.PutIfCurrent(c.gen, fmt.Sprint(i), body)
		if _, _, ok := c.Get("hot"); !ok {
			t.Fatalf("a body read after every fill was dropped at fill %d", i)
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
	c.Put("w", []byte("W"))
	c.PutIfCurrent(c.gen, "r", []byte("R"))
	c.ForgetAll()
	if found, _, _ := c.GetMany([]string{"w", "r"}); len(found) != 0 {
		t.Fatalf("ForgetAll kept %q", found)
	}
	c.Put("w2", []byte("W2")) // the written part works on after it
	if b, _, ok := c.Get("w2"); !ok || string(b) != "W2" {
		t.Fatalf("a put after ForgetAll: %q, %v", b, ok)
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
