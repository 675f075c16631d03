package core

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/sqlite"
	"github.com/msgcenter/msgcenter/wire"
)

// Seed 001 property 1 (never early) and 2 (eventually delivered): a
// delayed message is invisible until its due time and visible from then on.
func TestPropDelayedNeverEarly(t *testing.T) {
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		to := fmt.Sprintf("did:p1:%d", run)
		start := clk.Now().UnixMilli()
		delays := rapid.SliceOfN(rapid.Int64Range(1, 5000), 1, 8).Draw(rt, "delays")
		due := map[string]int64{}
		for i, d := range delays {
			text := fmt.Sprint("m", i)
			res, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:s", []string{to}, text), DelayMS: ptr(d)})
			if err != nil {
				rt.Fatal(err)
			}
			if want := rfc3339(start + d); res.ScheduledDeliveryTime != want {
				rt.Fatalf("scheduled_delivery_time %s, want %s", res.ScheduledDeliveryTime, want)
			}
			due[text] = start + d
		}
		steps := rapid.SliceOfN(rapid.Int64Range(0, 2000), 1, 6).Draw(rt, "steps")
		steps = append(steps, 5000) // finally past every due time
		for _, step := range steps {
			clk.Advance(time.Duration(step) * time.Millisecond)
			now := clk.Now().UnixMilli()
			if _, err := s.materializeDue(ctx, now, ""); err != nil {
				rt.Fatal(err)
			}
			var want []string
			for text, at := range due {
				if at <= now {
					want = append(want, text)
				}
			}
			got := texts(syncAll(rt, s, to, model.Inbox))
			sort.Strings(want)
			sort.Strings(got)
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("at +%d ms visible %v, want %v", now-start, got, want)
			}
		}
	})
}

// Seed 001 properties 3 and 4: delay_ms absent, 0 or negative are the same
// immediate delivery.
func TestPropZeroAndNegativeDelayAreImmediate(t *testing.T) {
	// One service per variant, each with its own fixed clock, so equal
	// behaviour means equal results and records down to the timestamps.
	svcs := []*Service{newService(t, newClock()), newService(t, newClock()), newService(t, newClock())}
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		to := fmt.Sprintf("did:p3:%d", run)
		text := rapid.StringN(0, 20, 40).Draw(rt, "text")
		neg := rapid.Int64Range(-1<<40, -1).Draw(rt, "negative")
		var results []any
		for i, delay := range []*int64{nil, ptr(int64(0)), ptr(neg)} {
			s := svcs[i]
			res, err := s.Dispatch(context.Background(), admin, &wire.DispatchRequest{Msg: chat("did:s", []string{to}, text), DelayMS: delay})
			if err != nil {
				rt.Fatal(err)
			}
			items := syncAll(rt, s, to, model.Inbox)
			if len(items) != 1 || res.ScheduledDeliveryTime != "" {
				rt.Fatalf("delay %v: %d records, scheduled %q", delay, len(items), res.ScheduledDeliveryTime)
			}
			results = append(results, []any{res, items})
		}
		if !reflect.DeepEqual(results[0], results[1]) || !reflect.DeepEqual(results[0], results[2]) {
			rt.Fatalf("absent, zero and negative delays differ:\n%+v", results)
		}
	})
}

// Seed 001 property 5: messages due at the same time materialize in send
// order (and generally in (due, send) order).
func TestPropSameDueKeepsSendOrder(t *testing.T) {
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		to := fmt.Sprintf("did:p5:%d", run)
		dues := rapid.SliceOfN(rapid.SampledFrom([]int64{100, 200, 300}), 2, 12).Draw(rt, "dues")
		type sent struct {
			text string
			due  int64
			i    int
		}
		var order []sent
		for i, d := range dues {
			text := fmt.Sprint("m", i)
			if _, err := s.PostSend(ctx, admin, &wire.PostSendRequest{Msg: chat("did:s", []string{to}, text), DelayMS: ptr(d)}); err != nil {
				rt.Fatal(err)
			}
			order = append(order, sent{text, d, i})
		}
		clk.Advance(time.Second)
		if _, err := s.materializeDue(ctx, clk.Now().UnixMilli(), ""); err != nil {
			rt.Fatal(err)
		}
		sort.SliceStable(order, func(a, b int) bool { return order[a].due < order[b].due })
		var want []string
		for _, o := range order {
			want = append(want, o.text)
		}
		if got := texts(syncAll(rt, s, to, model.Inbox)); !reflect.DeepEqual(got, want) {
			rt.Fatalf("seq order %v, want %v", got, want)
		}
	})
}

