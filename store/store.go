// Package store defines the one storage interface msgcenter's core runs on.
// Drivers (store/sqlite, later store/postgres) implement it and must pass
// the shared conformance suite in store/storetest.
//
// The interface is deliberately dumb: the core decides what to write (which
// records, which transitions, which retry time) and the store applies it
// atomically. Every write that can race is a compare-and-set, so the same
// rules hold across goroutines, processes and nodes. Time is always passed
// in by the caller, never read from the clock inside a driver.
package store

import (
	"context"
	"fmt"

	"github.com/msgcenter/msgcenter/model"
)

// Store is the storage interface. All methods are safe for concurrent use.
// Errors wrap model sentinels: model.ErrNotFound, model.ErrConflict.
type Store interface {
	// Apply writes one delivery plan in one transaction: the message body
	// (if absent), every record that does not exist yet (seq assigned now,
	// in plan order), one record.created event per new record, conversation
	// updates and the idempotency key. Records that already exist are left
	// untouched and reported in ApplyResult.Existing. If ConsumeSchedule is
	// set, the scheduled entry is deleted in the same transaction; if it is
	// already gone the whole plan is rolled back with model.ErrConflict.
	// If the idempotency key is already bound to another message, nothing is
	// written and the error wraps model.ErrConflict. A key bound to the
	// same message by a send made now makes the plan a repeat: nothing is
	// written, and the error (KeyRepeated) carries the Answer the key was
	// bound with; one bound by a delayed send, KeyScheduled, unless the
	// plan consumes that send's entry.
	Apply(ctx context.Context, p *Plan) (*ApplyResult, error)

	// Schedule stores a message and an entry to be materialized at DueAtMS.
	// A second entry for the same (op, msg_id) is not created; created says
	// whether this call made it, and e.ID and e.DueAtMS are set to the
	// stored entry's. A message.scheduled event is appended. With idem, a
	// repeat (the key bound to the same message) schedules nothing and
	// answers the entry the key made, even one that came due or was
	// cancelled since; id and e.DueAtMS are zero when the key made none
	// and the message has no pending entry.
	Schedule(ctx context.Context, e *ScheduleEntry, idem *Idempotency) (id int64, created bool, err error)
	// DueScheduled lists entries with due_at_ms <= BeforeMS, optionally only
	// those for one recipient, ordered by (due_at_ms, id): send order.
	DueScheduled(ctx context.Context, p DueParams) ([]ScheduleEntry, error)
	// ListScheduled lists pending entries (all, or those q selects) in due
	// order, with the total count of the selection.
	ListScheduled(ctx context.Context, q ScheduleQuery) ([]ScheduleEntry, int64, error)
	// GetScheduled returns one pending entry, model.ErrNotFound when there
	// is none (it came due, or was cancelled).
	GetScheduled(ctx context.Context, id int64) (ScheduleEntry, error)
	// CancelScheduled removes a pending entry with its recipients, and its
	// message's body unless a record or another entry refers to it, and
	// appends a message.schedule_cancelled event, in one transaction;
	// model.ErrNotFound when it is gone already.
	// A non-empty dropped says why the server dropped the entry instead:
	// the event is then message.schedule_dropped, with the reason.
	CancelScheduled(ctx context.Context, id, nowMS int64, dropped string) error
	// NextDue returns the earliest due time of any pending entry.
	NextDue(ctx context.Context) (atMS int64, ok bool, err error)

	GetMessage(ctx context.Context, msgID string) ([]byte, error)
	// GetMessages returns the bodies of the messages that exist among ids,
	// keyed by id, in one round trip (pages of records need many bodies).
	GetMessages(ctx context.Context, ids []string) (map[string][]byte, error)
	// CanReadMessage reports whether did owns a record of the message, or
	// belongs to a group whose GROUP_INBOX holds it (members who joined
	// later read the group's history).
	CanReadMessage(ctx context.Context, did, msgID string) (bool, error)
	// CameThrough reports whether the message came in through tunnel (an
	// INBOX record's route names it): a tunnel may read what it brought
	// in, to answer it (a mail's subject), and nothing more of it.
	CameThrough(ctx context.Context, tunnel, msgID string) (bool, error)

	GetRecord(ctx context.Context, recordID string) (model.Record, error)
	// Claim atomically takes the visible record with the lowest seq in
	// (Owner, Box) whose state is From and whose visible_at_ms <= NowMS,
	// moves it to To with the given lease, and appends a record.claimed
	// event. model.ErrNotFound when there is none.
	Claim(ctx context.Context, p ClaimParams) (model.Record, error)
	// Update is a compare-and-set on one record: it applies only if the
	// record is still in From (and, when ExpectLeaseID is set, still holds
	// that lease, not merely ended it: Record.Ended). Otherwise
	// model.ErrConflict and nothing changes.
	Update(ctx context.Context, u *Update) (model.Record, error)
	// UpdateThenClaim is Update and then, only if the update succeeded, a
	// Claim of p, as one write where the store can (a worker's ack that
	// asks for its next record). The claim's outcome, a not-found
	// included, is in the Claimed; err is the update's.
	UpdateThenClaim(ctx context.Context, u *Update, p ClaimParams) (model.Record, Claimed, error)
	ListRecords(ctx context.Context, p ListParams) ([]model.Record, error)
	Sync(ctx context.Context, p SyncParams) ([]model.Record, error)
	// ExpiredLeases lists held records whose lease expired at or before NowMS.
	ExpiredLeases(ctx context.Context, nowMS int64, limit int) ([]model.Record, error)
	// NextLeaseExpiry returns the earliest lease expiry of any held record.
	NextLeaseExpiry(ctx context.Context) (atMS int64, ok bool, err error)
	// NextVisible returns the earliest visible_at_ms > afterMS among records
	// of (owner, box) in state: when a waiting claimer should try again.
	NextVisible(ctx context.Context, owner string, box model.BoxKind, state model.State, afterMS int64) (atMS int64, ok bool, err error)
	// Claimable reports whether a Claim of (owner, box) from state at nowMS
	// would find a record. It is a read: a waiting claimer woken by a change
	// that left nothing to take asks this instead of queueing a write.
	Claimable(ctx context.Context, owner string, box model.BoxKind, state model.State, nowMS int64) (bool, error)
	// CountRecords counts records by box kind and state, for metrics.
	CountRecords(ctx context.Context) ([]BoxStateCount, error)

	// SetGroupSubscribers replaces a group's subscribers, which makes group
	// a group. delivery "" keeps the group's delivery (members for a new
	// group).
	SetGroupSubscribers(ctx context.Context, group string, subscribers []string, delivery model.GroupDelivery, nowMS int64) error
	// DeleteGroup makes group a plain DID again: its subscribers and
	// delivery go (its GROUP_INBOX records stay, for retention), with a
	// group.deleted event. model.ErrNotFound if it is not a group.
	DeleteGroup(ctx context.Context, group string, nowMS int64) error
	// GroupSubscribers returns model.ErrNotFound if group is not a group.
	GroupSubscribers(ctx context.Context, group string) ([]string, error)
	// GroupDelivery returns how group delivers its messages, or "" if it is
	// not a group.
	GroupDelivery(ctx context.Context, group string) (model.GroupDelivery, error)
	IsSubscriber(ctx context.Context, group, did string) (bool, error)
	SetBlock(ctx context.Context, owner, blocked string, on bool, nowMS int64) error
	// BlockedBy returns which of owners block sender.
	BlockedBy(ctx context.Context, sender string, owners []string) (map[string]bool, error)
	// ListBlocks lists whom owner blocks, by DID, at most limit.
	ListBlocks(ctx context.Context, owner string, limit int) ([]model.Block, error)
	SetRoutes(ctx context.Context, did string, routes []model.ContactRoute, nowMS int64) error
	Routes(ctx context.Context, did string) ([]model.ContactRoute, error)
	// RoutesOf is Routes for many DIDs in one read (a group fan-out asks
	// about every member): the routes of each of dids that has any, in
	// their order. The caller may not change them.
	RoutesOf(ctx context.Context, dids []string) (map[string][]model.ContactRoute, error)

	// PutReceipt stores r unless a receipt for (msg, reader) with a later
	// at_ms exists: the latest wins. It returns the receipt now stored.
	// A receipt stored or changed appends a receipt.set event at nowMS.
	PutReceipt(ctx context.Context, r model.Receipt, nowMS int64) (model.Receipt, error)
	ListReceipts(ctx context.Context, f ReceiptFilter) ([]model.Receipt, error)

	ListConversations(ctx context.Context, q ConversationQuery) ([]model.Conversation, error)
	ListEvents(ctx context.Context, f EventFilter) ([]model.Event, error)
	// LastEventID returns the highest event id handed out, 0 before the
	// first: ids are never reused, so retention does not lower it, and a
	// cursor above it belongs to another store.
	LastEventID(ctx context.Context) (int64, error)

	Consumers
	Mail

	PutToken(ctx context.Context, hash string, id model.Identity, nowMS int64) error
	// Token returns model.ErrNotFound for an unknown hash.
	Token(ctx context.Context, hash string) (model.Identity, error)
	// ListTokens lists the tokens bound to did ("" for every DID), oldest
	// first, at most limit.
	ListTokens(ctx context.Context, did string, limit int) ([]model.TokenInfo, error)
	// HoldsToken reports whether any token is bound to did: a tunnel's
	// every dispatch asks it of its author. Remembered as Token's answers
	// are: tokens bound or deleted through this store are seen at once,
	// other nodes' within the store's token TTL.
	HoldsToken(ctx context.Context, did string) (bool, error)
	// DeleteToken deletes the one token bound to did ("" for any DID) whose
	// hash starts with prefix, and returns it: model.ErrNotFound if none
	// does, model.ErrConflict if more than one does (nothing is deleted
	// then).
	DeleteToken(ctx context.Context, did, prefix string, nowMS int64) (model.TokenInfo, error)

	Close() error
}

