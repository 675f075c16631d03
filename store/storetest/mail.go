package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

func mailTests() []testCase {
	return []testCase{
		{"Debounce", testMailDebounce},
		{"MaxWait", testMailMaxWait},
		{"FullBucketCloses", testMailFull},
		{"DueBucketCloses", testMailDueCloses},
		{"CloseMail", testMailClose},
		{"Duplicates", testMailDuplicates},
		{"Consume", testMailConsume},
		{"Drop", testMailDrop},
		{"ListBySender", testMailList},
		{"ForgottenWithKeys", testMailPurge},
		{"ConcurrentAdds", testMailConcurrentAdds},
	}
}

// mailPart is part name of key's burst from tunnel to bob, window 5 s,
// max wait 30 s, at most 3 parts, each of cost 10 (at most 100).
func mailPart(key, name string, nowMS int64) *store.MailPart {
	return &store.MailPart{MailKey: "k:" + key, MsgID: msgID(name), Body: msgBody(name), Ctx: []byte(`{"chat_id":"c"}`),
		Sender: tunnelDID, Key: key, Recipients: []string{bob}, WindowMS: 5_000, MaxWaitMS: 30_000,
		MaxParts: 3, Cost: 10, MaxCost: 100, NowMS: nowMS}
}

const tunnelDID = "did:tunnel:t1"

func mustAddPart(t *testing.T, s store.Store, p *store.MailPart, idem *store.Idempotency) store.MailPartResult {
	t.Helper()
	res, err := s.AddMailPart(t.Context(), p, idem)
	requireNoError(t, err, "AddMailPart "+p.MsgID)
	return res
}

func requireBucket(t *testing.T, b store.MailBucket, parts int, open bool, dueAtMS int64, what string) {
	t.Helper()
	if b.PartCount != parts || b.Open != open || b.DueAtMS != dueAtMS {
		t.Fatalf("%s: bucket %d has parts=%d open=%v due=%d, want parts=%d open=%v due=%d",
			what, b.ID, b.PartCount, b.Open, b.DueAtMS, parts, open, dueAtMS)
	}
}

func dueMail(t *testing.T, s store.Store, beforeMS int64) []store.MailBucket {
	t.Helper()
	bs, err := s.DueMail(t.Context(), beforeMS, 100)
	requireNoError(t, err, "DueMail")
	return bs
}

func partIDs(b store.MailBucket) []string {
	var out []string
	for _, p := range b.Parts {
		out = append(out, p.MsgID)
	}
	return out
}

// Each part pushes its bucket's due time a window past itself; the bucket
// is due only once the burst pauses, with its parts in order and bodies.
func testMailDebounce(t *testing.T, s store.Store) {
	r1 := mustAddPart(t, s, mailPart("chat", "d1", base), nil)
	requireBucket(t, r1.Bucket, 1, true, base+5_000, "first part")
	r2 := mustAddPart(t, s, mailPart("chat", "d2", base+3_000), nil)
	if r2.Bucket.ID != r1.Bucket.ID {
		t.Fatalf("second part opened bucket %d, want %d", r2.Bucket.ID, r1.Bucket.ID)
	}
	requireBucket(t, r2.Bucket, 2, true, base+8_000, "second part")
	if at, ok, err := s.NextMailDue(t.Context()); err != nil || !ok || at != base+8_000 {
		t.Fatalf("NextMailDue = %d, %v, %v; want %d", at, ok, err, base+8_000)
	}
	if bs := dueMail(t, s, base+7_999); len(bs) != 0 {
		t.Fatalf("DueMail before the pause ended = %d buckets", len(bs))
	}
	bs := dueMail(t, s, base+8_000)
	if len(bs) != 1 {
		t.Fatalf("DueMail = %d buckets, want 1", len(bs))
	}
	b := bs[0]
	requireBucket(t, b, 2, true, base+8_000, "due bucket")
	if !slices.Equal(partIDs(b), []string{msgID("d1"), msgID("d2")}) {
		t.Fatalf("parts = %v", partIDs(b))
	}
	if string(b.Parts[1].Body) != string(msgBody("d2")) || string(b.Parts[0].Ctx) != `{"chat_id":"c"}` || b.Parts[1].NowMS != base+3_000 {
		t.Fatalf("part read back as %+v", b.Parts[1])
	}
	if b.Sender != tunnelDID || b.Key != "chat" || !slices.Equal(b.Recipients, []string{bob}) || b.FirstAtMS != base ||
		b.LastAtMS != base+3_000 || b.WindowMS != 5_000 || b.MaxWaitMS != 30_000 {
		t.Fatalf("bucket read back as %+v", b)
	}
	var added int
	for _, e := range allEvents(t, s, tunnelDID) {
		if e.Type == model.EventMailPartAdded {
			added++
		}
	}
	if added != 2 {
		t.Fatalf("%d mail.part_added events, want 2", added)
	}
}

