package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func applyTests() []testCase {
	return []testCase{
		{"SeqPerOwnerAndBox", testApplySeq},
		{"RecordRoundTrip", testApplyRoundTrip},
		{"RepeatCreatesNothing", testApplyRepeat},
		{"ExistingLeftUntouched", testApplyExistingUntouched},
		{"MessageBodyStoredOnce", testApplyMessageBody},
		{"GetMessages", testGetMessages},
		{"CreatedEvents", testApplyEvents},
		{"IdempotencyKeyConflict", testApplyIdemConflict},
		{"ConsumeMissingScheduleRollsBack", testApplyConsumeMissing},
		{"ConcurrentSamePlan", testApplyConcurrentSamePlan},
		{"ConcurrentSeq", testApplyConcurrentSeq},
		{"ConcurrentConflictsRollBackAlone", testApplyConcurrentConflicts},
		{"LargePlan", testApplyLargePlan},
		{"FanOutKeepsEveryField", testApplyFanOutFields},
	}
}

func requireCreatedSeqs(t *testing.T, res *store.ApplyResult, p *store.Plan, want ...int64) {
	t.Helper()
	if len(res.Existing) != 0 {
		t.Fatalf("Apply(%s): Existing = %v, want none", short(p.MsgID), res.Existing)
	}
	requireIDs(t, res.Created, recordIDs(p.Records), "Apply: Created must list the new records in plan order")
	if got := seqs(res.Created); !slices.Equal(got, want) {
		t.Fatalf("Apply(%s): seqs = %v, want %v", short(p.MsgID), got, want)
	}
}

// Seq is assigned per (owner, box), 1, 2, 3…, in plan order.
func testApplySeq(t *testing.T, s store.Store) {
	m1, m2, m3 := msgID("seq-1"), msgID("seq-2"), msgID("seq-3")

	p1 := newPlan(m1, base,
		newRec(alice, model.Inbox, m1, base),
		newRec(bob, model.Outbox, m1, base))
	requireCreatedSeqs(t, mustApply(t, s, p1), p1, 1, 1)

	p2 := newPlan(m2, base+1,
		newRec(alice, model.Inbox, m2, base+1),
		newRec(bob, model.Outbox, m2, base+1),
		newRec(alice, model.RequestBox, m2, base+1))
	requireCreatedSeqs(t, mustApply(t, s, p2), p2, 2, 2, 1)

	p3 := newPlan(m3, base+2,
		newRec(alice, model.Inbox, m3, base+2, withVariant("a")),
		newRec(bob, model.Inbox, m3, base+2),
		newRec(alice, model.Inbox, m3, base+2, withVariant("b")),
		newRec(alice, model.Inbox, m3, base+2, withVariant("c")))
	res := mustApply(t, s, p3)
	requireCreatedSeqs(t, res, p3, 3, 1, 4, 5)

	for _, c := range res.Created {
		requireRecord(t, mustGet(t, s, c.RecordID), c, "GetRecord after Apply equals ApplyResult.Created")
	}
}

