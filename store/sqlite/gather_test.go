package sqlite

import (
	"testing"
	"time"
)

// TestGather: the writer waits for more writes only after bigger groups,
// stops waiting once the group is as big as recent ones, and forgets a
// burst within a few groups, or at once after sitting idle. The waits are
// an hour long, so a wait that should not happen is caught by the guard
// (a hang detector, not a timing measurement).
func TestGather(t *testing.T) {
	t.Parallel()
	req := func() *writeReq { return &writeReq{} }
	gather := func(t *testing.T, s *Store, batch []*writeReq, idle time.Duration) []*writeReq {
		t.Helper()
		got := make(chan []*writeReq, 1)
		go func() { got <- s.gather(batch, idle) }()
		select {
		case b := <-got:
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("gather waited where it should not (or past its linger)")
			return nil
		}
	}

	t.Run("a lone writer does not wait", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: 1}
		if got := gather(t, s, []*writeReq{req()}, 0); len(got) != 1 {
			t.Fatalf("group of %d, want 1", len(got))
		}
		if s.recent != 1 {
			t.Fatalf("recent = %d, want 1", s.recent)
		}
	})

	t.Run("after bigger groups it waits for as many", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: 4}
		go func() {
			for range 3 {
				s.reqs <- req()
			}
		}()
		if got := gather(t, s, []*writeReq{req()}, 0); len(got) != 4 {
			t.Fatalf("group of %d, want the 4 recent groups had", len(got))
		}
		if s.recent != 4 {
			t.Fatalf("recent = %d, want 4", s.recent)
		}
	})

	t.Run("a full group does not wait", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: maxBatch + 5}
		if got := gather(t, s, make([]*writeReq, maxBatch), 0); len(got) != maxBatch {
			t.Fatalf("group of %d, want %d", len(got), maxBatch)
		}
	})

	t.Run("after sitting idle it does not wait", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: maxBatch}
		if got := gather(t, s, []*writeReq{req()}, 2*time.Hour); len(got) != 1 {
			t.Fatalf("group of %d, want 1", len(got))
		}
		if s.recent != 1 {
			t.Fatalf("recent = %d, want 1: the burst is forgotten", s.recent)
		}
	})

	t.Run("a short pause keeps the recent groups", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Millisecond, recent: 6}
		if got := gather(t, s, []*writeReq{req()}, gatherForget/2); len(got) != 1 || s.recent != 5 {
			t.Fatalf("group of %d, recent %d; want 1 and 5", len(got), s.recent)
		}
	})

	t.Run("the wait is bounded and a burst is forgotten", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Millisecond, recent: 4}
		for want := 3; want >= 1; want-- {
			if got := gather(t, s, []*writeReq{req()}, 0); len(got) != 1 {
				t.Fatalf("group of %d, want 1", len(got))
			}
			if s.recent != want {
				t.Fatalf("recent = %d, want %d", s.recent, want)
			}
		}
	})

	t.Run("negative turns it off", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: -1, recent: 8}
		if got := gather(t, s, []*writeReq{req()}, 0); len(got) != 1 {
			t.Fatalf("group of %d, want 1", len(got))
		}
	})
}