// A steady trickle cannot hold a bucket back past its max wait.
func testMailMaxWait(t *testing.T, s store.Store) {
	p := mailPart("trickle", "w0", base)
	p.MaxParts = 100
	mustAddPart(t, s, p, nil)
	var last store.MailPartResult
	for i := 1; i <= 8; i++ {
		p := mailPart("trickle", fmt.Sprintf("w%d", i), base+int64(i)*4_000)
		p.MaxParts = 100
		last = mustAddPart(t, s, p, nil)
	}
	// The eighth part came at +32 s: the first bucket was due at +30 s
	// (+28 s + 5 s capped by +0 s + 30 s), so it opened a second one.
	bs := dueMail(t, s, base+30_000)
	if len(bs) != 1 || bs[0].PartCount != 8 || bs[0].DueAtMS != base+30_000 || bs[0].Open {
		t.Fatalf("due at +30 s: %+v, want one closed bucket of 8 parts due at +30 s", bs)
	}
	requireBucket(t, last.Bucket, 1, true, base+37_000, "part after the max wait")
}

// A bucket that reaches MaxParts is closed and due at once; one that
// cannot take a part's cost is closed and the part opens the next.
func testMailFull(t *testing.T, s store.Store) {
	mustAddPart(t, s, mailPart("full", "f1", base), nil)
	mustAddPart(t, s, mailPart("full", "f2", base+100), nil)
	r3 := mustAddPart(t, s, mailPart("full", "f3", base+200), nil)
	requireBucket(t, r3.Bucket, 3, false, base+200, "third of three parts")
	r4 := mustAddPart(t, s, mailPart("full", "f4", base+300), nil)
	if r4.Bucket.ID == r3.Bucket.ID {
		t.Fatal("a part joined a full bucket")
	}
	requireBucket(t, r4.Bucket, 1, true, base+5_300, "part after a full bucket")

	big := mailPart("full", "f5", base+400)
	big.Cost = 95 // 10 + 95 > 100
	r5 := mustAddPart(t, s, big, nil)
	if r5.Bucket.ID == r4.Bucket.ID {
		t.Fatal("a part joined a bucket it overfills")
	}
	bs := dueMail(t, s, base+400)
	if len(bs) != 2 || bs[0].ID != r3.Bucket.ID || bs[1].ID != r4.Bucket.ID || bs[1].Open || bs[1].DueAtMS != base+400 {
		t.Fatalf("due at +400 ms: %+v, want the full bucket and the overfilled one, closed at +400 ms", bs)
	}
}

// A part that comes after its bucket's due time opens a new bucket: a due
// bucket never changes under its flush.
func testMailDueCloses(t *testing.T, s store.Store) {
	r1 := mustAddPart(t, s, mailPart("late", "l1", base), nil)
	r2 := mustAddPart(t, s, mailPart("late", "l2", base+6_000), nil)
	if r2.Bucket.ID == r1.Bucket.ID {
		t.Fatal("a part joined a due bucket")
	}
	bs := dueMail(t, s, base+6_000)
	if len(bs) != 1 || bs[0].ID != r1.Bucket.ID || bs[0].Open || bs[0].PartCount != 1 || bs[0].DueAtMS != base+5_000 {
		t.Fatalf("due: %+v", bs)
	}
}

// CloseMail closes the open buckets due by the time given, and only
// those: a part with a closed bucket's key opens a new one, even before the
// closed one is due; the closed bucket keeps its parts and due time.
func testMailClose(t *testing.T, s store.Store) {
	early := mustAddPart(t, s, mailPart("early", "e1", base), nil)
	late := mustAddPart(t, s, mailPart("late", "z1", base+4_000), nil)
	n, err := s.CloseMail(t.Context(), base+5_000)
	requireNoError(t, err, "CloseMail")
	if n != 1 {
		t.Fatalf("CloseMail closed %d buckets, want the one due by then", n)
	}
	if again, err := s.CloseMail(t.Context(), base+5_000); err != nil || again != 0 {
		t.Fatalf("CloseMail again: %d, %v", again, err)
	}
	e2 := mustAddPart(t, s, mailPart("early", "e2", base+1_000), nil)
	if e2.Bucket.ID == early.Bucket.ID || e2.Bucket.PartCount != 1 {
		t.Fatalf("a part joined a closed bucket: %+v", e2.Bucket)
	}
	z2 := mustAddPart(t, s, mailPart("late", "z2", base+4_500), nil)
	if z2.Bucket.ID != late.Bucket.ID || z2.Bucket.PartCount != 2 {
		t.Fatalf("a bucket not yet due was closed: %+v", z2.Bucket)
	}
	bs := dueMail(t, s, base+5_000)
	if len(bs) != 1 || bs[0].ID != early.Bucket.ID || bs[0].Open || bs[0].PartCount != 1 || bs[0].DueAtMS != base+5_000 {
		t.Fatalf("due after CloseMail: %+v", bs)
	}
}