// Every field of a record survives the round trip; the plan's Seq is ignored.
func testApplyRoundTrip(t *testing.T, s store.Store) {
	m := msgID("roundtrip")
	full := newRec(tunnel, model.TunnelOutbox, m, base,
		withVariant("telegram:42"),
		withThread("tg:chat:42"),
		withSortKey(base-5_000),
		withTags("urgent", "billing"),
		withRoute(model.Route{
			TunnelDID: tunnel, Platform: "telegram", AccountID: "bot-1", Address: "@alice",
			ChatID: "42", TargetDID: alice, Mode: "dm", Priority: 3,
			ExtIDs: map[string]string{"telegram": "777", "slack": "C1"},
		}),
		withDelivery(model.Delivery{
			Attempts: 2, ExternalMsgID: "ext-9", ErrorCode: "rate_limited",
			ErrorMessage: "slow down", RetryAfterMS: 1500, LastError: "429 Too Many Requests",
		}))
	full.Seq = 99 // ignored: the store assigns seq
	minimal := newRec(alice, model.Inbox, m, base)
	minimal.Seq = -7

	p := newPlan(m, base, full, minimal)
	res := mustApply(t, s, p)
	if len(res.Created) != 2 {
		t.Fatalf("Apply created %d records, want 2", len(res.Created))
	}
	wantFull, wantMin := full, minimal
	wantFull.Seq, wantMin.Seq = 1, 1
	requireRecord(t, res.Created[0], wantFull, "ApplyResult.Created[0]")
	requireRecord(t, res.Created[1], wantMin, "ApplyResult.Created[1]")
	requireRecord(t, mustGet(t, s, full.RecordID), wantFull, "GetRecord(full)")
	requireRecord(t, mustGet(t, s, minimal.RecordID), wantMin, "GetRecord(minimal)")

	requireNoRecord(t, s, model.RecordID(alice, model.Outbox, m, ""))
	requireNoRecord(t, s, "cyrec:does-not-exist")
}

// Applying the same plan again creates nothing, reports every record as
// existing and consumes no seq.
func testApplyRepeat(t *testing.T, s store.Store) {
	m1, m2 := msgID("repeat-1"), msgID("repeat-2")
	p := newPlan(m1, base,
		newRec(alice, model.Inbox, m1, base),
		newRec(bob, model.Outbox, m1, base),
		newRec(alice, model.Inbox, m1, base, withVariant("x")))
	first := mustApply(t, s, p)
	requireCreatedSeqs(t, first, p, 1, 1, 2)

	for i, now := range []int64{base, base + 1_000} {
		again := *p
		again.NowMS = now
		res := mustApply(t, s, &again)
		if len(res.Created) != 0 {
			t.Fatalf("repeat %d: Created = %v, want none", i, recordIDs(res.Created))
		}
		requireSameSet(t, res.Existing, recordIDs(p.Records), fmt.Sprintf("repeat %d: Existing", i))
	}
	for _, c := range first.Created {
		requireRecord(t, mustGet(t, s, c.RecordID), c, "record after repeated Apply")
	}

	p2 := newPlan(m2, base+2, newRec(alice, model.Inbox, m2, base+2), newRec(bob, model.Outbox, m2, base+2))
	requireCreatedSeqs(t, mustApply(t, s, p2), p2, 3, 2)

	created := countRecordEvents(allEvents(t, s, ""), model.EventRecordCreated)
	if len(created) != 5 {
		t.Fatalf("record.created events name %d records, want 5: %v", len(created), created)
	}
	for id, n := range created {
		if n != 1 {
			t.Fatalf("record %s has %d record.created events, want exactly 1", id, n)
		}
	}
}

// A plan mixing existing and new records creates only the new ones and
// leaves the existing ones exactly as they are.
func testApplyExistingUntouched(t *testing.T, s store.Store) {
	m := msgID("existing")
	r1 := newRec(alice, model.Inbox, m, base, withThread("t"))
	mustApply(t, s, newPlan(m, base, r1))
	updated := mustUpdate(t, s, transition(r1.RecordID, model.Unread, model.Readed, base+10))

	r2 := newRec(alice, model.Inbox, m, base+20, withVariant("second"), withThread("t"))
	p := newPlan(m, base+20, r1, r2)
	res := mustApply(t, s, p)
	requireSameSet(t, res.Existing, []string{r1.RecordID}, "Existing")
	requireIDs(t, res.Created, []string{r2.RecordID}, "Created")
	if res.Created[0].Seq != 2 {
		t.Fatalf("new record seq = %d, want 2", res.Created[0].Seq)
	}
	got := mustGet(t, s, r1.RecordID)
	requireRecord(t, got, updated, "existing record after Apply")
	if got.State != model.Readed {
		t.Fatalf("existing record state = %s, want %s (left untouched)", got.State, model.Readed)
	}
}

