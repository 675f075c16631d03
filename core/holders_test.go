package core

import (
	"context"
	"errors"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestTunnelAuthorCheckFollowsTokens: the remembered answer to "does this
// DID hold a token" changes at once with a token made or revoked through
// this node, so a tunnel is refused the moment its author became local and
// allowed again once it is not.
func TestTunnelAuthorCheckFollowsTokens(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	dispatch := func(text string) error {
		_, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: chat("did:nina", []string{"did:bob"}, text)})
		return err
	}
	if err := dispatch("before"); err != nil {
		t.Fatalf("a person of the platform: %v", err)
	}
	tok, err := s.CreateToken(ctx, admin, &wire.TokenRequest{DID: "did:nina", Role: model.RoleAgent})
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatch("as a local agent"); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("right after nina got a token: %v; want forbidden", err)
	}
	if _, err := s.RevokeToken(ctx, admin, tok.TokenID); err != nil {
		t.Fatal(err)
	}
	if err := dispatch("after"); err != nil {
		t.Fatalf("right after nina's token was revoked: %v", err)
	}
}
