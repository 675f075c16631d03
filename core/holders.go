package core

import (
	"context"
	"sync"
	"time"
)

// holders remembers for a few seconds whether a DID holds a token, for the
// check a tunnel's every dispatch makes on its author (tunnelSpeaksFor):
// a store read per inbound message cost a tenth of a dispatch. Tokens made
// or revoked through this node update it at once; other nodes' changes are
// seen within holderTTL, as their token cache sees a revocation.
type holders struct {
	mu sync.Mutex
	m  map[string]holder
}

type holder struct {
	has   bool
	until time.Time
}

const (
	holderTTL = 5 * time.Second
	// holderMax bounds the memory: past it the cache starts over (the
	// DIDs of a busy platform's people, each asked about once in a while).
	holderMax = 10_000
)

// holdsToken reports whether did holds a token of any role.
func (s *Service) holdsToken(ctx context.Context, did string) (bool, error) {
	now := time.Now()
	h := &s.holders
	h.mu.Lock()
	e, ok := h.m[did]
	h.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.has, nil
	}
	toks, err := s.st.ListTokens(ctx, did, 1)
	if err != nil {
		return false, err
	}
	h.set(did, len(toks) > 0, now)
	return len(toks) > 0, nil
}

func (h *holders) set(did string, has bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= holderMax {
		h.m = make(map[string]holder)
	}
	h.m[did] = holder{has: has, until: now.Add(holderTTL)}
}

// forget drops what is known of did (a token of it was revoked: it may
// hold others, or none any more).
func (h *holders) forget(did string) {
	h.mu.Lock()
	delete(h.m, did)
	h.mu.Unlock()
}
