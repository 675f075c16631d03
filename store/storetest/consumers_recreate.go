package storetest

import (
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// A consumer made again under the name of a deleted one whose box held
// records starts its cursor where that box ended: the old seqs are not
// reused, and counting from 0 would call records unacknowledged that the
// new consumer never had.
func testConsumerRecreatedCursor(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateConsumer(t, s, newConsumer(bob, "again", alice, model.Inbox), false)
	feedConsumer(t, s, bob, "again", "recreated-old", 3, base)
	mustAck(t, s, bob, "again", 1, base+1, 1)
	requireNoError(t, s.DeleteConsumer(ctx, bob, "again", base+2), "DeleteConsumer")

	// Created at base, as feedConsumer expects; it goes on from the
	// source's end, the old one's records being gone.
	fresh := newConsumer(bob, "again", alice, model.Inbox)
	fresh.SourceSeq = 3
	mustCreateConsumer(t, s, fresh, false)
	if fresh.AckedSeq != 3 {
		t.Fatalf("CreateConsumer again: AckedSeq %d, want 3 (where the old box ended)", fresh.AckedSeq)
	}
	if c := mustGetConsumer(t, s, bob, "again"); c.AckedSeq != 3 {
		t.Fatalf("the consumer made again is stored with AckedSeq %d, want 3", c.AckedSeq)
	}
	created := eventsOf(allEvents(t, s, bob), model.EventConsumerCreated, "")
	if len(created) != 2 {
		t.Fatalf("%d consumer.created events, want 2", len(created))
	}
	recs := feedConsumer(t, s, bob, "again", "recreated-new", 1, base+4)
	if recs[0].Seq != 4 {
		t.Fatalf("the new consumer's first record has seq %d, want 4", recs[0].Seq)
	}
	mustAck(t, s, bob, "again", 4, base+5, 4)
}
