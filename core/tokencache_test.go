package core

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// countTokens counts the store's token lookups. With holdNext set, the
// next lookup reads the store, says so on read, and returns only once hold
// is closed.
type countTokens struct {
	store.Store
	n        atomic.Int64
	holdNext atomic.Bool
	read     chan struct{}
	hold     chan struct{}
}

func (c *countTokens) Token(ctx context.Context, hash string) (model.Identity, error) {
	c.n.Add(1)
	id, err := c.Store.Token(ctx, hash)
	if c.holdNext.CompareAndSwap(true, false) {
		c.read <- struct{}{}
		<-c.hold
	}
	return id, err
}

// TestAuthenticateRemembersTokens: a known token is looked up once per
// tokenTTL; a token re-bound through this node takes its new identity at
// once; an unknown token is looked up every time, and is found as soon as
// it is created.
func TestAuthenticateRemembersTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	st := &countTokens{Store: openTestStore(t)}
	s := New(st, Config{Now: clk.Now})
	lookups := func(want int64, what string) {
		t.Helper()
		if got := st.n.Swap(0); got != want {
			t.Fatalf("%s: %d store lookups, want %d", what, got, want)
		}
	}
	auth := func(tok, wantDID string) {
		t.Helper()
		id, err := s.Authenticate(ctx, tok)
		if err != nil || id.DID != wantDID {
			t.Fatalf("Authenticate = %+v, %v; want %s", id, err, wantDID)
		}
	}

	res, err := s.CreateToken(ctx, admin, &wire.TokenRequest{DID: "did:bob", Role: model.RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	auth(res.Token, "did:bob")
	auth(res.Token, "did:bob")
	auth(res.Token, "did:bob")
	lookups(1, "three requests within the TTL")

	clk.Advance(tokenTTL)
	auth(res.Token, "did:bob")
	lookups(1, "a request once the TTL has passed")

	if err := s.EnsureToken(ctx, res.Token, agent("did:carol")); err != nil {
		t.Fatal(err)
	}
	auth(res.Token, "did:carol")
	lookups(1, "a request after re-binding the token")

	unknown := NewToken()
	for range 2 {
		if _, err := s.Authenticate(ctx, unknown); !errors.Is(err, model.ErrUnauthorized) {
			t.Fatalf("Authenticate(unknown) = %v; want unauthorized", err)
		}
	}
	lookups(2, "two requests with an unknown token")
	if err := s.EnsureToken(ctx, unknown, agent("did:dave")); err != nil {
		t.Fatal(err)
	}
	auth(unknown, "did:dave")
}

// A lookup that read the store before a token was re-bound through this
// node does not put the old identity back in the cache.
func TestAuthenticateDuringARebind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &countTokens{Store: openTestStore(t), read: make(chan struct{}), hold: make(chan struct{})}
	s := New(st, Config{})
	tok := NewToken()
	if err := s.EnsureToken(ctx, tok, admin); err != nil {
		t.Fatal(err)
	}
	st.holdNext.Store(true)
	done := make(chan model.Identity, 1)
	go func() {
		id, _ := s.Authenticate(ctx, tok)
		done <- id
	}()
	<-st.read // the lookup has read the admin binding and waits
	if err := s.EnsureToken(ctx, tok, agent("did:bob")); err != nil {
		t.Fatal(err)
	}
	close(st.hold)
	<-done
	id, err := s.Authenticate(ctx, tok)
	if err != nil || id.DID != "did:bob" || id.Role != model.RoleAgent {
		t.Fatalf("Authenticate after the re-bind = %+v, %v; want did:bob as an agent", id, err)
	}
}

// A clock that steps back does not stretch a remembered token's life.
func TestTokenCacheClockStepBack(t *testing.T) {
	t.Parallel()
	c := newTokenCache()
	h := hashToken("mct_x")
	c.put(h, agent("did:x"), 10_000_000, c.generation())
	if _, ok := c.get(h, 10_000_000+tokenTTL.Milliseconds()-1); !ok {
		t.Fatal("entry gone before its TTL")
	}
	if _, ok := c.get(h, 10_000_000-3_600_000); ok {
		t.Fatal("entry served an hour before it was stored")
	}
}

// The cache starts over when full rather than growing without bound.
func TestTokenCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := newTokenCache()
	for i := range tokenCacheMax + 10 {
		c.put(hashToken(string(rune(i))), agent("did:x"), 0, c.generation())
	}
	if n := len(c.m); n > tokenCacheMax {
		t.Fatalf("%d entries, want at most %d", n, tokenCacheMax)
	}
	if _, ok := c.get(hashToken(string(rune(tokenCacheMax+9))), 0); !ok {
		t.Fatal("the newest entry is gone")
	}
}
