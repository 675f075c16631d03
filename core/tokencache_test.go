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

// countTokens counts the store's token lookups.
type countTokens struct {
	store.Store
	n atomic.Int64
}

func (c *countTokens) Token(ctx context.Context, hash string) (model.Identity, error) {
	c.n.Add(1)
	return c.Store.Token(ctx, hash)
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

// The cache starts over when full rather than growing without bound.
func TestTokenCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := newTokenCache()
	for i := range tokenCacheMax + 10 {
		c.put(hashToken(string(rune(i))), agent("did:x"), 0)
	}
	if n := len(c.m); n > tokenCacheMax {
		t.Fatalf("%d entries, want at most %d", n, tokenCacheMax)
	}
	if _, ok := c.get(hashToken(string(rune(tokenCacheMax+9))), 0); !ok {
		t.Fatal("the newest entry is gone")
	}
}