// Notifier is implemented by drivers whose database several nodes share.
// Listen delivers to this node every change committed by any node — a box
// that got a record or a state change, or a new delayed message — so a long
// poll or a stream wakes up wherever the write happened, without polling.
// It returns when ctx ends (or with an error when the connection it listens
// on is lost; the caller listens again).
//
// ready is called once the node is listening: a node should not take
// requests before, or a change made meanwhile would wake nobody here.
type Notifier interface {
	Listen(ctx context.Context, ready func(), fn func(Change)) error
}

// Change is one notification of a Notifier.
type Change struct {
	Owner string
	Box   model.BoxKind
	// Scheduled is set for a new delayed message (Owner and Box empty).
	Scheduled bool
}

// Plan is what one dispatch or post_send (or a scheduled entry coming due)
// writes.
type Plan struct {
	MsgID   string
	MsgBody []byte         // canonical JSON
	Records []model.Record // Seq is ignored and assigned by the store
	NowMS   int64
	Idem    *Idempotency
	// ConsumeSchedule, when non-zero, is the scheduled entry this plan
	// materializes.
	ConsumeSchedule int64
	// ConsumeMail, when set, is the bucket of parts this plan's message
	// (their Mail) is written from (see MailConsume).
	ConsumeMail *MailConsume `json:",omitempty"`
}

