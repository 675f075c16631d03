package api

import (
	"context"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

// pageShare lets the box streams at the same cursor of the same box share
// one read. A change to a box wakes every stream on it, and the streams on
// a group's GROUP_INBOX are all at the same cursor: each read the same page
// from the store and encoded the same frames, one read per subscriber per
// message. Now the first reads and the others wait for its frames.
//
// A page is shared only while the box's notification channel that was
// taken before its read is still open: nothing has changed in the box
// since, so the page is what a read of the caller's own would return. The
// caller takes its own channel before asking (the pump does), so a change
// after that wakes it as before. Each caller still has its access checked:
// a page is the same for every reader allowed to read the box.
type pageShare struct {
	mu        sync.Mutex
	pages     map[pageKey]*sharedPage
	sweep     int       // sweep the map when it grows to this size
	lastSweep time.Time // or when this is sharedPageAge ago
}

type pageKey struct {
	owner string
	box   model.BoxKind
	after int64
}

type sharedPage struct {
	changed <-chan struct{} // the box's notification, taken before the read
	at      time.Time
	done    chan struct{} // closed once frames and err are set
	frames  []frame
	err     error
}

const (
	// sharedPageAge bounds how long a page is handed out even while its box
	// does not change: long enough for the streams woken by one change to
	// come for it, short enough that a record's state in a frame (which
	// does not notify when it changes) is never older than this.
	sharedPageAge = time.Second
	minPageSweep  = 1024
	// maxKeptPage is the size of the largest page kept for streams still
	// to come. A bigger one (a replay page) is shared only with the
	// streams that asked while it was being read, so what the map holds
	// stays small whatever the streams replay.
	maxKeptPage = 64 << 10
)

// get returns the frames after key.after, read by read or shared with a
// read of the same page under way or just done. watch is the box's
// notification channel.
func (p *pageShare) get(ctx context.Context, key pageKey, watch func() <-chan struct{},
	read func(context.Context) ([]frame, error)) ([]frame, error) {
	now := time.Now()
	p.mu.Lock()
	if pg, ok := p.pages[key]; ok && pg.usable(now) {
		p.mu.Unlock()
		select {
		case <-pg.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if pg.err == nil {
			return pg.frames, nil
		}
		// The leader's read failed (perhaps only its own context ended):
		// read for ourselves.
		return read(ctx)
	}
	pg := &sharedPage{changed: watch(), at: now, done: make(chan struct{})}
	if p.pages == nil {
		p.pages = make(map[pageKey]*sharedPage)
	}
	if len(p.pages) >= max(p.sweep, minPageSweep) || now.Sub(p.lastSweep) >= sharedPageAge {
		for k, old := range p.pages {
			if !old.usable(now) {
				delete(p.pages, k)
			}
		}
		p.sweep, p.lastSweep = 2*len(p.pages), now
	}
	p.pages[key] = pg
	p.mu.Unlock()

	pg.frames, pg.err = read(ctx)
	close(pg.done)
	if pg.err != nil || framesSize(pg.frames) > maxKeptPage {
		p.mu.Lock()
		if p.pages[key] == pg {
			delete(p.pages, key)
		}
		p.mu.Unlock()
	}
	return pg.frames, pg.err
}

func framesSize(frames []frame) int {
	n := 0
	for _, f := range frames {
		n += len(f.data)
	}
	return n
}

// usable reports whether the page may still be handed out.
func (pg *sharedPage) usable(now time.Time) bool {
	if now.Sub(pg.at) >= sharedPageAge {
		return false
	}
	select {
	case <-pg.changed:
		return false
	default:
		return true
	}
}
