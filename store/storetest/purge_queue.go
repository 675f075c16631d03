package storetest

// Retention of consumers' records that the consumer also works as a queue
// (purge.go lists these tests and has their helpers).

import (
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// A cursor moved past a record the queue is still working on does not
// delete it: a dead letter and a record waiting for its retry stay (the
// dead letter then goes by its family's period, as any finished record);
// a record read and one never claimed go.
func testPurgeAckedSparesQueueWork(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateConsumer(t, s, newConsumer(alice, "q", bob, model.Inbox), false)
	recs := feedConsumer(t, s, alice, "q", "queue", 4, oldMS)
	box := model.ConsumerBox("q")

	dead := mustClaim(t, s, claimParams(alice, box, oldMS+1, "L1"))
	mustUpdate(t, s, &store.Update{RecordID: dead.RecordID, From: model.Reading, ExpectLeaseID: "L1", To: model.Dead,
		Delivery: model.Delivery{Attempts: 1, LastError: "poison"}, NowMS: oldMS + 2, EventType: model.EventRecordDead})
	retry := mustClaim(t, s, claimParams(alice, box, oldMS+3, "L2"))
	mustUpdate(t, s, &store.Update{RecordID: retry.RecordID, From: model.Reading, ExpectLeaseID: "L2", To: model.Unread,
		Delivery: model.Delivery{Attempts: 1, NextRetryAtMS: purgeMS + 600_000}, VisibleAtMS: purgeMS + 600_000,
		NowMS: oldMS + 4, EventType: model.EventRecordRetry})
	mustUpdate(t, s, transition(recs[2].RecordID, model.Unread, model.Readed, oldMS+5))
	if _, err := s.AckConsumer(ctx, alice, "q", 4, oldMS+6); err != nil {
		t.Fatalf("AckConsumer: %v", err)
	}

	cons := func(n int64) map[model.BoxKind]int64 { return map[model.BoxKind]int64{model.ConsumerFamily: n} }
	p := store.PurgeParams{NowMS: purgeMS, MessagesBeforeMS: purgeMS, Acked: true, Limit: 100}
	requirePurged(t, mustPurge(t, s, p), cons(2), 2, 0, "acked purge past a dead letter and a retry")
	requireNoRecord(t, s, recs[2].RecordID) // read
	requireNoRecord(t, s, recs[3].RecordID) // never claimed: the cursor read it
	if got := mustGet(t, s, dead.RecordID); got.State != model.Dead {
		t.Fatalf("the dead letter is %s after the purge", got.State)
	}
	if got := mustGet(t, s, retry.RecordID); got.State != model.Unread || got.Delivery.Attempts != 1 {
		t.Fatalf("the record waiting for its retry is %s with %d attempts after the purge", got.State, got.Delivery.Attempts)
	}

	p.TerminalBeforeMS = map[model.BoxKind]int64{model.ConsumerFamily: cutMS}
	requirePurged(t, mustPurge(t, s, p), cons(1), 1, 0, "the family's period")
	requireNoRecord(t, s, dead.RecordID)
	mustGet(t, s, retry.RecordID)
}