// ApplyResult tells which records were created (with their seq) and which
// already existed.
type ApplyResult struct {
	Created  []model.Record
	Existing []string
}

// Idempotency binds a caller-supplied key, within a scope (caller and
// operation), to the message it first carried.
type Idempotency struct {
	Scope string
	Key   string
	// Answer is what the caller answered the send that binds the key (its
	// result as JSON), kept with the key for the repeats (KeyRepeated).
	Answer []byte `json:",omitempty"`
}

// ScheduleEntry is a delayed dispatch or post_send.
type ScheduleEntry struct {
	ID          int64    `json:"id"`
	Op          string   `json:"op"` // "dispatch" or "post_send"
	MsgID       string   `json:"msg_id"`
	MsgBody     []byte   `json:"-"`
	Ctx         []byte   `json:"-"` // the op's context (ingress_ctx / send_ctx) as JSON
	Recipients  []string `json:"recipients"`
	DueAtMS     int64    `json:"due_at_ms"`
	CreatedAtMS int64    `json:"created_at_ms"`
	// Sender is who sent it, who may list and cancel it besides an admin:
	// a post_send's author, a dispatch's tunnel; empty when no one is
	// named (a dispatch without an ingress context).
	Sender string `json:"sender,omitempty"`
}

// KeyScheduled is the kind of the conflict Apply answers for a plan whose
// idempotency key a delayed send bound (Schedule) and that does not
// consume that send's entry: a repeat of the delayed send made at or after
// its due time, which must not send the message again. It names the
// entry the key made, for the repeat's answer.
type KeyScheduled struct {
	ID      int64
	DueAtMS int64
}

