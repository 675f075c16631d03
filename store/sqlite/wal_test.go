package sqlite

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestWALStaysBoundedUnderContinuousWrites: with writers that never pause
// and readers always busy, PASSIVE checkpoints alone never reach the end of
// the WAL and the file grows without bound (6 GiB after 100,000 dispatches
// before the fix). The WAL must stay near journal_size_limit (64 MiB).
func TestWALStaysBoundedUnderContinuousWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 200 MiB of WAL frames")
	}
	ctx := context.Background()
	s, path := openTest(t)
	body := []byte(`{"content":{"content":"` + strings.Repeat("x", 4000) + `"}}`)
	// About 17 frames each: 12,000 are 50 times the restart threshold and,
	// without restarts, three times the bound. Under the race detector the
	// run is shorter: it checks the writer/checkpointer hand-off for races,
	// the full run checks the size.
	writes := int64(12_000)
	if raceEnabled {
		writes = 1500
	}
	var next atomic.Int64
	var peak atomic.Int64
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 { // readers that always hold a snapshot of some frame
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Sync(ctx, store.SyncParams{Owner: "bob", Box: model.Inbox, Limit: 50}); err != nil {
					t.Error(err)
					return
				}
				if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > peak.Load() {
					peak.Store(fi.Size())
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for range 8 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for {
				i := next.Add(1)
				if i > writes {
					return
				}
				msg := fmt.Sprintf("m%d", i)
				owner := fmt.Sprintf("owner%d", i%500)
				if _, err := s.Apply(ctx, &store.Plan{MsgID: msg, MsgBody: body, NowMS: i,
					Records: []model.Record{rec(owner, model.Inbox, msg, "t", i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	const limit = 96 << 20 // journal_size_limit plus what one interval can add
	if p := peak.Load(); p > limit {
		t.Fatalf("WAL reached %d MiB under continuous writes (bound %d MiB)", p>>20, limit>>20)
	}
	t.Logf("peak WAL size %d MiB", peak.Load()>>20)
}

// Kicks come more often while passes find the WAL far past the restart
// length, never more often than ckMinCommits, and go back up to
// ckEveryCommits once commits are small again.
func TestNextCkEvery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cur       int64
		logFrames int
		want      int64
	}{
		{ckFirstCommits, 16_000, ckFirstCommits / 2},
		{ckEveryCommits, 2*ckRestartFrames + 1, ckEveryCommits / 2},
		{ckMinCommits, 50_000, ckMinCommits},
		{ckMinCommits + 1, 50_000, ckMinCommits},
		{64, 2 * ckRestartFrames, 64},
		{64, ckRestartFrames / 2, 64},
		{64, ckRestartFrames/2 - 1, 128},
		{ckFirstCommits, 0, 2 * ckFirstCommits},
		{ckEveryCommits, 0, ckEveryCommits},
		{ckEveryCommits - 1, 10, ckEveryCommits},
	} {
		if got := nextCkEvery(c.cur, c.logFrames); got != c.want {
			t.Errorf("nextCkEvery(%d, %d) = %d, want %d", c.cur, c.logFrames, got, c.want)
		}
	}
}
