package sqlite

import (
	"testing"
	"time"
)

// TestGather: the writer waits for more writes only after bigger groups,
// stops waiting once the group is as big as recent ones, and forgets a
// burst within a few groups. The waits are an hour long, so a wait that
// should not happen hangs the test rather than passing it slowly.
func TestGather(t *testing.T) {
	t.Parallel()
	req := func() *writeReq { return &writeReq{} }
	arrive := func(s *Store, n int) {
		for range n {
			s.reqs <- req()
		}
	}

	t.Run("a lone writer does not wait", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: 1}
		if got := s.gather([]*writeReq{req()}); len(got) != 1 {
			t.Fatalf("group of %d, want 1", len(got))
		}
		if s.recent != 1 {
			t.Fatalf("recent = %d, want 1", s.recent)
		}
	})

	t.Run("after bigger groups it waits for as many", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: 4}
		go arrive(s, 3)
		if got := s.gather([]*writeReq{req()}); len(got) != 4 {
			t.Fatalf("group of %d, want the 4 recent groups had", len(got))
		}
		if s.recent != 4 {
			t.Fatalf("recent = %d, want 4", s.recent)
		}
	})

	t.Run("a full group does not wait", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Hour, recent: maxBatch + 5}
		batch := make([]*writeReq, maxBatch)
		if got := s.gather(batch); len(got) != maxBatch {
			t.Fatalf("group of %d, want %d", len(got), maxBatch)
		}
	})

	t.Run("the wait is bounded and a burst is forgotten", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: time.Millisecond, recent: 4}
		for want := 3; want >= 1; want-- {
			if got := s.gather([]*writeReq{req()}); len(got) != 1 {
				t.Fatalf("group of %d, want 1", len(got))
			}
			if s.recent != want {
				t.Fatalf("recent = %d, want %d", s.recent, want)
			}
		}
	})

	t.Run("negative turns it off", func(t *testing.T) {
		s := &Store{reqs: make(chan *writeReq), gatherLinger: -1, recent: 8}
		if got := s.gather([]*writeReq{req()}); len(got) != 1 {
			t.Fatalf("group of %d, want 1", len(got))
		}
	})
}