func (k *KeyScheduled) Error() string {
	return fmt.Sprintf("the idempotency key made scheduled entry %d", k.ID)
}

// Unwrap makes it a conflict wherever it is not answered as a repeat.
func (k *KeyScheduled) Unwrap() error { return model.ErrConflict }

// ScheduledByKey is Apply's answer to a plan whose key made scheduled
// entry id, due at dueAtMS (KeyScheduled).
func ScheduledByKey(key string, id, dueAtMS int64) *model.Error {
	return &model.Error{Kind: &KeyScheduled{ID: id, DueAtMS: dueAtMS}, Field: "idempotency_key",
		Message: fmt.Sprintf("idempotency key %q was used for a delayed send (scheduled entry %d): repeat it as it was sent", key, id)}
}

// KeyRepeated is the kind of the conflict Apply answers for a plan whose
// idempotency key a send made now already bound to the same message: a
// repeat, which writes nothing, however the recipients' routes, groups or
// blocks changed since (planned again, it could reach other boxes). It
// carries the first send's answer (nil for a key bound before answers
// were kept).
type KeyRepeated struct {
	Answer []byte
}

func (k *KeyRepeated) Error() string { return "the idempotency key was used for this message already" }

// Unwrap makes it a conflict wherever it is not answered as a repeat.
func (k *KeyRepeated) Unwrap() error { return model.ErrConflict }

// RepeatedKey is Apply's answer to a plan whose key a send made now bound
// to the plan's message, with that send's answer (KeyRepeated).
func RepeatedKey(key string, answer []byte) *model.Error {
	return &model.Error{Kind: &KeyRepeated{Answer: answer}, Field: "idempotency_key",
		Message: fmt.Sprintf("idempotency key %q was used for this message already: a repeat writes nothing", key)}
}

// BoundKey is the verdict on a plan whose idempotency key was bound to the
// plan's message before it (both drivers decide it here): a repeat of the
// delayed send that made entry sched, due at dueAtMS, unless the plan is
// that entry coming due (KeyScheduled); a repeat of the send made now that
// kept answer (KeyRepeated), unless the plan materializes an entry or a
// Mail; else nil, the plan goes ahead.
func BoundKey(p *Plan, sched, dueAtMS int64, answer []byte) error {
	switch {
	case sched != 0 && sched != p.ConsumeSchedule:
		return ScheduledByKey(p.Idem.Key, sched, dueAtMS)
	case sched == 0 && p.ConsumeSchedule == 0 && p.ConsumeMail == nil:
		return RepeatedKey(p.Idem.Key, answer)
	}
	return nil
}