// A scheduled message survives a restart: nothing is kept only in memory.
func TestDelayedSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(st, Config{})
	res, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:s", []string{"did:r"}, "later"), DelayMS: ptr(int64(3_600_000))})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s = New(st, Config{})
	list, err := s.Scheduled(ctx, admin, wire.ScheduledQuery{Recipient: "did:r"})
	if err != nil || list.Count != 1 || list.Items[0].MsgID != res.MsgID {
		t.Fatalf("scheduled after restart = %+v, %v", list, err)
	}
	if n := len(syncAll(t, s, "did:r", model.Inbox)); n != 0 {
		t.Fatalf("%d records visible before due", n)
	}
	fl, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{Recipient: "did:r"})
	if err != nil || fl.Flushed != 1 {
		t.Fatalf("flush = %+v, %v", fl, err)
	}
	if got := texts(syncAll(t, s, "did:r", model.Inbox)); len(got) != 1 || got[0] != "later" {
		t.Fatalf("after flush: %v", got)
	}
	if list, _ := s.Scheduled(ctx, admin, wire.ScheduledQuery{}); list.Count != 0 {
		t.Fatalf("still scheduled after flush: %+v", list)
	}
}

// The background scheduler materializes on time without a flush.
func TestSchedulerLoopMaterializes(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if _, err := s.Dispatch(ctx, admin, &wire.DispatchRequest{Msg: chat("did:s", []string{"did:r"}, "soon"), DelayMS: ptr(int64(200))}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Next(ctx, agent("did:r"), "did:r", model.Inbox, &wire.NextRequest{WaitMS: 20_000})
	if err != nil || res == nil {
		t.Fatalf("delayed message never arrived: %v", err)
	}
}

// TestCancelScheduled: the author of a delayed message (or an admin) can
// cancel it before it is due, and then nothing of it is delivered; to
// anyone else the entry is not found, as is one already delivered.
func TestCancelScheduled(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	alice, bob := agent("did:alice"), agent("did:bob")
	send := func(text string) int64 {
		t.Helper()
		res, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: chat(alice.DID, []string{bob.DID}, text), DelayMS: ptr(int64(60_000))})
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.Scheduled(ctx, admin, wire.ScheduledQuery{Limit: 100})
		if err != nil || len(list.Items) == 0 || list.Items[len(list.Items)-1].ID != res.ScheduledID {
			t.Fatalf("scheduled: %+v, %v; want the last to be the send's scheduled_id %d", list, err, res.ScheduledID)
		}
		return res.ScheduledID
	}
	first, second := send("cancelled by its author"), send("cancelled by an admin")
	kept := send("kept")
	for _, who := range []model.Identity{bob, agent("did:mallory"), tunnel} {
		if _, err := s.CancelScheduled(ctx, who, first); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("%s cancels alice's delayed message: %v; want not found", who.DID, err)
		}
	}
	if _, err := s.CancelScheduled(ctx, alice, 0); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("cancel of id 0: %v", err)
	}
	got, err := s.CancelScheduled(ctx, alice, first)
	if err != nil || got.ID != first || len(got.Recipients) != 1 || got.Recipients[0] != bob.DID {
		t.Fatalf("alice cancels her delayed message: %+v, %v", got, err)
	}
	if _, err := s.CancelScheduled(ctx, admin, second); err != nil {
		t.Fatalf("admin cancels: %v", err)
	}
	if _, err := s.CancelScheduled(ctx, alice, first); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a second cancel: %v", err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := texts(syncAll(t, s, bob.DID, model.Inbox)); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("bob's INBOX after the flush holds %q, want only the message not cancelled", got)
	}
	if _, err := s.CancelScheduled(ctx, alice, kept); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("cancel of a delivered message: %v", err)
	}
	evs, err := s.Events(ctx, admin, wire.EventQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Type == model.EventMsgCancelled {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d message.schedule_cancelled events, want 2", n)
	}
}

