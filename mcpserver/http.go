package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// HTTPPath is where a node serves the tools over HTTP.
const HTTPPath = "/mcp"

// Authenticator says whom a token speaks for (core.Service.Authenticate).
type Authenticator func(ctx context.Context, token string) (model.Identity, error)

// HTTPHandler serves the tools over MCP's streamable HTTP transport, for
// agents that reach the node over the network rather than running
// `msgcenter mcp` beside them. Every request carries the agent's token
// (Authorization: Bearer) and is served on its own (the transport's
// stateless mode): no session outlives a request, so no request can act
// with another's rights. The tools call the node's API at base with the
// request's token, as `msgcenter mcp` does, so the API's rules apply
// unchanged. An agent's token acts for its DID; an admin's for the DID
// named by ?did=.
func HTTPHandler(base string, auth Authenticator, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	servers := &serverCache{schemas: mcp.NewSchemaCache()}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		srv, _ := r.Context().Value(serverKey{}).(*mcp.Server)
		return srv
	}, &mcp.StreamableHTTPOptions{Stateless: true, Logger: log,
		// One answer per request, as plain JSON: nothing streams here.
		JSONResponse: true,
		// The SDK refuses a request that reaches a loopback address with
		// another Host, against DNS rebinding; here every request must
		// carry a token, which a rebinding page cannot, and that guard
		// would refuse the TLS proxy in front of a node on 127.0.0.1.
		DisableLocalhostProtection: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="msgcenter"`)
			writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "", "send the agent's token: Authorization: Bearer <token>")
			return
		}
		who, err := auth(r.Context(), strings.TrimSpace(token))
		if err != nil {
			if errors.Is(err, model.ErrUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="msgcenter", error="invalid_token"`)
				writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "", "the token is unknown or revoked")
				return
			}
			log.Error("mcp: authenticate", "err", err)
			writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "", "the token could not be checked; try again")
			return
		}
		did, status, code, field, msg := actFor(who, r.URL.Query().Get("did"))
		if status != 0 {
			writeError(w, status, code, field, msg)
			return
		}
		srv, err := servers.get(base, strings.TrimSpace(token), did)
		if err != nil {
			writeError(w, http.StatusInternalServerError, wire.CodeInternal, "", err.Error())
			return
		}
		ctx := context.WithValue(r.Context(), serverKey{}, srv)
		h.ServeHTTP(w, r.WithContext(context.WithValue(ctx, requestKey{}, r.Context())))
	})
}

type serverKey struct{}

// serverCache keeps the servers built for recent (token, DID) pairs: a
// server costs about 0.3 ms and 270 KB to build even with its schemas
// cached, which every request would pay. A server holds its token, but
// is used only after the request's token was checked, so a revoked
// token's server is never used again.
type serverCache struct {
	schemas *mcp.SchemaCache
	mu      sync.Mutex
	m       map[[sha256.Size]byte]*mcp.Server
}

// maxServers bounds the cache (about 17 MB); when full it starts over (a
// cache: forgetting costs one build per agent).
const maxServers = 64

func (c *serverCache) get(base, token, did string) (*mcp.Server, error) {
	key := sha256.Sum256([]byte(token + "\x00" + did))
	c.mu.Lock()
	srv, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return srv, nil
	}
	srv, err := newServer(client.New(base, token), did, c.schemas, callTimeout)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxServers {
		c.m = make(map[[sha256.Size]byte]*mcp.Server)
	}
	c.m[key] = srv
	return srv, nil
}

// actFor is the DID a request's tools act for, or why it may not: the
// status, code, field and message of the refusal.
func actFor(who model.Identity, did string) (string, int, string, string, string) {
	if did != "" {
		if err := message.CheckDID("did", did, true); err != nil {
			return "", http.StatusBadRequest, wire.CodeInvalid, "did", err.Error()
		}
	}
	switch {
	case who.Role == model.RoleAdmin && did == "":
		return "", http.StatusBadRequest, wire.CodeInvalid, "did", "an admin's token acts for the DID named by ?did=; or use the agent's own token"
	case who.Role == model.RoleAdmin:
		return did, 0, "", "", ""
	case who.Role != model.RoleAgent:
		return "", http.StatusForbidden, wire.CodeForbidden, "", fmt.Sprintf("the token is %s's, role %s; the MCP tools need an agent's token", who.DID, who.Role)
	case did != "" && did != who.DID:
		return "", http.StatusForbidden, wire.CodeForbidden, "did", fmt.Sprintf("the token speaks for %s, not %s", who.DID, did)
	}
	return who.DID, 0, "", "", ""
}

func writeError(w http.ResponseWriter, status int, code, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg, Field: field}})
}