// A part stored again (same key and message, or a reused idempotency key)
// is reported as a duplicate and not counted; a key bound to another
// message is a conflict.
func testMailDuplicates(t *testing.T, s store.Store) {
	idem := &store.Idempotency{Scope: tunnelDID + "|dispatch", Key: "u1"}
	r1 := mustAddPart(t, s, mailPart("dup", "p1", base), idem)
	again := mustAddPart(t, s, mailPart("dup", "p1", base+1_000), nil)
	if !again.Duplicate || again.Bucket.ID != r1.Bucket.ID || again.Bucket.PartCount != 1 {
		t.Fatalf("same part again = %+v, want a duplicate in bucket %d of 1 part", again, r1.Bucket.ID)
	}
	other := mailPart("dup", "p2", base+1_000)
	_, err := s.AddMailPart(t.Context(), other, idem)
	requireErrIs(t, err, model.ErrConflict, "idempotency key reused for another part")
	byKey := mustAddPart(t, s, mailPart("other-key", "p1", base+1_000), idem)
	if !byKey.Duplicate || byKey.Bucket.ID != 0 {
		t.Fatalf("same idempotency key, other mail key = %+v, want a duplicate in no bucket", byKey)
	}
	bs := dueMail(t, s, base+100_000)
	if len(bs) != 1 || bs[0].PartCount != 1 {
		t.Fatalf("buckets after duplicates: %+v", bs)
	}
	p := &store.Plan{MsgID: msgID("mail-dup"), MsgBody: msgBody("mail-dup"), NowMS: base + 10_000,
		ConsumeMail: &store.MailConsume{BucketID: r1.Bucket.ID, Parts: 1}}
	mustApply(t, s, p)
	after := mustAddPart(t, s, mailPart("dup", "p1", base+20_000), nil)
	if !after.Duplicate || after.MailID != msgID("mail-dup") || after.Bucket.ID != 0 {
		t.Fatalf("part again after its flush = %+v, want a duplicate that went into %s", after, short(msgID("mail-dup")))
	}
}

// Apply with ConsumeMail writes the Mail and deletes its bucket at once;
// a bucket gone, or holding another number of parts, rolls the plan back.
func testMailConsume(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustAddPart(t, s, mailPart("c", "c1", base), nil)
	mustAddPart(t, s, mailPart("c", "c2", base+1_000), nil)
	stale := &store.Plan{MsgID: msgID("mail-c"), MsgBody: msgBody("mail-c"), NowMS: base + 6_000,
		Records:     []model.Record{newRec(bob, model.Inbox, "mail-c", base+6_000)},
		ConsumeMail: &store.MailConsume{BucketID: r.Bucket.ID, Parts: 1}}
	_, err := s.Apply(ctx, stale)
	requireErrIs(t, err, model.ErrConflict, "ConsumeMail with a stale part count")
	requireNoRecord(t, s, stale.Records[0].RecordID)

	stale.ConsumeMail.Parts = 2
	res := mustApply(t, s, stale)
	requireIDs(t, res.Created, recordIDs(stale.Records), "Created")
	if bs := dueMail(t, s, base+100_000); len(bs) != 0 {
		t.Fatalf("bucket left after its flush: %+v", bs)
	}
	if _, ok, err := s.NextMailDue(ctx); err != nil || ok {
		t.Fatalf("NextMailDue after the flush = %v, %v", ok, err)
	}
	var flushed []model.Event
	for _, e := range allEvents(t, s, tunnelDID) {
		if e.Type == model.EventMailFlushed {
			flushed = append(flushed, e)
		}
	}
	if len(flushed) != 1 || flushed[0].MsgID != msgID("mail-c") {
		t.Fatalf("mail.flushed events = %+v", flushed)
	}
	again := *stale
	again.Records = []model.Record{newRec(carol, model.Inbox, "mail-c", base+7_000)}
	_, err = s.Apply(ctx, &again)
	requireErrIs(t, err, model.ErrConflict, "ConsumeMail of a flushed bucket")
	requireNoRecord(t, s, again.Records[0].RecordID)
	// The next part of the key starts afresh.
	next := mustAddPart(t, s, mailPart("c", "c3", base+8_000), nil)
	requireBucket(t, next.Bucket, 1, true, base+13_000, "part after the flush")
}

