package core

import (
	"context"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A post to a members group reaches a person among its members (routes,
// no token) through the person's route, not an INBOX record nobody reads;
// the agents get INBOX records as before. The group's own chat, when it
// has one, reaches its people instead, and a group message dispatched in
// from the chat is not sent back out to them.
func TestMembersReachedThroughTheirRoutes(t *testing.T) {
	t.Parallel()
	const (
		grp    = "did:group:team"
		author = "did:agent:ann"
		bot    = "did:agent:bot"
		pat    = "did:tg:pat"   // a person with one route
		quinn  = "did:tg:quinn" // a person with two
		rex    = "did:tg:rex"   // a person who blocks the author
	)
	setup := func(t *testing.T) *Service {
		s := newService(t, newClock())
		ctx := context.Background()
		if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{
			Subscribers: []string{author, bot, pat, quinn, rex}, Delivery: model.DeliverToMembers}); err != nil {
			t.Fatal(err)
		}
		for did, routes := range map[string][]model.ContactRoute{
			pat:   {{TunnelDID: tunnel.DID, ChatID: "101", Platform: "telegram"}},
			quinn: {{TunnelDID: tunnel.DID, ChatID: "102", Platform: "telegram", Priority: 1}, {TunnelDID: "did:tunnel:mail", Address: "q@example.com", Platform: "email", Priority: 5}},
			rex:   {{TunnelDID: tunnel.DID, ChatID: "103", Platform: "telegram"}},
		} {
			if _, err := s.SetRoutes(ctx, admin, did, routes); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Block(ctx, admin, rex, author, true); err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := func(t *testing.T, s *Service, text string, sc *wire.SendCtx) *wire.PostSendResult {
		t.Helper()
		res, err := s.PostSend(context.Background(), agent(author), &wire.PostSendRequest{SendCtx: sc,
			Msg: &message.Message{From: grp, Source: author, Kind: message.KindGroupMsg, Content: message.Content{Content: text}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	targets := func(res *wire.PostSendResult) []string {
		var out []string
		for _, d := range res.Deliveries {
			out = append(out, d.TargetDID+" via "+d.TunnelDID)
		}
		return out
	}
	inbox := func(t *testing.T, s *Service, did string) int {
		t.Helper()
		return len(syncAll(t, s, did, model.Inbox))
	}

	t.Run("people through their routes", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		res := post(t, s, "standup at 10", nil)
		want := []string{pat + " via " + tunnel.DID, quinn + " via did:tunnel:mail"} // quinn's best route
		if got := targets(res); !slices.Equal(got, want) {
			t.Fatalf("deliveries = %v, want %v", got, want)
		}
		if !slices.Equal(res.LocalRecipients, []string{bot}) || !slices.Equal(res.DroppedRecipients, []string{rex}) {
			t.Fatalf("local %v, dropped %v; want [%s], [%s]", res.LocalRecipients, res.DroppedRecipients, bot, rex)
		}
		for did, want := range map[string]int{bot: 1, pat: 0, quinn: 0, rex: 0, author: 0} {
			if n := inbox(t, s, did); n != want {
				t.Errorf("%s's INBOX holds %d records, want %d", did, n, want)
			}
		}
		got := claimOne(t, s, tunnel, model.TunnelOutbox)
		if got == nil || got.Record.Route == nil || got.Record.Route.TargetDID != pat || got.Record.Route.ChatID != "101" {
			t.Fatalf("the tunnel's outbox holds %+v; want the delivery to %s in chat 101", got, pat)
		}
	})

	t.Run("all_routes and mode", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		res := post(t, s, "everywhere", &wire.SendCtx{AllRoutes: true, Mode: "silent"})
		want := []string{pat + " via " + tunnel.DID, quinn + " via " + tunnel.DID, quinn + " via did:tunnel:mail"}
		if got := targets(res); !slices.Equal(got, want) {
			t.Fatalf("deliveries = %v, want %v", got, want)
		}
		for _, d := range res.Deliveries {
			if d.Mode != "silent" {
				t.Fatalf("delivery %+v lost the send's mode", d)
			}
		}
	})

	t.Run("the group's chat reaches its people", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		if _, err := s.SetRoutes(context.Background(), admin, grp, []model.ContactRoute{{TunnelDID: tunnel.DID, ChatID: "-100", Platform: "telegram"}}); err != nil {
			t.Fatal(err)
		}
		res := post(t, s, "to the chat", nil)
		if got := targets(res); !slices.Equal(got, []string{grp + " via " + tunnel.DID}) {
			t.Fatalf("deliveries = %v, want only the group's chat", got)
		}
		if n := inbox(t, s, pat); n != 1 {
			t.Fatalf("%s's INBOX holds %d records, want 1", pat, n)
		}
	})

	t.Run("a dispatch from the chat is not sent back", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		res, err := s.Dispatch(context.Background(), tunnel, &wire.DispatchRequest{
			Msg: &message.Message{From: grp, Source: pat, Kind: message.KindGroupMsg, Content: message.Content{Content: "hi all"}}})
		if err != nil {
			t.Fatal(err)
		}
		if c := claimOne(t, s, tunnel, model.TunnelOutbox); c != nil {
			t.Fatalf("a dispatched group message was sent out again: %+v", c.Record)
		}
		if !slices.Contains(res.DeliveredAgents, quinn) || inbox(t, s, quinn) != 1 {
			t.Fatalf("dispatch delivered %v; want %s's INBOX as before", res.DeliveredAgents, quinn)
		}
	})
}
