package sqlite

import "time"

// gatherLinger is how long the writer may wait for more writes before it
// runs a group smaller than recent ones.
//
// Why wait at all: a group's cost is mostly per group (a statement per
// kind of row, the log append, the overlay), not per write. Over HTTP,
// eight producers each waiting for their answer reach the writer spread
// out over their round trip, and it took them as they came: 20,000 sends
// ran in 9,513 groups, two thirds of them of one send; with the wait, in
// 4,837. Of the waits tried (100 µs to 1 ms), 300 µs did best; it took
// a tenth off the server's CPU per message and added 6-7% to enqueue and
// claim+ack (docs/benchmarks.md, sixth round).
//
// It is far below the time of one commit, and the writer waits only when
// it has just seen bigger groups (gather), so a lone writer is never
// delayed and a full group is not held back either.
const gatherLinger = 300 * time.Microsecond

// gather is the writer's decision whether to wait for more writes before
// running batch. recent is the size of recent groups, decaying by one per
// group, so a burst that ends stops the waiting within a few groups. It
// returns the batch to run; the writer goroutine only.
func (s *Store) gather(batch []*writeReq) []*writeReq {
	if len(batch) < s.recent && len(batch) < maxBatch && s.gatherLinger > 0 {
		t := time.NewTimer(s.gatherLinger)
	wait:
		for len(batch) < s.recent && len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			case <-t.C:
				break wait
			}
		}
		t.Stop()
	}
	s.recent = max(len(batch), s.recent-1)
	return batch
}
