package sqlite

import "database/sql"

// What insertRecords can know without probing each record. Before a
// record goes in, the writer needs to know whether it exists already and
// its box's last seq; the probe answering both for every
// record was 14% of a group fan-out's insert and 8% of the writer's time
// on single sends. Two things make most of it unnecessary:
//
//   - A message the write itself stored (putMessage says so) has no
//     records yet: every record has its message stored (a body-less one
//     if need be), and retention deletes a message only once no record
//     refers to it. Nearly every send is of a new message.
//   - The writer is the only one that inserts records, which is what moves
//     a box's last seq (its highest record's, or box_seqs' after deletions), so
//     it can remember what it wrote, as long as it forgets what a rollback
//     undid.

// seqCache remembers the last seq of the boxes the writer inserted into.
// Writer goroutine only.
//
// committed holds last seqs as of the last commit; pending those given in
// the open transaction tx, merged at its commit. A transaction rolled back
// whole leaves committed true, and the next transaction finds pending
// belonging to another and ignores it (tx stays referenced, so no later
// transaction can share its address). A ROLLBACK TO leaves the open
// transaction with some of its writes and not others, so it calls forget.
type seqCache struct {
	committed map[boxKey]int64
	tx        *sql.Tx
	pending   map[boxKey]int64
}

// maxCachedSeqs bounds the boxes remembered (about 100 bytes each); past
// it the cache starts over, which costs only probes.
const maxCachedSeqs = 1 << 16

func (c *seqCache) get(tx *sql.Tx, k boxKey) (int64, bool) {
	if c.tx == tx {
		if v, ok := c.pending[k]; ok {
			return v, true
		}
	}
	v, ok := c.committed[k]
	return v, ok
}

// set notes that tx took k's last seq to v.
func (c *seqCache) set(tx *sql.Tx, k boxKey, v int64) {
	if c.tx != tx || c.pending == nil {
		c.tx, c.pending = tx, make(map[boxKey]int64)
	}
	c.pending[k] = v
}

// commit notes that tx committed.
func (c *seqCache) commit(tx *sql.Tx) {
	if c.tx != tx {
		return
	}
	if c.committed == nil || len(c.committed)+len(c.pending) > maxCachedSeqs {
		c.committed = make(map[boxKey]int64, len(c.pending))
	}
	for k, v := range c.pending {
		c.committed[k] = v
	}
	c.tx, c.pending = nil, nil
}

// forget is for a ROLLBACK TO: part of what the open transaction wrote
// was undone and part stands, so neither pending nor committed is
// certain any more. Everything is forgotten; the probes relearn it.
func (c *seqCache) forget() {
	c.committed, c.tx, c.pending = nil, nil, nil
}
