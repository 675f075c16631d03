package api

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A box whose notification channel the test closes by hand.
type fakeBox struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *fakeBox) watch() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *fakeBox) changed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

func TestPageShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := pageKey{owner: "did:g", box: "GROUP_INBOX", after: 7}
	frames := []frame{{id: 8, data: []byte(`{"seq":8}`)}}

	t.Run("streams at one cursor share one read", func(t *testing.T) {
		t.Parallel()
		var p pageShare
		var box fakeBox
		var reads atomic.Int32
		release := make(chan struct{})
		read := func(context.Context) ([]frame, error) {
			reads.Add(1)
			<-release
			return frames, nil
		}
		var wg sync.WaitGroup
		got := make([][]frame, 50)
		started := make(chan struct{}, len(got))
		for i := range got {
			wg.Go(func() {
				started <- struct{}{}
				f, err := p.get(ctx, key, box.watch, read)
				if err != nil {
					t.Error(err)
				}
				got[i] = f
			})
		}
		for range got {
			<-started
		}
		close(release)
		wg.Wait()
		// The goroutines may reach get after the first read is done; they
		// share it as long as the box has not changed.
		if n := reads.Load(); n != 1 {
			t.Fatalf("%d reads for 50 streams at one cursor of an unchanged box", n)
		}
		for i, f := range got {
			if len(f) != 1 || f[0].id != 8 {
				t.Fatalf("stream %d got %+v", i, f)
			}
		}
		// Another cursor is another page.
		if _, err := p.get(ctx, pageKey{owner: "did:g", box: "GROUP_INBOX", after: 8}, box.watch, read); err != nil || reads.Load() != 2 {
			t.Fatalf("another cursor: %v, %d reads", err, reads.Load())
		}
	})

	t.Run("a change makes the page stale", func(t *testing.T) {
		t.Parallel()
		var p pageShare
		var box fakeBox
		var reads atomic.Int32
		read := func(context.Context) ([]frame, error) { reads.Add(1); return frames, nil }
		for range 3 {
			if _, err := p.get(ctx, key, box.watch, read); err != nil {
				t.Fatal(err)
			}
		}
		box.changed()
		if _, err := p.get(ctx, key, box.watch, read); err != nil {
			t.Fatal(err)
		}
		if n := reads.Load(); n != 2 {
			t.Fatalf("%d reads, want 2 (one before the change, one after)", n)
		}
	})

	t.Run("a failed read is not shared", func(t *testing.T) {
		t.Parallel()
		var p pageShare
		var box fakeBox
		boom := errors.New("leader's context ended")
		release := make(chan struct{})
		var reads atomic.Int32
		leaderIn := make(chan struct{})
		leaderDone := make(chan error, 1)
		go func() {
			_, err := p.get(ctx, key, box.watch, func(context.Context) ([]frame, error) {
				reads.Add(1)
				close(leaderIn)
				<-release
				return nil, boom
			})
			leaderDone <- err
		}()
		<-leaderIn
		follower := make(chan []frame, 1)
		go func() {
			f, err := p.get(ctx, key, box.watch, func(context.Context) ([]frame, error) { reads.Add(1); return frames, nil })
			if err != nil {
				t.Error(err)
			}
			follower <- f
		}()
		close(release)
		if err := <-leaderDone; !errors.Is(err, boom) {
			t.Fatalf("leader: %v", err)
		}
		if f := <-follower; len(f) != 1 || f[0].id != 8 {
			t.Fatalf("follower got %+v", f)
		}
		// The follower either waited on the failed page and then read for
		// itself, or came after it was dropped and led a read of its own.
		if n := reads.Load(); n != 2 {
			t.Fatalf("%d reads, want 2", n)
		}
		if pg := p.pages[key]; pg != nil && pg.err != nil {
			t.Fatalf("a failed page is still kept: %+v", pg)
		}
	})

	t.Run("a big page is not kept for later streams", func(t *testing.T) {
		t.Parallel()
		var p pageShare
		var box fakeBox
		big := []frame{{id: 8, data: []byte(strings.Repeat("x", maxKeptPage+1))}}
		var reads atomic.Int32
		read := func(context.Context) ([]frame, error) { reads.Add(1); return big, nil }
		for range 2 {
			if _, err := p.get(ctx, key, box.watch, read); err != nil {
				t.Fatal(err)
			}
		}
		if n := reads.Load(); n != 2 || len(p.pages) != 0 {
			t.Fatalf("%d reads, %d pages kept; want 2 reads and none kept", n, len(p.pages))
		}
	})

	t.Run("stale pages are swept", func(t *testing.T) {
		t.Parallel()
		var p pageShare
		var box fakeBox
		read := func(context.Context) ([]frame, error) { return frames, nil }
		for i := range minPageSweep {
			if _, err := p.get(ctx, pageKey{owner: "did:g", box: "GROUP_INBOX", after: int64(i)}, box.watch, read); err != nil {
				t.Fatal(err)
			}
		}
		box.changed()
		if _, err := p.get(ctx, key, box.watch, read); err != nil {
			t.Fatal(err)
		}
		if len(p.pages) != 1 {
			t.Fatalf("%d pages kept after the box changed, want only the new one", len(p.pages))
		}
	})
}
