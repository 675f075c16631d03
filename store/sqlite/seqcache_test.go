package sqlite

import (
	"database/sql"
	"strconv"
	"testing"

	"github.com/msgcenter/msgcenter/model"
)

// TestSeqCache walks the cache through what the writer does to it: a
// counter written in a transaction is known to that transaction, known to
// the next only once committed, and a ROLLBACK TO forgets everything
// (the probes relearn it), since part of what the transaction wrote may be
// undone.
func TestSeqCache(t *testing.T) {
	t.Parallel()
	k := boxKey{"did:x:a", model.Inbox}
	t1, t2, t3 := new(sql.Tx), new(sql.Tx), new(sql.Tx)
	var c seqCache
	want := func(step string, tx *sql.Tx, v int64, ok bool) {
		t.Helper()
		if got, gotOK := c.get(tx, k); got != v || gotOK != ok {
			t.Errorf("%s: get = %d, %v; want %d, %v", step, got, gotOK, v, ok)
		}
	}
	want("empty", t1, 0, false)
	c.set(t1, k, 5)
	want("written by t1, asked by t1", t1, 5, true)
	want("written by t1, not committed, asked by t2", t2, 0, false)
	c.commit(t2) // not the transaction that wrote: nothing to merge
	want("after another transaction's commit", t2, 0, false)
	c.commit(t1)
	want("t1 committed, asked by t2", t2, 5, true)
	c.set(t2, k, 7)
	want("t2's own write", t2, 7, true)
	want("t2's write, asked by t3 (t2 lost)", t3, 5, true)
	c.forget()
	want("after ROLLBACK TO in t2", t2, 0, false)
	c.set(t2, k, 6)
	c.commit(t2)
	want("relearned and committed", t3, 6, true)
}

// TestSeqCacheBounded: past maxCachedSeqs boxes the cache starts over
// rather than grow.
func TestSeqCacheBounded(t *testing.T) {
	t.Parallel()
	var c seqCache
	tx := new(sql.Tx)
	for i := range maxCachedSeqs + 10 {
		c.set(tx, boxKey{owner: strconv.Itoa(i), box: model.Inbox}, int64(i))
		if i%1000 == 0 {
			c.commit(tx)
		}
	}
	c.commit(tx)
	if n := len(c.committed); n > maxCachedSeqs || n == 0 {
		t.Errorf("cache holds %d boxes; want 1 to %d", n, maxCachedSeqs)
	}
	if _, ok := c.get(tx, boxKey{owner: "0", box: model.Inbox}); ok {
		t.Error("the first box written is still remembered: the cache never started over")
	}
}
