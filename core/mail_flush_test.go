package core

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// A Mail that would not be a valid message, though each of its parts was
// (a title that a Mail holds three times, a body nested deeper once it
// sits in the Mail), is delivered as its parts: nothing acknowledged is
// dropped, and a bad part takes no other part with it.
func TestMailInvalidMailDeliversItsParts(t *testing.T) {
	t.Parallel()
	const bob = "did:agent:bob"
	deep := strings.Repeat("[", 9_995) + strings.Repeat("]", 9_995)
	for _, tc := range []struct {
		name  string
		parts []*message.Message
	}{
		{"title-only part too big for a Mail", []*message.Message{
			{From: "did:tg:ann", To: []string{bob}, Content: message.Content{Title: strings.Repeat("t", 400_000)}},
		}},
		{"a deep part beside another", []*message.Message{
			chat("did:tg:cat", []string{bob}, "hello"),
			{From: "did:tg:ann", To: []string{bob}, Content: message.Content{Content: "deep", Machine: json.RawMessage(deep)}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			s := newService(t, clk)
			var ids []string
			for _, m := range tc.parts {
				res := aggDispatch(t, s, tunnel, m, &wire.Aggregate{Key: "k"}, "")
				if res.Aggregate == nil {
					t.Fatalf("part refused: %+v", res)
				}
				ids = append(ids, res.MsgID)
			}
			clk.Advance(time.Minute)
			if n := flushDue(t, s, clk); n != 1 {
				t.Fatalf("flushMail handled %d buckets, want 1", n)
			}
			var got []string
			for _, it := range syncAll(t, s, bob, model.Inbox) {
				got = append(got, it.Record.MsgID)
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("bob got %v, want the parts %v", got, ids)
			}
			if p, err := s.PendingMail(context.Background(), admin, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 0 {
				t.Fatalf("pending afterwards: %+v, %v", p, err)
			}
		})
	}
}

// A direct message whose author speaks for someone (source) and that is
// addressed to its from is not a group's post: its Mail goes where the
// parts were addressed.
func TestMailSelfAddressedIsNotAGroup(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	const x = "did:agent:x"
	m := &message.Message{From: x, Source: "did:tg:s", To: []string{x}, Content: message.Content{Content: "note"}}
	aggDispatch(t, s, tunnel, m, &wire.Aggregate{Key: "k"}, "")
	clk.Advance(time.Minute)
	flushDue(t, s, clk)
	if got := texts(syncAll(t, s, x, model.Inbox)); len(got) != 1 || got[0] != "note" {
		t.Fatalf("x got %q", got)
	}
}

// Blocks are those in force when the Mail is written: a recipient that
// blocks one author of a mixed burst gets the others' parts, one that
// blocks the tunnel still gets its people's words (a dispatch is the
// author's, not the tunnel's), and one that blocks a burst's only author
// gets nothing.
func TestMailBlocksAtFlush(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const ann, cat = "did:tg:ann", "did:tg:cat"
	const bob, dan, eve = "did:agent:bob", "did:agent:dan", "did:agent:eve"
	if _, err := s.Block(ctx, admin, eve, tunnel.DID, true); err != nil {
		t.Fatal(err)
	}
	to := []string{bob, dan, eve}
	aggDispatch(t, s, tunnel, chat(ann, to, "ann 1"), &wire.Aggregate{Key: "k"}, "")
	// Dan blocks ann while the burst is open.
	if _, err := s.Block(ctx, admin, dan, ann, true); err != nil {
		t.Fatal(err)
	}
	aggDispatch(t, s, tunnel, chat(cat, []string{eve, dan, bob}, "cat 1"), &wire.Aggregate{Key: "k"}, "") // same people, another order
	clk.Advance(time.Minute)
	if n := flushDue(t, s, clk); n != 1 {
		t.Fatalf("flushMail handled %d buckets, want one burst", n)
	}
	for _, c := range []struct {
		who  string
		want string
	}{
		{bob, ann + ": ann 1\n" + cat + ": cat 1"},
		{eve, ann + ": ann 1\n" + cat + ": cat 1"},
		{dan, "cat 1"},
	} {
		items := syncAll(t, s, c.who, model.Inbox)
		if got := texts(items); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s got %q, want %q", c.who, got, c.want)
		}
	}

	// One author, blocked by the only recipient before the Mail is
	// written: nothing is delivered, and the bucket is gone.
	aggDispatch(t, s, tunnel, chat(ann, []string{bob}, "ann 2"), &wire.Aggregate{Key: "solo"}, "")
	if _, err := s.Block(ctx, admin, bob, ann, true); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	flushDue(t, s, clk)
	if got := texts(syncAll(t, s, bob, model.Inbox)); len(got) != 1 {
		t.Fatalf("bob, who now blocks ann, got %q", got)
	}
	if p, err := s.PendingMail(ctx, admin, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 0 {
		t.Fatalf("pending afterwards: %+v, %v", p, err)
	}
}

// A block already in force when a part comes does not split the burst: the
// recipients asked for make it, and the blocks are those when the Mail is
// written. Bob blocks ann from the start; carol gets one Mail of all three
// parts, and bob one of cat's; dan's unblock before the flush gives him
// everything.
func TestMailBlockedAuthorKeepsOneBurst(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const ann, cat = "did:tg:ann", "did:tg:cat"
	const bob, carol, dan = "did:agent:bob", "did:agent:carol", "did:agent:dan"
	for _, blocker := range []string{bob, dan} {
		if _, err := s.Block(ctx, admin, blocker, ann, true); err != nil {
			t.Fatal(err)
		}
	}
	to := []string{bob, carol, dan}
	first := aggDispatch(t, s, tunnel, chat(ann, to, "ann 1"), &wire.Aggregate{Key: "k"}, "")
	if !slices.Equal(first.DroppedRecipients, []string{bob, dan}) {
		t.Fatalf("ann's part answered dropped %v, want those who block her now", first.DroppedRecipients)
	}
	aggDispatch(t, s, tunnel, chat(cat, to, "cat 1"), &wire.Aggregate{Key: "k"}, "")
	aggDispatch(t, s, tunnel, chat(ann, to, "ann 2"), &wire.Aggregate{Key: "k"}, "")
	if p, err := s.PendingMail(ctx, admin, wire.PendingMailQuery{}); err != nil || len(p.Mail) != 1 || p.Mail[0].Parts != 3 {
		t.Fatalf("pending: %+v, %v; want one burst of three parts", p, err)
	}
	if _, err := s.Block(ctx, admin, dan, ann, false); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if n := flushDue(t, s, clk); n != 1 {
		t.Fatalf("flushMail handled %d buckets, want one burst", n)
	}
	all := ann + ": ann 1\n" + cat + ": cat 1\n" + ann + ": ann 2"
	for who, want := range map[string]string{carol: all, dan: all, bob: "cat 1"} {
		if got := texts(syncAll(t, s, who, model.Inbox)); len(got) != 1 || got[0] != want {
			t.Errorf("%s got %q, want %q", who, got, want)
		}
	}
}

// A key of blanks names no burst; a delay of 0 is no delay; a max wait
// shorter than the server's window, with no window asked for, shortens
// the window.
func TestMailRequestEdges(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	m := chat("did:tg:ann", []string{"did:agent:bob"}, "x")
	if _, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m, Aggregate: &wire.Aggregate{Key: "  "}}); !isField(err, model.ErrInvalid, "aggregate.key") {
		t.Fatalf("blank key: %v", err)
	}
	res, err := s.Dispatch(ctx, tunnel, &wire.DispatchRequest{Msg: m, DelayMS: ptr(int64(0)),
		Aggregate: &wire.Aggregate{Key: "k", MaxWaitMS: ptr(int64(1000))}})
	if err != nil {
		t.Fatalf("delay 0 and a short max wait: %v", err)
	}
	if want := clk.Now().UnixMilli() + 1000; res.Aggregate == nil || res.Aggregate.DueAtMS != want {
		t.Fatalf("answered %+v, want due at %d", res.Aggregate, want)
	}
}

func isField(err, kind error, field string) bool {
	me, ok := err.(*model.Error)
	return ok && me.Kind == kind && me.Field == field
}
