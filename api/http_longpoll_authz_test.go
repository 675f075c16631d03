package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// TestLongPollKeepsNoRightsItLost: a waiting next looks again only while
// its caller may: a revoked token's claim ends 401 without taking the
// record written after the revocation, and a reader removed from a group
// meanwhile is refused the group's next post (403), as a new request
// would be.
func TestLongPollKeepsNoRightsItLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	poll := func(path, token string, req wire.NextRequest) <-chan resp {
		out := make(chan resp, 1)
		go func() { out <- e.do(t, "POST", path, token, req) }()
		time.Sleep(200 * time.Millisecond) // let it wait (were it later, it would be refused at once all the same)
		return out
	}

	tok := ok[wire.TokenResult](t, e.do(t, "POST", "/v1/tokens", e.admin, wire.TokenRequest{DID: "did:dora", Role: model.RoleAgent}))
	claim := poll(boxPath("did:dora", model.Inbox, "next"), tok.Token, wire.NextRequest{WaitMS: 20_000})
	if r := e.do(t, "DELETE", "/v1/tokens/"+tok.TokenID, e.admin, nil); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	e.postSend(t, e.alice, chat(didAlice, []string{"did:dora"}, "after the revocation"))
	wantErr(t, <-claim, http.StatusUnauthorized, wire.CodeUnauthorized, "")
	for _, it := range e.syncAll(t, e.admin, "did:dora", model.Inbox) {
		if it.Record.State != model.Unread {
			t.Fatalf("the revoked token's poll took %s: %s", it.Record.RecordID, it.Record.State)
		}
	}

	const grp = "did:group:log"
	ok[wire.SubscribersResult](t, e.do(t, "PUT", "/v1/groups/"+esc(grp)+"/subscribers", e.admin,
		wire.SubscribersRequest{Subscribers: []string{didAlice, didBob}, Delivery: model.DeliverToGroup}))
	peek := poll(boxPath(grp, model.GroupInbox, "next"), e.bob, wire.NextRequest{LockOnTake: new(bool), WaitMS: 20_000})
	e.setSubscribers(t, grp, didAlice)
	e.postSend(t, e.alice, groupMsg(grp, didAlice, "after bob left"))
	wantErr(t, <-peek, http.StatusForbidden, wire.CodeForbidden, "")
}