// The message body is stored once, byte for byte; the first body wins.
func testApplyMessageBody(t *testing.T, s store.Store) {
	ctx := t.Context()
	m := msgID("body")
	if b, err := s.GetMessage(ctx, m); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage(unknown) = %q, %v; want model.ErrNotFound", b, err)
	}
	p := newPlan(m, base, newRec(alice, model.Inbox, m, base))
	want := slices.Clone(p.MsgBody)
	mustApply(t, s, p)
	got, err := s.GetMessage(ctx, m)
	requireNoError(t, err, "GetMessage")
	if !bytes.Equal(got, want) {
		t.Fatalf("GetMessage returned\n %q\nwant byte-for-byte\n %q", got, want)
	}

	// A later plan for the same message (new record, different bytes) does
	// not replace the stored body.
	p2 := newPlan(m, base+1, newRec(bob, model.Inbox, m, base+1))
	p2.MsgBody = []byte(`{"different":true}`)
	if res := mustApply(t, s, p2); len(res.Created) != 1 {
		t.Fatalf("second plan created %d records, want 1", len(res.Created))
	}
	got, err = s.GetMessage(ctx, m)
	requireNoError(t, err, "GetMessage")
	if !bytes.Equal(got, want) {
		t.Fatalf("GetMessage after second plan returned %q, want the first body %q", got, want)
	}

	// The tunnel a message came in through is told so (an INBOX record's
	// route names it), and only that tunnel; it is no reader of it.
	in := msgID("body-inbound")
	mustApply(t, s, newPlan(in, base+2, newRec(dave, model.Inbox, in, base+2,
		withRoute(model.Route{TunnelDID: tunnel, Platform: "email", Address: "x@example.com"}))))
	for _, c := range []struct {
		tunnel, msg string
		want        bool
	}{
		{tunnel, in, true}, {"did:tunnel:other", in, false}, {tunnel, m, false}, {tunnel, msgID("unknown"), false},
	} {
		ok, err := s.CameThrough(ctx, c.tunnel, c.msg)
		requireNoError(t, err, "CameThrough")
		if ok != c.want {
			t.Fatalf("CameThrough(%s, %s) = %v, want %v", c.tunnel, short(c.msg), ok, c.want)
		}
	}
	for _, c := range []struct {
		did, msg string
		want     bool
	}{
		{alice, m, true}, {bob, m, true}, {carol, m, false}, {alice, msgID("unknown"), false},
		{tunnel, in, false}, {dave, in, true},
	} {
		ok, err := s.CanReadMessage(ctx, c.did, c.msg)
		requireNoError(t, err, "CanReadMessage")
		if ok != c.want {
			t.Fatalf("CanReadMessage(%s, %s) = %v, want %v", c.did, short(c.msg), ok, c.want)
		}
	}
}

// GetMessages returns the bodies that exist among ids, keyed by id.
func testGetMessages(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.GetMessages(ctx, nil)
	requireNoError(t, err, "GetMessages(none)")
	if len(got) != 0 {
		t.Fatalf("GetMessages(none) = %d bodies", len(got))
	}
	m1, m2, missing := msgID("bodies-1"), msgID("bodies-2"), msgID("bodies-missing")
	mustApply(t, s, newPlan(m1, base, newRec(alice, model.Inbox, m1, base)))
	mustApply(t, s, newPlan(m2, base, newRec(bob, model.Inbox, m2, base)))
	e := newEntry("dispatch", "bodies-scheduled", base+1_000, carol)
	mustSchedule(t, s, e, nil)

	got, err = s.GetMessages(ctx, []string{m2, missing, m1, e.MsgID, m1})
	requireNoError(t, err, "GetMessages")
	want := map[string][]byte{m1: msgBody(m1), m2: msgBody(m2), e.MsgID: e.MsgBody}
	if len(got) != len(want) {
		t.Fatalf("GetMessages returned %d bodies, want %d (only those that exist)", len(got), len(want))
	}
	for id, body := range want {
		if !bytes.Equal(got[id], body) {
			t.Fatalf("GetMessages[%s] = %q, want byte-for-byte %q", short(id), got[id], body)
		}
	}
	got, err = s.GetMessages(ctx, []string{missing})
	requireNoError(t, err, "GetMessages(missing only)")
	if len(got) != 0 {
		t.Fatalf("GetMessages(missing only) = %d bodies", len(got))
	}
}

