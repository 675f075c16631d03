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
// 5-10% off the server's CPU per message and added a few per cent to
// enqueue and claim+ack (docs/benchmarks.md, sixth round).
//
// It is far below the time of one commit, and the writer waits only when
// it has just seen bigger groups (gather): a writer alone is not delayed,
// nor is a full group.
const gatherLinger = 300 * time.Microsecond

// gatherForget: a writer that sat idle this long before a write came
// forgets the groups before it. Writes that come that far apart gain
// nothing by waiting for each other.
const gatherForget = 5 * time.Millisecond

// gather is the writer's decision whether to wait for more writes before
// running batch. recent is the size of recent groups. It decays by one per
// group, so that a steady load keeps it while the writes' round trips
// scatter their arrivals, and is forgotten when the writer sat idle for
// gatherForget before batch's first write came (idle). The price of the
// slow decay: writes that keep coming, one at a time, within 5 ms of each
// other after a burst of n wait up to gatherLinger each for the next n
// groups. It returns the batch to run; the writer goroutine only.
func (s *Store) gather(batch []*writeReq, idle time.Duration) []*writeReq {
	if idle > gatherForget {
		s.recent = 0
	}
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