// ScheduleQuery selects pending entries: those of one sender, for one
// recipient, of one op ("dispatch" or "post_send"), or any of these ("" selects
// all); at most Limit of them.
type ScheduleQuery struct {
	Sender    string
	Recipient string
	Op        string
	Limit     int
}

// DueParams selects due schedule entries.
type DueParams struct {
	BeforeMS  int64
	Recipient string
	Limit     int
}

// ClaimParams selects and leases the next record.
type ClaimParams struct {
	Owner        string
	Box          model.BoxKind
	From, To     model.State
	NowMS        int64
	LeaseID      string
	Holder       string
	LeaseUntilMS int64
}

// Claimed is the claim UpdateThenClaim made after its update: the record
// taken, or why none was (a not-found when nothing was claimable).
type Claimed struct {
	Record model.Record
	Err    error
}

// Update is a compare-and-set state change with its new bookkeeping.
type Update struct {
	RecordID      string
	From          model.State
	ExpectLeaseID string
	To            model.State
	Delivery      model.Delivery
	// VisibleAtMS is when the record may be claimed again (retry backoff).
	VisibleAtMS int64
	// Lease replaces the current lease; nil clears it.
	Lease *model.Lease
	// EndsLease, with Lease nil, is the lease the holder ends by this
	// change (ExpectLeaseID, given by the holder itself rather than by a
	// reaper) and what kind of change it is: the record keeps it as its
	// Ended.
	EndsLease   *model.EndedLease `json:",omitempty"`
	NowMS       int64
	EventType   string
	EventDetail string
	// Notice, when set, is a second event written with the change, owned
	// by someone other than the record's owner: the author of a message a
	// tunnel delivers hears of the delivery's end from its own event log.
	// Written only if the change is.
	Notice *Notice `json:",omitempty"`
	// Receipt, when set, is a read receipt stored with the change, and
	// only if the change is: a group member's ack of a group message is
	// its read. It is stored unless the reader's receipt of the message
	// holds a decision (any status but UNREAD and READING) or is newer,
	// and a receipt.set event says so when it is (ReceiptEvent).
	Receipt *model.Receipt `json:",omitempty"`
}

// Notice is an event about a record's change for another owner: the same
// record, message, states and time as the change's own event.
type Notice struct {
	Owner  string
	Type   string
	Detail string
}

// ConversationQuery pages an owner's conversations, most recently updated
// first: after the conversation (CursorUpdatedAtMS, CursorThreadKey) when
// CursorThreadKey is set (the last of the page before).
type ConversationQuery struct {
	Owner             string
	Limit             int
	CursorUpdatedAtMS int64
	CursorThreadKey   string
}

// ListParams pages a box by (sort_key, record_id).
type ListParams struct {
	Owner          string
	Box            model.BoxKind
	States         []model.State
	Tag            string
	Desc           bool
	CursorSortKey  int64
	CursorRecordID string // empty: start from the beginning (or end, if Desc)
	Limit          int
}

// SyncParams reads a box as a log, by seq.
type SyncParams struct {
	Owner     string
	Box       model.BoxKind
	AfterSeq  int64
	Limit     int
	ThreadKey string
	States    []model.State
}

// ReceiptFilter selects receipts; at least one field should be set.
type ReceiptFilter struct {
	MsgID   string
	GroupID string
	Reader  string
	Limit   int
	// The cursor, when CursorMsgID is set: receipts after (at_ms,
	// msg_id, reader), the order of the list.
	CursorAtMS   int64
	CursorMsgID  string
	CursorReader string
}

// EventFilter pages the event log.
type EventFilter struct {
	After int64
	Owner string
	Limit int
}

// BoxStateCount is one row of CountRecords.
type BoxStateCount struct {
	Box   model.BoxKind
	State model.State
	Count int64
}
