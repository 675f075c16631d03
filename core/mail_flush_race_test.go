package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// afterDue is a store that runs a hook once its DueMail has answered.
type afterDue struct {
	store.Store
	hook func()
}

func (a *afterDue) DueMail(ctx context.Context, beforeMS int64, limit int) ([]store.MailBucket, error) {
	bs, err := a.Store.DueMail(ctx, beforeMS, limit)
	if h := a.hook; h != nil {
		a.hook = nil
		h()
	}
	return bs, err
}

func holding(t *testing.T, s *Service, who, line string) int {
	t.Helper()
	n := 0
	for _, txt := range texts(syncAll(t, s, who, model.Inbox)) {
		if strings.Contains(txt, line) {
			n++
		}
	}
	return n
}

// A part that arrives while an admin's flush is building the Mail of its
// (not yet due) burst starts a new burst: the Mail, written as two
// messages for recipients with different blocks, is not written again with
// it.
func TestMailPartDuringFlush(t *testing.T) {
	t.Parallel()
	clk := newClock()
	st := &afterDue{Store: openTestStore(t)}
	s := New(st, Config{Now: clk.Now})
	ctx := context.Background()
	const ann, cat = "did:tg:ann", "did:tg:cat"
	const bob, dan = "did:agent:bob", "did:agent:dan"
	to := []string{bob, dan}
	aggDispatch(t, s, tunnel, chat(ann, to, "ann 1"), &wire.Aggregate{Key: "k"}, "")
	aggDispatch(t, s, tunnel, chat(cat, to, "cat 1"), &wire.Aggregate{Key: "k"}, "")
	if _, err := s.Block(ctx, admin, dan, ann, true); err != nil {
		t.Fatal(err)
	}
	st.hook = func() { aggDispatch(t, s, tunnel, chat(cat, to, "cat 2"), &wire.Aggregate{Key: "k"}, "") }
	if _, err := s.FlushMail(ctx, admin); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	flushDue(t, s, clk)
	for _, c := range []struct {
		who, line string
		want      int
	}{{dan, "cat 1", 1}, {dan, "cat 2", 1}, {dan, "ann 1", 0}, {bob, "cat 1", 1}, {bob, "ann 1", 1}, {bob, "cat 2", 1}} {
		if n := holding(t, s, c.who, c.line); n != c.want {
			t.Errorf("%s has %d messages holding %q, want %d: %q", c.who, n, c.line, c.want, texts(syncAll(t, s, c.who, model.Inbox)))
		}
	}
}

// The Mail that holds every part is written last, so a part dispatched
// again is told it went into a Mail that holds it, whoever blocks whom.
func TestMailFullAudienceLast(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newService(t, clk)
	ctx := context.Background()
	const ann, cat = "did:tg:ann", "did:tg:cat"
	const eve, bob, dan = "did:agent:eve", "did:agent:bob", "did:agent:dan"
	to := []string{eve, bob, dan}
	aggDispatch(t, s, tunnel, chat(ann, to, "ann 1"), &wire.Aggregate{Key: "k"}, "")
	aggDispatch(t, s, tunnel, chat(cat, to, "cat 1"), &wire.Aggregate{Key: "k"}, "")
	blocks := [][2]string{{eve, ann}, {eve, cat}, {dan, ann}}
	for _, bl := range blocks {
		if _, err := s.Block(ctx, admin, bl[0], bl[1], true); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	flushDue(t, s, clk)
	res := aggDispatch(t, s, tunnel, chat(ann, to, "ann 1"), &wire.Aggregate{Key: "k"}, "")
	if res.Aggregate == nil || !res.Aggregate.Duplicate || res.Aggregate.MailID == "" {
		t.Fatalf("dispatched again: %+v", res.Aggregate)
	}
	raw, err := s.GetMessage(ctx, admin, res.Aggregate.MailID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), res.MsgID) {
		t.Fatalf("ann's part %s is said to be in Mail %s, which does not hold it: %s", res.MsgID, res.Aggregate.MailID, raw)
	}
}
