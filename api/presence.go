package api

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// streamRegistry counts the streams open on this node per DID, so that a
// sender can tell an online reader (push will reach it now) from an offline
// one (it will sync later) — seed 004's push decision. The DID counted is the
// one whose token holds the stream, the reader that is actually connected.
// Presence is per node: with several nodes behind a balancer, ask each, or
// sum their msgcenter_stream_connections.
type streamRegistry struct {
	metrics *Metrics
	mu      sync.Mutex
	byOwner map[string]int
}

func newStreamRegistry(m *Metrics) *streamRegistry {
	return &streamRegistry{metrics: m, byOwner: map[string]int{}}
}

// MaxAgentStreams bounds the streams an agent's DID holds open on one
// node: each is a goroutine, buffers and re-reads of the store, and one
// token opening thousands would weigh on every other client. An admin's
// (dashboards, relays) are not bounded.
const MaxAgentStreams = 64

// open counts one stream of kind held by owner; the returned func uncounts
// it. Past limit (0: none) it counts nothing and answers model.ErrTooMany.
func (s *streamRegistry) open(owner, kind string, limit int) (func(), error) {
	s.mu.Lock()
	if limit > 0 && s.byOwner[owner] >= limit {
		s.mu.Unlock()
		return nil, &model.Error{Kind: model.ErrTooMany, Message: fmt.Sprintf(
			"%s holds %d streams open on this node, the most an agent may; close one (a box's stream carries every change, one per box is enough)", owner, limit)}
	}
	s.byOwner[owner]++
	online := len(s.byOwner)
	s.mu.Unlock()
	if s.metrics != nil {
		s.metrics.streamOpened(kind, 1, online)
	}
	return func() {
		s.mu.Lock()
		if s.byOwner[owner]--; s.byOwner[owner] <= 0 {
			delete(s.byOwner, owner)
		}
		online := len(s.byOwner)
		s.mu.Unlock()
		if s.metrics != nil {
			s.metrics.streamOpened(kind, -1, online)
		}
	}, nil
}

func (s *streamRegistry) count(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byOwner[owner]
}

// presence is GET /v1/owners/{owner}/presence: admins may ask about anyone,
// others only about themselves (who is online is not everyone's business).
// whoami answers whom the caller's token speaks for: a connector checks
// its token at start, a person which token they hold.
func (a *API) whoami(w http.ResponseWriter, _ *http.Request, who model.Identity) error {
	writeJSON(w, http.StatusOK, wire.WhoAmI{DID: who.DID, Role: who.Role})
	return nil
}

func (a *API) presence(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, err := pathDID(r, "owner")
	if err != nil {
		return err
	}
	if who.Role != model.RoleAdmin && who.DID != owner {
		return model.Forbidden(who.DID + " may ask only about its own presence")
	}
	n := a.streams.count(owner)
	writeJSON(w, http.StatusOK, wire.PresenceResult{Owner: owner, Online: n > 0, Streams: n})
	return nil
}
