package store

import "context"

// Mail is the storage of aggregation: inbound messages dispatched with an
// aggregation key wait, as parts of an open bucket, until their burst ends
// (no new part for a window, or a maximum wait since the first), and are
// then written as one message, a Mail (core/mail.go). It is part of Store;
// it lives in its own interface to be read in one place.
//
// A bucket is open while parts may join it: one per MailKey at a time. A
// bucket that is due, or full, is closed (parts with its key open a new
// one) and waits for the flush that consumes it (Plan.ConsumeMail). Parts
// stay known by (MailKey, MsgID) after the flush, without their bodies,
// so a tunnel that dispatches a part again is told which Mail it went
// into instead of starting another; retention forgets them with the
// idempotency keys (PurgeParams.KeysBeforeMS).
type Mail interface {
	// AddMailPart stores p as the next part of MailKey's open bucket,
	// opening one when there is none or when the open one is due at p.NowMS
	// or cannot take p (p.MaxParts parts, or p.MaxCost cost, reached: it
	// is then closed, and due at once). The bucket's due time becomes
	// min(NowMS + its window, its first part's time + its max wait), or
	// NowMS when p fills it. A part already stored (same MailKey and MsgID,
	// or an idempotency key already bound to MsgID) is not stored again:
	// Duplicate is set, with the bucket it is in or the Mail it went into.
	// A mail.part_added event is appended for a new part. An idempotency
	// key bound to another message fails with model.ErrConflict.
	AddMailPart(ctx context.Context, p *MailPart, idem *Idempotency) (MailPartResult, error)
	// DueMail lists the buckets due by beforeMS, open or closed, with their
	// parts in order, in due order (then bucket id); at most limit.
	DueMail(ctx context.Context, beforeMS int64, limit int) ([]MailBucket, error)
	// ListMail lists pending buckets (all, or Sender's) in due order,
	// with their parts' ids but not their bodies; at most q.Limit.
	ListMail(ctx context.Context, q MailQuery) ([]MailBucket, error)
	// CloseMail closes the open buckets due by beforeMS: a part with
	// their key opens a new bucket from then on. The flusher closes what
	// it is about to read, so that no part joins a bucket whose Mail is
	// being built (a node with a late clock, an admin's flush of buckets
	// not yet due). It returns how many it closed.
	CloseMail(ctx context.Context, beforeMS int64) (int, error)
	// NextMailDue returns the earliest due time of any bucket.
	NextMailDue(ctx context.Context) (atMS int64, ok bool, err error)
	// DropMail deletes a bucket holding parts parts, with its parts,
	// without writing a Mail, and appends a mail.dropped event saying why;
	// model.ErrNotFound if there is no such bucket with that many parts.
	DropMail(ctx context.Context, bucketID int64, parts int, nowMS int64, why string) error
}

// MailPart is one dispatched message waiting in a bucket.
type MailPart struct {
	// MailKey names the burst it belongs to (the core derives it from the
	// tunnel, its aggregation key and the recipients).
	MailKey string
	MsgID   string
	Body    []byte // canonical JSON
	// Ctx is the dispatch's ingress context as JSON (may be empty).
	Ctx []byte
	// The bucket's description, stored when this part opens it.
	Sender     string
	Key        string
	Recipients []string
	WindowMS   int64
	MaxWaitMS  int64
	MaxParts   int
	// Cost is what the part adds to its Mail's size; MaxCost bounds a
	// bucket's total.
	Cost    int64
	MaxCost int64
	NowMS   int64
}

// MailPartResult tells where a part is.
type MailPartResult struct {
	// Bucket is the part's pending bucket (zero once it was flushed).
	Bucket MailBucket
	// Duplicate is set when the part was stored before.
	Duplicate bool
	// MailID is the Mail a duplicate part went into, once flushed.
	MailID string
}

// MailBucket is a burst of parts waiting to be written as one Mail.
type MailBucket struct {
	ID         int64
	Sender     string
	Key        string
	Recipients []string
	// Open is set while parts may still join.
	Open      bool
	PartCount int
	Cost      int64
	WindowMS  int64
	MaxWaitMS int64
	FirstAtMS int64
	LastAtMS  int64
	DueAtMS   int64
	// Parts in order (DueMail: with bodies and contexts; ListMail: ids).
	Parts []MailPart
}

// MailQuery selects pending buckets.
type MailQuery struct {
	Sender string
	Limit  int
}

// MailConsume is the bucket a plan writes as its Mail: Apply deletes it,
// and marks its parts as gone into the plan's message, in the same
// transaction, or rolls the whole plan back with model.ErrConflict when
// the bucket is gone or no longer holds Parts parts.
type MailConsume struct {
	BucketID int64
	Parts    int
}
