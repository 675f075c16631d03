package postgres_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// Two nodes on one database: a node remembers a token's identity for 5 s,
// so a re-bind through the other node reaches it within that time; a
// re-bind through the node itself, and a token created anywhere, are seen
// at once.
func TestTokensAcrossNodes(t *testing.T) {
	schema := newSchema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	postgres.SetTokenClock(a, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx := t.Context()
	alice, bob, carol := model.Identity{DID: "did:alice", Role: model.RoleAgent},
		model.Identity{DID: "did:bob", Role: model.RoleAgent}, model.Identity{DID: "did:carol", Role: model.RoleAdmin}
	want := func(s *postgres.Store, hash string, id model.Identity, what string) {
		t.Helper()
		got, err := s.Token(ctx, hash)
		if err != nil || got != id {
			t.Fatalf("%s: Token = %+v, %v; want %+v", what, got, err, id)
		}
	}

	if _, err := a.Token(ctx, "h1"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("unknown token: %v, want not found", err)
	}
	if err := b.PutToken(ctx, "h1", alice, 1); err != nil {
		t.Fatal(err)
	}
	want(a, "h1", alice, "a token created through the other node")

	if err := b.PutToken(ctx, "h1", bob, 2); err != nil {
		t.Fatal(err)
	}
	want(a, "h1", alice, "re-bound through the other node, within 5 s")
	advance(5 * time.Second)
	want(a, "h1", bob, "re-bound through the other node, 5 s later")

	if err := a.PutToken(ctx, "h1", carol, 3); err != nil {
		t.Fatal(err)
	}
	want(a, "h1", carol, "re-bound through the node itself")
	want(b, "h1", carol, "the other node, which had not remembered it")
}