// DropMail deletes a bucket and its parts, with a mail.dropped event.
func testMailDrop(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustAddPart(t, s, mailPart("drop", "x1", base), nil)
	requireErrIs(t, s.DropMail(ctx, r.Bucket.ID, 2, base+6_000, "gone"), model.ErrNotFound, "DropMail with a stale count")
	requireNoError(t, s.DropMail(ctx, r.Bucket.ID, 1, base+6_000, "recipients gone"), "DropMail")
	requireErrIs(t, s.DropMail(ctx, r.Bucket.ID, 1, base+6_000, "again"), model.ErrNotFound, "DropMail again")
	if bs := dueMail(t, s, base+100_000); len(bs) != 0 {
		t.Fatalf("bucket left after a drop: %+v", bs)
	}
	var dropped int
	for _, e := range allEvents(t, s, tunnelDID) {
		if e.Type == model.EventMailDropped {
			dropped++
		}
	}
	if dropped != 1 {
		t.Fatalf("%d mail.dropped events, want 1", dropped)
	}
	// A dropped part is forgotten: sent again it is a new part.
	if again := mustAddPart(t, s, mailPart("drop", "x1", base+7_000), nil); again.Duplicate {
		t.Fatal("a dropped part sent again is a duplicate")
	}
}

// ListMail lists pending buckets in due order, all or one sender's, with
// their parts' ids.
func testMailList(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustAddPart(t, s, mailPart("a", "la1", base+2_000), nil)
	other := mailPart("b", "lb1", base)
	other.Sender = "did:tunnel:t2"
	mustAddPart(t, s, other, nil)
	mustAddPart(t, s, mailPart("a", "la2", base+2_500), nil)
	all, err := s.ListMail(ctx, store.MailQuery{Limit: 10})
	requireNoError(t, err, "ListMail")
	if len(all) != 2 || all[0].Sender != "did:tunnel:t2" || all[1].Key != "a" {
		t.Fatalf("ListMail = %+v", all)
	}
	if !slices.Equal(partIDs(all[1]), []string{msgID("la1"), msgID("la2")}) || all[1].Parts[0].Body != nil {
		t.Fatalf("listed parts = %+v", all[1].Parts)
	}
	mine, err := s.ListMail(ctx, store.MailQuery{Sender: tunnelDID, Limit: 10})
	requireNoError(t, err, "ListMail by sender")
	if len(mine) != 1 || mine[0].Key != "a" {
		t.Fatalf("ListMail(sender) = %+v", mine)
	}
	one, err := s.ListMail(ctx, store.MailQuery{Limit: 1})
	requireNoError(t, err, "ListMail limit 1")
	if len(one) != 1 {
		t.Fatalf("ListMail limit 1 = %d buckets", len(one))
	}
}

// Retention forgets flushed parts with the idempotency keys, never pending
// ones.
func testMailPurge(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := mustAddPart(t, s, mailPart("p", "old", base), nil)
	mustApply(t, s, &store.Plan{MsgID: msgID("mail-p"), MsgBody: msgBody("mail-p"), NowMS: base + 6_000,
		ConsumeMail: &store.MailConsume{BucketID: r.Bucket.ID, Parts: 1}})
	mustAddPart(t, s, mailPart("p", "pending", base+7_000), nil)
	res, err := s.Purge(ctx, store.PurgeParams{NowMS: base + 100_000, KeysBeforeMS: base + 50_000})
	requireNoError(t, err, "Purge")
	if res.MailParts != 1 {
		t.Fatalf("Purge forgot %d mail parts, want 1", res.MailParts)
	}
	if again := mustAddPart(t, s, mailPart("p", "old", base+200_000), nil); again.Duplicate {
		t.Fatal("a forgotten part is still a duplicate")
	}
	if bs := dueMail(t, s, base+300_000); len(bs) != 2 || bs[0].PartCount != 1 {
		t.Fatalf("pending bucket after purge: %+v", bs)
	}
}

// Concurrent parts of one burst all land, in one bucket, each once.
func testMailConcurrentAdds(t *testing.T, s store.Store) {
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for range 2 { // each part twice, as a tunnel retrying would
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := mailPart("conc", fmt.Sprintf("cc%d", i), base+int64(i))
				p.MaxParts = 1000
				p.Cost = 1
				_, err := s.AddMailPart(t.Context(), p, nil)
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		requireNoError(t, err, "concurrent AddMailPart")
	}
	bs := dueMail(t, s, base+100_000)
	if len(bs) != 1 || bs[0].PartCount != n || len(bs[0].Parts) != n || bs[0].Cost != n {
		t.Fatalf("after %d concurrent parts: %+v", n, bs)
	}
	seen := map[string]bool{}
	for i, p := range bs[0].Parts {
		if seen[p.MsgID] {
			t.Fatalf("part %d (%s) stored twice", i, short(p.MsgID))
		}
		seen[p.MsgID] = true
	}
}