// TestListOwnScheduled: an agent lists the delayed messages it sent, and
// a tunnel the dispatches it delayed, never anyone else's; an admin lists
// any sender's.
func TestListOwnScheduled(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	alice, bob := agent("did:alice"), agent("did:bob")
	later := ptr(int64(60_000))
	for i, who := range []model.Identity{alice, bob, alice} {
		to := []string{"did:carol"}
		if i == 2 {
			to = []string{"did:dave"}
		}
		if _, err := s.PostSend(ctx, who, &wire.PostSendRequest{Msg: chat(who.DID, to, fmt.Sprintf("later %d", i)), DelayMS: later}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: chat("did:ext", []string{"did:alice"}, "inbound later"),
		IngressCtx: &model.Route{TunnelDID: tunnel.DID, Address: "tg:1"}, DelayMS: later}); err != nil {
		t.Fatal(err)
	}
	list := func(who model.Identity, q wire.ScheduledQuery) []string {
		t.Helper()
		res, err := s.Scheduled(ctx, who, q)
		if err != nil {
			t.Fatalf("%s lists %+v: %v", who.DID, q, err)
		}
		if res.Count != int64(len(res.Items)) {
			t.Fatalf("%s lists %+v: count %d, %d items", who.DID, q, res.Count, len(res.Items))
		}
		var out []string
		for _, it := range res.Items {
			out = append(out, it.Sender+">"+strings.Join(it.Recipients, ","))
		}
		return out
	}
	for _, c := range []struct {
		who  model.Identity
		q    wire.ScheduledQuery
		want []string
	}{
		{alice, wire.ScheduledQuery{}, []string{"did:alice>did:carol", "did:alice>did:dave"}},
		{alice, wire.ScheduledQuery{Sender: "did:alice", Recipient: "did:dave"}, []string{"did:alice>did:dave"}},
		{bob, wire.ScheduledQuery{}, []string{"did:bob>did:carol"}},
		{agent("did:carol"), wire.ScheduledQuery{}, nil}, // a recipient sees nothing before it is due
		{tunnel, wire.ScheduledQuery{}, []string{tunnel.DID + ">did:alice"}},
		{admin, wire.ScheduledQuery{Sender: "did:bob"}, []string{"did:bob>did:carol"}},
		{admin, wire.ScheduledQuery{Recipient: "did:carol"}, []string{"did:alice>did:carol", "did:bob>did:carol"}},
	} {
		if got := list(c.who, c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s lists %+v: %v, want %v", c.who.DID, c.q, got, c.want)
		}
	}
	if _, err := s.Scheduled(ctx, alice, wire.ScheduledQuery{Sender: "did:bob"}); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("alice lists bob's delayed messages: %v; want forbidden", err)
	}
	if _, err := s.Scheduled(ctx, admin, wire.ScheduledQuery{Sender: "not a did"}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("a sender that is not a DID: %v; want invalid", err)
	}
}

// TestCancelDelayedDispatch: a delayed dispatch is cancelled by the tunnel
// that dispatched it, whether or not its ingress_ctx names it, not by
// whoever its message names as from, nor by another tunnel; an admin's
// dispatch by the tunnel its ingress_ctx names, and without one only by an
// admin.
func TestCancelDelayedDispatch(t *testing.T) {
	t.Parallel()
	s := newService(t, nil)
	ctx := context.Background()
	dispatch := func(by model.Identity, text string, in *model.Route) int64 {
		t.Helper()
		res, err := s.Dispatch(ctx, by, &wire.DispatchRequest{Msg: chat("did:alice", []string{"did:bob"}, text),
			IngressCtx: in, DelayMS: ptr(int64(60_000))})
		if err != nil || res.ScheduledID == 0 {
			t.Fatalf("delayed dispatch: %+v, %v", res, err)
		}
		return res.ScheduledID
	}
	named := dispatch(tunnel, "with its tunnel named", &model.Route{TunnelDID: tunnel.DID, Address: "tg:1"})
	unnamed := dispatch(tunnel, "without an ingress_ctx", nil)
	byAdmin := dispatch(admin, "an admin's, naming the tunnel", &model.Route{TunnelDID: tunnel.DID, Address: "tg:1"})
	adminOnly := dispatch(admin, "an admin's, naming none", nil)
	other := model.Identity{DID: "did:tunnel:other", Role: model.RoleTunnel}
	for _, id := range []int64{named, unnamed, byAdmin, adminOnly} {
		for _, who := range []model.Identity{agent("did:alice"), agent("did:bob"), agent(tunnel.DID), other} {
			if _, err := s.CancelScheduled(ctx, who, id); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("%s (%s) cancels delayed dispatch %d: %v; want not found", who.DID, who.Role, id, err)
			}
		}
	}
	list, err := s.Scheduled(ctx, tunnel, wire.ScheduledQuery{})
	if err != nil || list.Count != 3 {
		t.Fatalf("the tunnel lists %+v, %v; want its own two and the admin's naming it", list, err)
	}
	// An agent's token with the tunnel's DID lists what it could cancel:
	// none of the tunnel's dispatches.
	if list, err := s.Scheduled(ctx, agent(tunnel.DID), wire.ScheduledQuery{}); err != nil || list.Count != 0 {
		t.Fatalf("an agent with the tunnel's DID lists %+v, %v; want nothing", list, err)
	}
	for _, id := range []int64{named, unnamed, byAdmin} {
		if _, err := s.CancelScheduled(ctx, tunnel, id); err != nil {
			t.Fatalf("the tunnel cancels delayed dispatch %d: %v", id, err)
		}
	}
	if _, err := s.CancelScheduled(ctx, tunnel, adminOnly); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("a tunnel cancels an admin's dispatch that names no tunnel: %v; want not found", err)
	}
	if _, err := s.CancelScheduled(ctx, admin, adminOnly); err != nil {
		t.Fatalf("admin cancels: %v", err)
	}
}