// One record.created event per new record, none for existing ones.
func testApplyEvents(t *testing.T, s store.Store) {
	m := msgID("events")
	p := newPlan(m, base+5,
		newRec(alice, model.Inbox, m, base+5),
		newRec(bob, model.Outbox, m, base+5),
		newRec(tunnel, model.TunnelOutbox, m, base+5, withVariant("tg")))
	mustApply(t, s, p)
	evs := allEvents(t, s, "")
	created := eventsOf(evs, model.EventRecordCreated, "")
	if len(created) != 3 {
		t.Fatalf("got %d record.created events, want 3: %s", len(created), dump(evs))
	}
	for _, r := range p.Records {
		es := eventsOf(created, model.EventRecordCreated, r.RecordID)
		if len(es) != 1 {
			t.Fatalf("record %s: %d record.created events, want 1", r.RecordID, len(es))
		}
		e := es[0]
		if e.Owner != r.Owner || e.BoxKind != r.BoxKind || e.MsgID != m || e.AtMS != p.NowMS {
			t.Fatalf("record.created event = %s; want owner %s, box %s, msg %s, at %d", dump(e), r.Owner, r.BoxKind, m, p.NowMS)
		}
	}

	mustApply(t, s, p)
	if n := len(eventsOf(allEvents(t, s, ""), model.EventRecordCreated, "")); n != 3 {
		t.Fatalf("after repeated Apply: %d record.created events, want still 3", n)
	}

	extra := newRec(carol, model.Inbox, m, base+9)
	p2 := newPlan(m, base+9, append(slices.Clone(p.Records), extra)...)
	mustApply(t, s, p2)
	evs = allEvents(t, s, "")
	if n := len(eventsOf(evs, model.EventRecordCreated, "")); n != 4 {
		t.Fatalf("after partially new Apply: %d record.created events, want 4", n)
	}
	if es := eventsOf(evs, model.EventRecordCreated, extra.RecordID); len(es) != 1 || es[0].AtMS != base+9 {
		t.Fatalf("record.created for the new record = %s, want one at %d", dump(es), base+9)
	}
}

