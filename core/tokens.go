package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// AdminDID is the identity of the admin token the server creates on first
// start.
const AdminDID = "did:msgcenter:admin"

const tokenPrefix = "mct_"

// NewToken returns a fresh random token.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashToken is how tokens are stored: a leaked database reveals no token.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateToken makes a token bound to a DID with a role (admin only).
func (s *Service) CreateToken(ctx context.Context, who model.Identity, req *wire.TokenRequest) (*wire.TokenResult, error) {
	if err := requireAdmin(who, "creating tokens"); err != nil {
		return nil, err
	}
	if err := message.CheckDID("did", req.DID, true); err != nil {
		return nil, err
	}
	if !model.ValidRole(req.Role) {
		return nil, model.Invalid("role", fmt.Sprintf("unknown role %q (want admin, agent or tunnel)", req.Role))
	}
	if err := s.noRoutesYet(ctx, req); err != nil {
		return nil, err
	}
	tok := NewToken()
	hash := hashToken(tok)
	if err := s.st.PutToken(ctx, hash, model.Identity{DID: req.DID, Role: req.Role}, s.nowMS()); err != nil {
		return nil, err
	}
	return &wire.TokenResult{Token: tok, TokenID: model.TokenID(hash), DID: req.DID, Role: req.Role}, nil
}

// noRoutesYet refuses the first agent or admin token of a DID that has
// routes: a tunnel may route a DID that holds no token (a person it brings
// in), and once the DID became a local identity, messages to it would
// still go to that tunnel, never to its INBOX. An admin who wants both
// clears the routes, makes the token, then sets them again (a tunnel can
// no longer touch them then).
func (s *Service) noRoutesYet(ctx context.Context, req *wire.TokenRequest) error {
	if req.Role == model.RoleTunnel {
		return nil
	}
	toks, err := s.st.ListTokens(ctx, req.DID, 100)
	if err != nil {
		return err
	}
	for _, t := range toks {
		if t.Role != model.RoleTunnel {
			return nil // a local identity already: no tunnel could have routed it since
		}
	}
	routes, err := s.st.Routes(ctx, req.DID)
	if err != nil || len(routes) == 0 {
		return err
	}
	return model.Conflict("did", fmt.Sprintf("%s has routes through %s: messages to it would go there, not to its INBOX; clear them first (msgcenter route set %s --clear), then set them again after the token if it should have both",
		req.DID, strings.Join(routeTunnels(routes), ", "), req.DID))
}

// ListTokens lists tokens, oldest first: every DID's for an admin, a
// caller's own otherwise.
func (s *Service) ListTokens(ctx context.Context, who model.Identity, q wire.TokenQuery) (*wire.TokensResult, error) {
	if !isAdmin(who) {
		if q.DID != "" && q.DID != who.DID {
			return nil, model.Forbidden(fmt.Sprintf("%s may list only its own tokens", who.DID))
		}
		q.DID = who.DID
	}
	if err := message.CheckDID("did", q.DID, false); err != nil {
		return nil, err
	}
	limit, err := checkLimit(q.Limit)
	if err != nil {
		return nil, err
	}
	toks, err := s.st.ListTokens(ctx, q.DID, limit)
	if err != nil {
		return nil, err
	}
	res := &wire.TokensResult{Items: make([]wire.TokenInfo, 0, len(toks))}
	for _, t := range toks {
		res.Items = append(res.Items, tokenInfo(t))
	}
	return res, nil
}

func tokenInfo(t model.TokenInfo) wire.TokenInfo {
	return wire.TokenInfo{TokenID: model.TokenID(t.Hash), DID: t.DID, Role: t.Role, CreatedAtMS: t.CreatedAtMS}
}

// RevokeToken deletes a token by its id: any token for an admin, one of
// its own for anyone else (another's is not found, as if it did not
// exist). The admin token file's token is registered again when a server
// starts; to replace it, delete the file and restart.
func (s *Service) RevokeToken(ctx context.Context, who model.Identity, id string) (*wire.TokenInfo, error) {
	if len(id) != model.TokenIDLen || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, model.Invalid("token_id", fmt.Sprintf("must be the %d lowercase hex digits token list shows", model.TokenIDLen))
	}
	did := ""
	if !isAdmin(who) {
		did = who.DID
	}
	gone, err := s.st.DeleteToken(ctx, did, id, s.nowMS())
	if err != nil {
		return nil, err
	}
	info := tokenInfo(gone)
	return &info, nil
}

// EnsureToken registers a known token (the admin token file's) for id.
func (s *Service) EnsureToken(ctx context.Context, token string, id model.Identity) error {
	if !strings.HasPrefix(token, tokenPrefix) {
		return fmt.Errorf("token does not look like a msgcenter token")
	}
	return s.st.PutToken(ctx, hashToken(token), id, s.nowMS())
}

// callerKey carries a request's token and identity (WithCaller).
type callerKey struct{}

type caller struct {
	token string
	who   model.Identity
}

// WithCaller marks ctx as a request authenticated with token as who. What
// outlives its start (a long poll, a stream) asks StillValid again after
// each wait: revoking a token must end what it opened, not let it take
// the next record.
func WithCaller(ctx context.Context, token string, who model.Identity) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{token, who})
}

// StillValid reports whether the token ctx was marked with (WithCaller)
// still speaks for the same identity: model.ErrUnauthorized when it was
// revoked or now speaks for another. nil for an unmarked ctx (a call from
// inside the process). Token lookups are cached until a token changes, so
// a check costs a map read; other PostgreSQL nodes see a revocation
// within their token cache's 5 s.
func (s *Service) StillValid(ctx context.Context) error {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok {
		return nil
	}
	now, err := s.Authenticate(ctx, c.token)
	if err == nil && now != c.who {
		err = &model.Error{Kind: model.ErrUnauthorized, Message: "the token now speaks for another identity"}
	}
	return err
}

// Authenticate resolves a bearer token to an identity.
func (s *Service) Authenticate(ctx context.Context, token string) (model.Identity, error) {
	if token == "" {
		return model.Identity{}, &model.Error{Kind: model.ErrUnauthorized, Message: "missing bearer token (Authorization: Bearer <token>)"}
	}
	id, err := s.st.Token(ctx, hashToken(token))
	if errors.Is(err, model.ErrNotFound) {
		return id, &model.Error{Kind: model.ErrUnauthorized, Message: "unknown or revoked token"}
	}
	return id, err
}
