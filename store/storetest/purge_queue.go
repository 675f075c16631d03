package storetest

// Retention of consumers' records that the consumer also works as a queue
// (purge.go lists these tests and has their helpers).

import (
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// A cursor moved past a record the queue is still working on does not
// delete it: a dead letter, a record waiting for its retry and one
// redriven (its attempts reset) stay; the dead letter then goes by its
// family's period, as any finished record. A record read and one never
// claimed go with the cursor.
func testPurgeAckedSparesQueueWork(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateConsumer(t, s, newConsumer(alice, "q", bob, model.Inbox), false)
	recs := feedConsumer(t, s, alice, "q", "queue", 5, oldMS)
	box := model.ConsumerBox("q")
	claim := func(lease string, at int64, want model.Record) {
		t.Helper()
		if got := mustClaim(t, s, claimParams(alice, box, at, lease)); got.RecordID != want.RecordID {
			t.Fatalf("claimed seq %d, want seq %d", got.Seq, want.Seq)
		}
	}
	dead, retry, redriven, read, unclaimed := recs[0], recs[1], recs[2], recs[3], recs[4]

	claim("L1", oldMS+1, dead)
	mustUpdate(t, s, &store.Update{RecordID: dead.RecordID, From: model.Reading, ExpectLeaseID: "L1", To: model.Dead,
		Delivery: model.Delivery{Attempts: 1, LastError: "poison"}, NowMS: oldMS + 2, EventType: model.EventRecordDead})
	claim("L2", oldMS+3, retry)
	mustUpdate(t, s, &store.Update{RecordID: retry.RecordID, From: model.Reading, ExpectLeaseID: "L2", To: model.Unread,
		Delivery: model.Delivery{Attempts: 1, NextRetryAtMS: purgeMS + 600_000}, VisibleAtMS: purgeMS + 600_000,
		NowMS: oldMS + 4, EventType: model.EventRecordRetry})
	claim("L3", oldMS+5, redriven)
	mustUpdate(t, s, &store.Update{RecordID: redriven.RecordID, From: model.Reading, ExpectLeaseID: "L3", To: model.Dead,
		Delivery: model.Delivery{Attempts: 1}, NowMS: oldMS + 6, EventType: model.EventRecordDead})
	mustUpdate(t, s, &store.Update{RecordID: redriven.RecordID, From: model.Dead, To: model.Unread,
		NowMS: oldMS + 7, EventType: model.EventRecordRedriven})
	mustUpdate(t, s, transition(read.RecordID, model.Unread, model.Readed, oldMS+8))
	if _, err := s.AckConsumer(ctx, alice, "q", 5, oldMS+9); err != nil {
		t.Fatalf("AckConsumer: %v", err)
	}

	cons := func(n int64) map[model.BoxKind]int64 { return map[model.BoxKind]int64{model.ConsumerFamily: n} }
	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Acked: true, Limit: 100}
	requirePurged(t, mustPurge(t, s, p), cons(2), 2, 0, "acked purge past the queue's work")
	requireNoRecord(t, s, read.RecordID)
	requireNoRecord(t, s, unclaimed.RecordID)
	for _, want := range []struct {
		rec      model.Record
		state    model.State
		attempts int
		what     string
	}{{dead, model.Dead, 1, "the dead letter"}, {retry, model.Unread, 1, "the record waiting for its retry"},
		{redriven, model.Unread, 0, "the redriven record"}} {
		if got := mustGet(t, s, want.rec.RecordID); got.State != want.state || got.Delivery.Attempts != want.attempts {
			t.Fatalf("%s is %s with %d attempts after the purge; want %s with %d", want.what, got.State,
				got.Delivery.Attempts, want.state, want.attempts)
		}
	}

	p.TerminalBeforeMS = map[model.BoxKind]int64{model.ConsumerFamily: cutMS}
	requirePurged(t, mustPurge(t, s, p), cons(1), 1, 0, "the family's period")
	requireNoRecord(t, s, dead.RecordID)
	mustGet(t, s, retry.RecordID)
	mustGet(t, s, redriven.RecordID)
}