// TestDelayedGroupPostOfAFormerMember: a member's delayed post in a
// group's name is not delivered if the member left before it came due, as
// a post made then would be refused; a group that blocks an author takes
// nothing of its posts, and a group post naming other recipients is
// refused rather than sent to the group alone.
func TestDelayedGroupPostOfAFormerMember(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const grp = "did:test:group"
	alice, bob := agent("did:alice"), agent("did:bob")
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{alice.DID, bob.DID, "did:carol"}}); err != nil {
		t.Fatal(err)
	}
	post := func(who model.Identity, text string, delay *int64) (*wire.PostSendResult, error) {
		m := &message.Message{From: grp, Source: who.DID, Kind: message.KindGroupMsg, Content: message.Content{Content: text}}
		return s.PostSend(ctx, who, &wire.PostSendRequest{Msg: m, DelayMS: delay})
	}
	left, err := post(alice, "from a member who leaves", ptr(int64(60_000)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := post(bob, "from a member who stays", ptr(int64(60_000))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSubscribers(ctx, admin, grp, &wire.SubscribersRequest{Subscribers: []string{bob.DID, "did:carol"}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := texts(syncAll(t, s, "did:carol", model.Inbox)); len(got) != 1 || got[0] != "from a member who stays" {
		t.Fatalf("carol's INBOX holds %q, want only the post of the member who stayed", got)
	}
	// The drop is an event, with its reason, and the body goes with it.
	evs, err := s.Events(ctx, admin, wire.EventQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var dropped []model.Event
	for _, e := range evs.Items {
		if e.Type == model.EventMsgDropped {
			dropped = append(dropped, e)
		}
	}
	if len(dropped) != 1 || dropped[0].MsgID != left.MsgID || !strings.Contains(dropped[0].Detail, "left the group") {
		t.Fatalf("message.schedule_dropped events %+v; want one for %s saying why", dropped, left.MsgID)
	}
	if _, err := s.GetMessage(ctx, admin, left.MsgID); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("the dropped post's body stayed: %v", err)
	}

	if _, err := s.Block(ctx, admin, grp, bob.DID, true); err != nil {
		t.Fatal(err)
	}
	res, err := post(bob, "to a group that blocks its author", nil)
	if err != nil || res.OK || len(res.DroppedRecipients) != 1 || res.DroppedRecipients[0] != grp || len(res.LocalRecipients) != 0 {
		t.Fatalf("post to a group that blocks the author: %+v, %v", res, err)
	}
	if got := syncAll(t, s, "did:carol", model.Inbox); len(got) != 1 {
		t.Fatalf("carol got the blocked author's post: %q", texts(got))
	}
	m := &message.Message{From: grp, Source: "did:carol", To: []string{"did:dave"}, Kind: message.KindGroupMsg, Content: message.Content{Content: "and dave"}}
	_, err = s.PostSend(ctx, agent("did:carol"), &wire.PostSendRequest{Msg: m})
	var me *model.Error
	if !errors.Is(err, model.ErrInvalid) || !errors.As(err, &me) || me.Field != "msg.to" {
		t.Fatalf("group post with msg.to: %v; want invalid msg.to", err)
	}
}

// A repeat of a keyed delayed send answers the entry the first one made,
// with its due time, also after it was delivered: it schedules nothing
// again, and the recipient has the message once.
func TestDelayedRepeatAfterDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newService(t, newClock())
	alice, bob := agent("did:agent:alice"), "did:agent:bob"
	send := func() *wire.PostSendResult {
		t.Helper()
		res, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: chat(alice.DID, []string{bob}, "see you at 5"),
			DelayMS: ptr(int64(60_000)), IdempotencyKey: "remind-1"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := send()
	if first.ScheduledID == 0 || first.ScheduledDeliveryTime == "" {
		t.Fatalf("first send = %+v; want a scheduled id and time", first)
	}
	if fl, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{Recipient: bob}); err != nil || fl.Flushed != 1 {
		t.Fatalf("flush = %+v, %v", fl, err)
	}
	again := send()
	if again.ScheduledID != first.ScheduledID || again.ScheduledDeliveryTime != first.ScheduledDeliveryTime || again.MsgID != first.MsgID {
		t.Fatalf("repeat after delivery = %+v; want the first answer's entry %d due %s", again, first.ScheduledID, first.ScheduledDeliveryTime)
	}
	if list, err := s.Scheduled(ctx, admin, wire.ScheduledQuery{}); err != nil || list.Count != 0 {
		t.Fatalf("scheduled after the repeat = %+v, %v; want nothing", list, err)
	}
	if got := texts(syncAll(t, s, bob, model.Inbox)); len(got) != 1 {
		t.Fatalf("bob's inbox = %v; want the message once", got)
	}
}

// A send for a fixed time (deliver_at_ms), repeated with its key once that
// time has passed, is no longer delayed, and is still the same send: it is
// answered with the entry, and sends nothing, delivered or cancelled.
func TestDeliverAtRepeatAfterItsTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cancel := range []bool{false, true} {
		clk := newClock()
		s := newService(t, clk)
		alice, bob := agent("did:agent:alice"), "did:agent:bob"
		at := clk.Now().Add(time.Minute).UnixMilli()
		send := func() *wire.PostSendResult {
			t.Helper()
			res, err := s.PostSend(ctx, alice, &wire.PostSendRequest{Msg: chat(alice.DID, []string{bob}, "at noon"),
				DeliverAtMS: &at, IdempotencyKey: "noon"})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		first := send()
		if cancel {
			if _, err := s.CancelScheduled(ctx, alice, first.ScheduledID); err != nil {
				t.Fatal(err)
			}
		} else if fl, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{Recipient: bob}); err != nil || fl.Flushed != 1 {
			t.Fatalf("flush = %+v, %v", fl, err)
		}
		clk.Advance(2 * time.Minute)
		again := send()
		if again.ScheduledID != first.ScheduledID || again.ScheduledDeliveryTime != first.ScheduledDeliveryTime || len(again.LocalRecipients) != 0 {
			t.Fatalf("cancelled %v: repeat after its time = %+v; want the first answer's entry %d at %s", cancel, again, first.ScheduledID, first.ScheduledDeliveryTime)
		}
		want := 1
		if cancel {
			want = 0
		}
		if got := texts(syncAll(t, s, bob, model.Inbox)); len(got) != want {
			t.Fatalf("cancelled %v: bob's inbox = %v; want %d message(s)", cancel, got, want)
		}
	}
}

// The same when every recipient blocks the sender by the time of the
// repeat: it is still the delayed send's repeat, not a blocked new send.
func TestDeliverAtRepeatAfterABlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := newClock()
	s := newService(t, clk)
	at := clk.Now().Add(time.Minute).UnixMilli()
	send := func() *wire.DispatchResult {
		t.Helper()
		res, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: chat("did:s", []string{"did:r"}, "at noon"),
			DeliverAtMS: &at, IdempotencyKey: "noon"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := send()
	if fl, err := s.FlushScheduled(ctx, admin, &wire.FlushRequest{Recipient: "did:r"}); err != nil || fl.Flushed != 1 {
		t.Fatalf("flush = %+v, %v", fl, err)
	}
	if _, err := s.Block(ctx, admin, "did:r", "did:s", true); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if again := send(); again.ScheduledID != first.ScheduledID || again.ScheduledDeliveryTime != first.ScheduledDeliveryTime {
		t.Fatalf("repeat after its time and a block = %+v; want the first answer's entry %d", again, first.ScheduledID)
	}
}
