package store

import (
	"context"
	"fmt"

	"github.com/msgcenter/msgcenter/model"
)

// Consumers is the storage of durable consumers and of retention. It is
// part of Store; it lives in its own interface to be read in one place.
type Consumers interface {
	// CreateConsumer stores c (SourceSeq as given; AckedSeq the last seq
	// its box had, 0 unless a deleted consumer of that name left records
	// behind, whose seqs are not reused) and appends
	// a consumer.created event. With fromEnd, c.SourceSeq is first set to
	// the source box's last seq, read in the same transaction, so the
	// consumer takes exactly what the source gets after it exists.
	// model.ErrConflict if (c.Owner, c.Name) exists.
	CreateConsumer(ctx context.Context, c *model.Consumer, fromEnd bool) error
	// GetConsumer returns model.ErrNotFound for an unknown consumer.
	GetConsumer(ctx context.Context, owner, name string) (model.Consumer, error)
	// ListConsumers lists consumers by (owner, name), optionally only one
	// owner's or only those of one source box.
	ListConsumers(ctx context.Context, f ConsumerQuery) ([]model.Consumer, error)
	// DeleteConsumer removes the consumer and every record of its box (and
	// the bodies no other record refers to), appending a consumer.deleted
	// event. model.ErrNotFound if it does not exist.
	DeleteConsumer(ctx context.Context, owner, name string, nowMS int64) error
	// AdvanceConsumer fans one examined range of the source into the
	// consumer's box: it inserts a.Records as Apply does (seq assigned in
	// order, record.created events, existing ids left alone) and moves
	// SourceSeq from a.FromSourceSeq to a.ToSourceSeq, all in one
	// transaction. model.ErrConflict if SourceSeq is no longer
	// a.FromSourceSeq (another node advanced it), or if a body the records
	// refer to is gone (a purge ordered before the step took it with its
	// source record): nothing is written, and the caller examines again.
	// model.ErrNotFound if the consumer was deleted.
	AdvanceConsumer(ctx context.Context, a *ConsumerAdvance) (*ApplyResult, error)
	// AckConsumer moves the cursor to seq if that is ahead of it (acks are
	// idempotent and never move it back) and returns the consumer.
	// model.ErrInvalid (field "seq") if seq is beyond the last seq of the
	// consumer's box; model.ErrNotFound for an unknown consumer.
	AckConsumer(ctx context.Context, owner, name string, seq, nowMS int64) (model.Consumer, error)
	// BoxLastSeq is the last seq handed out in (owner, box), 0 if none.
	BoxLastSeq(ctx context.Context, owner string, box model.BoxKind) (int64, error)

	// Purge deletes, in one transaction, at most p.Limit records that
	// retention allows to go, then the message bodies of those records
	// that nothing refers to any more, then events older than
	// p.EventsBeforeMS, and appends one retention.purged event (detail: the
	// counts as JSON) if anything went. Callers loop while More is set.
	//
	// A record may go if either
	//   - its state is terminal and updated_at_ms < p.TerminalBeforeMS[its
	//     box family] (a family absent from the map keeps its records), or
	//   - p.Acked is set, it is in a consumer's box at or below that
	//     consumer's AckedSeq, and the queue is not working on it
	//     (AckedPurgeable: not held, not DEAD, not back in the queue after
	//     a claim or a redrive);
	// and in both cases no consumer whose source is the record's box has a
	// SourceSeq below the record's seq: a consumer that has not examined a
	// record yet still needs it. The consumer check is made in the deleting
	// statement itself, so a consumer created concurrently is either seen or
	// ordered after the purge (it then starts from the oldest record kept).
	//
	// A body goes only if no record and no scheduled entry refers to it and
	// it was last stored before p.MessagesBeforeMS: a plan being applied
	// concurrently refreshes that time on the body it reuses. A body whose
	// last record goes before that time is remembered, and goes at a later
	// pass once it is old enough, if nothing refers to it by then.
	Purge(ctx context.Context, p PurgeParams) (PurgeResult, error)
}

// AckedPurgeable is the SQL condition on a consumer's record (alias r)
// that lets a cursor moved past it delete it: a record the consumer also
// works as a queue is not done by the cursor's passing. Held (READING),
// DEAD (a dead letter, listed and redrivable until its family's
// retention period), or UNREAD after the queue touched it (a failed
// attempt waiting for its retry, a release, a redrive, which resets the
// attempts but not the time of the change), it stays until it is
// finished, then goes by its family's period. Only a record never
// claimed, or finished, goes with the cursor.
func AckedPurgeable(r string) string {
	c := model.ConsumerBox("x")
	return fmt.Sprintf("%[1]s.state NOT IN ('%[2]s', '%[3]s') AND NOT (%[1]s.state = '%[4]s' AND "+
		"(%[1]s.attempts > 0 OR %[1]s.updated_at_ms <> %[1]s.created_at_ms))",
		r, model.HeldState(c), model.Dead, model.ClaimableState(c))
}

// ConsumerQuery selects consumers; empty fields match all.
type ConsumerQuery struct {
	Owner       string
	SourceOwner string
	SourceBox   model.BoxKind
}

// ConsumerAdvance is one step of a consumer's fan-out.
type ConsumerAdvance struct {
	Owner, Name string
	// CreatedAtMS is the consumer's, as read with its position; it must
	// match too: a consumer deleted and created again under the same name
	// is another consumer, and a step examined with the old one's filter
	// must not land in the new one (it conflicts, even at the same seq).
	CreatedAtMS   int64
	FromSourceSeq int64
	ToSourceSeq   int64
	Records       []model.Record // Seq is ignored and assigned by the store
	NowMS         int64
}

// PurgeParams is one retention pass.
type PurgeParams struct {
	NowMS            int64
	TerminalBeforeMS map[model.BoxKind]int64
	// GroupLogBeforeMS: records of GROUP_INBOX boxes (a group's log, which
	// no one finishes) last changed before it go whatever their state,
	// unless held or not yet examined by a consumer of their box. 0 keeps
	// them.
	GroupLogBeforeMS int64
	Acked            bool
	MessagesBeforeMS int64
	EventsBeforeMS   int64 // 0: keep every event
	// KeysBeforeMS: idempotency keys bound before it go, and so do the
	// flushed parts of Mails stored before it (store.Mail). 0 keeps them.
	KeysBeforeMS int64
	Limit        int
}

// PurgeResult counts what one Purge call deleted.
type PurgeResult struct {
	Records  map[model.BoxKind]int64 `json:"records,omitempty"` // by box family
	Messages int64                   `json:"messages"`
	Events   int64                   `json:"events"`
	Keys     int64                   `json:"idempotency_keys,omitempty"`
	// MailParts counts flushed Mail parts forgotten.
	MailParts int64 `json:"mail_parts,omitempty"`
	More      bool  `json:"-"`
}

// Empty reports whether nothing was deleted.
func (r PurgeResult) Empty() bool {
	return len(r.Records) == 0 && r.Messages == 0 && r.Events == 0 && r.Keys == 0 && r.MailParts == 0
}