// An idempotency key bound to one message rejects another message with
// ErrConflict and writes nothing; scopes are independent.
func testApplyIdemConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	mA, mB, mC := msgID("idem-A"), msgID("idem-B"), msgID("idem-C")
	key := store.Idempotency{Scope: alice + "/post_send", Key: "client-key-1", Answer: []byte(`{"first":true}`)}

	pa := newPlan(mA, base, newRec(alice, model.Outbox, mA, base), newRec(bob, model.Inbox, mA, base))
	pa.Idem = &key
	mustApply(t, s, pa)
	eventsBefore := allEvents(t, s, "")

	// The same key and message again is a repeat: it writes nothing, even
	// planned again to another box (the recipient's routes changed since),
	// and carries the first send's answer, not its own.
	again := newPlan(mA, base+5, newRec(alice, model.Outbox, mA, base+5), newRec(carol, model.Inbox, mA, base+5))
	k1 := key
	k1.Answer = []byte(`{"second":true}`)
	again.Idem = &k1
	_, err := s.Apply(ctx, again)
	requireErrIs(t, err, model.ErrConflict, "Apply of a repeat")
	if kr, ok := errors.AsType[*store.KeyRepeated](err); !ok || string(kr.Answer) != `{"first":true}` {
		t.Fatalf("repeat answered %v; want KeyRepeated with the first answer", err)
	}
	requireNoRecord(t, s, again.Records[1].RecordID)
	if after := allEvents(t, s, ""); len(after) != len(eventsBefore) {
		t.Fatalf("a repeat appended %d events", len(after)-len(eventsBefore))
	}

	pb := newPlan(mB, base+1, newRec(alice, model.Outbox, mB, base+1), newRec(bob, model.Inbox, mB, base+1))
	k2 := key
	pb.Idem = &k2
	_, err = s.Apply(ctx, pb)
	requireErrIs(t, err, model.ErrConflict, "Apply(msg B) with a key bound to msg A")
	if _, repeat := errors.AsType[*store.KeyRepeated](err); repeat {
		t.Fatalf("another message under a bound key is a conflict, not a repeat: %v", err)
	}
	for _, r := range pb.Records {
		requireNoRecord(t, s, r.RecordID)
	}
	if b, err := s.GetMessage(ctx, mB); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage(B) after rejected Apply = %q, %v; want model.ErrNotFound", b, err)
	}
	if after := allEvents(t, s, ""); len(after) != len(eventsBefore) {
		t.Fatalf("rejected Apply appended %d events", len(after)-len(eventsBefore))
	}

	// Nothing was written, not even a seq: B without the key gets seq 2.
	pb.Idem = nil
	requireCreatedSeqs(t, mustApply(t, s, pb), pb, 2, 2)

	// The same key in another scope is another key.
	pc := newPlan(mC, base+2, newRec(carol, model.Outbox, mC, base+2))
	pc.Idem = &store.Idempotency{Scope: carol + "/post_send", Key: key.Key}
	requireCreatedSeqs(t, mustApply(t, s, pc), pc, 1)
	// A key bound without an answer (as before answers were kept) makes a
	// repeat all the same, with no answer.
	_, err = s.Apply(ctx, pc)
	if kr, ok := errors.AsType[*store.KeyRepeated](err); !ok || kr.Answer != nil {
		t.Fatalf("repeat of a key without an answer: %v", err)
	}
}

// ConsumeSchedule of an entry that does not exist rolls the whole plan back.
func testApplyConsumeMissing(t *testing.T, s store.Store) {
	ctx := t.Context()
	m, m2 := msgID("consume-missing"), msgID("consume-missing-2")
	key := &store.Idempotency{Scope: alice + "/post_send", Key: "k"}
	p := newPlan(m, base, newRec(alice, model.Outbox, m, base, withThread("t")), newRec(bob, model.Inbox, m, base, withThread("t")))
	p.ConsumeSchedule = 987_654
	p.Idem = key
	_, err := s.Apply(ctx, p)
	requireErrIs(t, err, model.ErrConflict, "Apply with ConsumeSchedule of a missing entry")

	for _, r := range p.Records {
		requireNoRecord(t, s, r.RecordID)
	}
	if b, err := s.GetMessage(ctx, m); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetMessage after rolled back Apply = %q, %v; want model.ErrNotFound", b, err)
	}
	if evs := allEvents(t, s, ""); len(evs) != 0 {
		t.Fatalf("rolled back Apply left events: %s", dump(evs))
	}
	for _, owner := range []string{alice, bob} {
		cs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: owner, Limit: 10})
		requireNoError(t, err, "ListConversations")
		if len(cs) != 0 {
			t.Fatalf("rolled back Apply left conversations for %s: %s", owner, dump(cs))
		}
	}
	// The idempotency key was not bound and no seq was used.
	p2 := newPlan(m2, base+1, newRec(alice, model.Outbox, m2, base+1))
	p2.Idem = key
	requireCreatedSeqs(t, mustApply(t, s, p2), p2, 1)
}
