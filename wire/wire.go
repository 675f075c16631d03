// Package wire defines the request and result shapes of msgcenter's
// operations. The core takes and returns them, the HTTP API encodes them as
// JSON bodies under /v1, and the Go SDK sends and decodes them, so the three
// can never disagree on a field name.
package wire

import (
	"encoding/json"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
)

// DispatchRequest is the body of POST /v1/dispatch (inbound).
type DispatchRequest struct {
	Msg            *message.Message `json:"msg"`
	IngressCtx     *model.Route     `json:"ingress_ctx,omitempty"`
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	// DelayMS <= 0 means immediate, exactly as if absent.
	DelayMS *int64 `json:"delay_ms,omitempty"`
	// DeliverAtMS is an absolute alternative to DelayMS (unix ms).
	DeliverAtMS *int64 `json:"deliver_at_ms,omitempty"`
	// Aggregate makes the message a part of a burst, delivered with the
	// rest of it as one Mail once the burst pauses (see Aggregate).
	Aggregate *Aggregate `json:"aggregate,omitempty"`
}

// Aggregate asks a dispatch to wait for the rest of its burst: the
// messages a tunnel dispatches with the same Key to the same recipients
// are delivered as one message, a Mail, once none came for WindowMS, or
// MaxWaitMS after the first (whichever is first), or when the burst is
// full. Unset durations take the server's defaults (5 s and 30 s).
type Aggregate struct {
	// Key names the burst within the tunnel: a chat, a thread, a session.
	Key       string `json:"key"`
	WindowMS  *int64 `json:"window_ms,omitempty"`
	MaxWaitMS *int64 `json:"max_wait_ms,omitempty"`
}

// AggregateStatus tells a dispatch with Aggregate where its part is.
type AggregateStatus struct {
	// BucketID names the pending Mail the part waits in (0 once written).
	BucketID int64 `json:"bucket_id,omitempty"`
	// Parts is how many parts that Mail has so far.
	Parts int `json:"parts,omitempty"`
	// DueAtMS is when it is to be written, as things stand.
	DueAtMS int64 `json:"due_at_ms,omitempty"`
	// Duplicate is set when the part was dispatched before; MailID is
	// then the Mail it went into, once written.
	Duplicate bool   `json:"duplicate,omitempty"`
	MailID    string `json:"mail_id,omitempty"`
}

// PendingMail is a Mail whose parts are waiting for their burst to end
// (GET /v1/mail/pending).
type PendingMail struct {
	BucketID   int64    `json:"bucket_id"`
	Sender     string   `json:"sender"`
	Key        string   `json:"key"`
	Recipients []string `json:"recipients"`
	// Open is set while parts may still join.
	Open       bool     `json:"open"`
	Parts      int      `json:"parts"`
	PartMsgIDs []string `json:"part_msg_ids"`
	WindowMS   int64    `json:"window_ms"`
	MaxWaitMS  int64    `json:"max_wait_ms"`
	FirstAtMS  int64    `json:"first_at_ms"`
	LastAtMS   int64    `json:"last_at_ms"`
	DueAtMS    int64    `json:"due_at_ms"`
}

// PendingMailQuery selects pending Mails: an admin's choice of senders
// (all by default); anyone else sees its own.
type PendingMailQuery struct {
	Sender string
	Limit  int
}

// PendingMailResult answers GET /v1/mail/pending, soonest due first.
type PendingMailResult struct {
	Mail []PendingMail `json:"mail"`
}

// MailFlushResult answers POST /v1/mail/flush.
type MailFlushResult struct {
	Flushed int `json:"flushed"`
}

// DispatchResult answers a dispatch.
type DispatchResult struct {
	OK                  bool     `json:"ok"`
	MsgID               string   `json:"msg_id"`
	DeliveredRecipients []string `json:"delivered_recipients"`
	DroppedRecipients   []string `json:"dropped_recipients"`
	DeliveredGroup      string   `json:"delivered_group,omitempty"`
	// GroupDelivery says how a group message reached the subscribers: in
	// their INBOXes (members; DeliveredAgents lists them) or once in the
	// group's GROUP_INBOX (group; DeliveredAgents is empty).
	GroupDelivery         model.GroupDelivery `json:"group_delivery,omitempty"`
	DeliveredAgents       []string            `json:"delivered_agents"`
	Reason                string              `json:"reason,omitempty"`
	ScheduledDeliveryTime string              `json:"scheduled_delivery_time,omitempty"`
	// ScheduledID names a delayed message's entry, for DELETE
	// /v1/scheduled/{id}.
	ScheduledID int64 `json:"scheduled_id,omitempty"`
	// Aggregate is set for a dispatch with Aggregate: its part waits for
	// the rest of its burst, and is delivered to no one yet.
	Aggregate *AggregateStatus `json:"aggregate,omitempty"`
}

// SendCtx steers route choice for post_send.
type SendCtx struct {
	// TunnelDID restricts delivery to routes through this tunnel.
	TunnelDID string `json:"tunnel_did,omitempty"`
	// AllRoutes delivers through every route of a recipient instead of the
	// single best one (highest priority, then first listed).
	AllRoutes bool   `json:"all_routes,omitempty"`
	Mode      string `json:"mode,omitempty"`
}

// PostSendRequest is the body of POST /v1/post_send (outbound).
type PostSendRequest struct {
	Msg            *message.Message `json:"msg"`
	SendCtx        *SendCtx         `json:"send_ctx,omitempty"`
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	DelayMS        *int64           `json:"delay_ms,omitempty"`
	DeliverAtMS    *int64           `json:"deliver_at_ms,omitempty"`
}

// Delivery is one planned tunnel delivery of a post_send.
type Delivery struct {
	TunnelDID string `json:"tunnel_did"`
	RecordID  string `json:"record_id"`
	TargetDID string `json:"target_did"`
	Mode      string `json:"mode,omitempty"`
	Priority  int    `json:"priority"`
}

// PostSendResult answers a post_send.
type PostSendResult struct {
	OK                bool       `json:"ok"`
	MsgID             string     `json:"msg_id"`
	OutboxRecordID    string     `json:"outbox_record_id,omitempty"`
	Deliveries        []Delivery `json:"deliveries"`
	LocalRecipients   []string   `json:"local_recipients"`
	DroppedRecipients []string   `json:"dropped_recipients"`
	// GroupDelivery is set for a group message, as in DispatchResult: with
	// group, the subscribers read it in the group's GROUP_INBOX and are not
	// in LocalRecipients.
	GroupDelivery         model.GroupDelivery `json:"group_delivery,omitempty"`
	Reason                string              `json:"reason,omitempty"`
	ScheduledDeliveryTime string              `json:"scheduled_delivery_time,omitempty"`
	// ScheduledID names a delayed message's entry, for DELETE
	// /v1/scheduled/{id}.
	ScheduledID int64 `json:"scheduled_id,omitempty"`
}

// NextRequest is the body of POST /v1/boxes/{owner}/{box}/next (get_next).
type NextRequest struct {
	StateFilter []model.State `json:"state_filter,omitempty"`
	// LockOnTake (default true) claims the record with a lease; false only
	// peeks at it.
	LockOnTake *bool `json:"lock_on_take,omitempty"`
	// WithObject (default true) includes the message body.
	WithObject *bool  `json:"with_object,omitempty"`
	LeaseMS    int64  `json:"lease_ms,omitempty"`
	WaitMS     int64  `json:"wait_ms,omitempty"`
	Holder     string `json:"holder,omitempty"`
}

// RecordWithMsg is a record and, when asked for, its message.
type RecordWithMsg struct {
	Record model.Record    `json:"record"`
	Msg    json.RawMessage `json:"msg,omitempty"`
}

// StateRequest is the body of POST /v1/records/{id}/state.
type StateRequest struct {
	NewState model.State `json:"new_state"`
	Reason   string      `json:"reason,omitempty"`
	// LeaseID, when set, must match the record's current lease.
	LeaseID string `json:"lease_id,omitempty"`
	// WithObject (default true) includes the message body in the answer.
	WithObject *bool `json:"with_object,omitempty"`
	// Next, when set, claims the box's next record once this change is
	// made, as get_next with these parameters would (lock_on_take must
	// stay true), and answers it in the result's next: an ack and the
	// next claim in one call. It is checked before anything changes; the
	// change stands even if the claim then fails (StateResult.NextError).
	Next *NextRequest `json:"next,omitempty"`
}

// DeliveryResult is what a consumer or tunnel reports for a held record.
type DeliveryResult struct {
	OK            bool   `json:"ok"`
	ExternalMsgID string `json:"external_msg_id,omitempty"`
	ErrorCode     string `json:"error_code,omitempty"`
	ErrorMessage  string `json:"error_message,omitempty"`
	Retryable     bool   `json:"retryable,omitempty"`
	// RetryAfterMS is at most MaxRetryAfterMS.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

// MaxRetryAfterMS bounds a reported retry_after_ms (7 days): a platform's
// wait is seconds to hours, and a record put off for years by a typo could
// never be claimed again by anyone.
const MaxRetryAfterMS = 7 * 24 * 3600 * 1000

// DeliveryRequest is the body of POST /v1/records/{id}/delivery.
type DeliveryRequest struct {
	Result  *DeliveryResult `json:"result"`
	LeaseID string          `json:"lease_id,omitempty"`
	// WithObject (default true) includes the message body in the answer:
	// a consumer acknowledging what it already read can leave it out.
	WithObject *bool `json:"with_object,omitempty"`
	// Next, when set, claims the box's next record once this change is
	// made, as get_next with these parameters would (lock_on_take must
	// stay true), and answers it in the result's next: an ack and the
	// next claim in one call. It is checked before anything changes; the
	// change stands even if the claim then fails (StateResult.NextError).
	Next *NextRequest `json:"next,omitempty"`
}

// StateResult answers a state change or a delivery report: the record as
// it is now and, when the request asked for next, the box's next record,
// claimed (absent: nothing came within next.wait_ms).
type StateResult struct {
	RecordWithMsg
	Next *RecordWithMsg `json:"next,omitempty"`
	// NextError says why no next record came when the change was made
	// but claiming one failed: the change stands, the record above is the
	// changed one, and get_next can be asked again.
	NextError *ErrorDetail `json:"next_error,omitempty"`
}

// LeaseRequest extends the lease of a held record.
type LeaseRequest struct {
	LeaseMS int64  `json:"lease_ms,omitempty"`
	LeaseID string `json:"lease_id,omitempty"`
}

// RedriveRequest is the body of a bulk redrive of a box's DEAD records.
type RedriveRequest struct {
	Limit int `json:"limit,omitempty"`
}

// RedriveResult answers a bulk redrive.
type RedriveResult struct {
	Redriven  int      `json:"redriven"`
	RecordIDs []string `json:"record_ids"`
}

// ListResult is a page of records by time.
type ListResult struct {
	Items              []RecordWithMsg `json:"items"`
	NextCursorSortKey  int64           `json:"next_cursor_sort_key,omitempty"`
	NextCursorRecordID string          `json:"next_cursor_record_id,omitempty"`
}

// SyncResult is a page of records by seq. LastSeq is the cursor to pass as
// after_seq next time.
type SyncResult struct {
	Items   []RecordWithMsg `json:"items"`
	LastSeq int64           `json:"last_seq"`
}

// ReceiptRequest is set_read_state.
type ReceiptRequest struct {
	GroupID   string              `json:"group_id,omitempty"`
	MsgID     string              `json:"msg_id"`
	ReaderDID string              `json:"reader_did"`
	Status    model.ReceiptStatus `json:"status"`
	Reason    string              `json:"reason,omitempty"`
	AtMS      int64               `json:"at_ms,omitempty"`
}

// ReceiptsResult lists receipts.
type ReceiptsResult struct {
	Items []model.Receipt `json:"items"`
	// Set when the page is full: pass them back for the next page.
	NextCursorAtMS   int64  `json:"next_cursor_at_ms,omitempty"`
	NextCursorMsgID  string `json:"next_cursor_msg_id,omitempty"`
	NextCursorReader string `json:"next_cursor_reader,omitempty"`
}

// SubscribersRequest replaces a group's subscribers. Delivery, when set,
// changes how the group's messages reach them; empty keeps it (members for
// a new group).
type SubscribersRequest struct {
	Subscribers []string            `json:"subscribers"`
	Delivery    model.GroupDelivery `json:"delivery,omitempty"`
}

// SubscribersResult lists a group's subscribers and its delivery.
type SubscribersResult struct {
	Group       string              `json:"group"`
	Subscribers []string            `json:"subscribers"`
	Delivery    model.GroupDelivery `json:"delivery"`
}

// BlockResult answers block and unblock.
type BlockResult struct {
	Owner   string `json:"owner"`
	DID     string `json:"did"`
	Blocked bool   `json:"blocked"`
}

// BlocksResult lists whom an owner blocks, by DID.
type BlocksResult struct {
	Items []model.Block `json:"items"`
}

// RoutesRequest replaces a DID's routes.
type RoutesRequest struct {
	Routes []model.ContactRoute `json:"routes"`
}

// RoutesResult lists a DID's routes.
type RoutesResult struct {
	DID    string               `json:"did"`
	Routes []model.ContactRoute `json:"routes"`
}

// ReadConversationRequest is the body of POST
// /v1/owners/{owner}/conversations/read.
type ReadConversationRequest struct {
	ThreadKey string `json:"thread_key"`
	// UpToSeq, when set, reads only the records up to this INBOX seq (what
	// the reader has seen); 0 reads the whole conversation.
	UpToSeq int64 `json:"up_to_seq,omitempty"`
}

// ReadConversationResult says how many records were read, and More that
// the conversation holds more unread ones: call again.
type ReadConversationResult struct {
	Read int  `json:"read"`
	More bool `json:"more"`
}

// ConversationsResult lists an owner's conversations, latest first.
type ConversationsResult struct {
	Items []model.Conversation `json:"items"`
	// Set when the page is full: pass them back for the next page.
	NextCursorUpdatedAtMS int64  `json:"next_cursor_updated_at_ms,omitempty"`
	NextCursorThreadKey   string `json:"next_cursor_thread_key,omitempty"`
}

// ConversationQuery pages GET /v1/owners/{owner}/conversations, most
// recently updated first; the cursor is the last conversation of the page
// before (both fields, or neither).
type ConversationQuery struct {
	Owner             string
	Limit             int
	CursorUpdatedAtMS int64
	CursorThreadKey   string
}

// EventsResult is a page of the event log; pass NextAfter as after.
type EventsResult struct {
	Items     []model.Event `json:"items"`
	NextAfter int64         `json:"next_after"`
}

// ScheduledItem is one pending delayed message.
type ScheduledItem struct {
	ID                    int64    `json:"id"`
	Op                    string   `json:"op"`
	MsgID                 string   `json:"msg_id"`
	Recipients            []string `json:"recipients"`
	DueAtMS               int64    `json:"due_at_ms"`
	ScheduledDeliveryTime string   `json:"scheduled_delivery_time"`
	CreatedAtMS           int64    `json:"created_at_ms"`
	// Sender: the author of a post_send, the tunnel of a dispatch; empty
	// for a dispatch that named no tunnel.
	Sender string `json:"sender,omitempty"`
}

// ScheduledResult lists pending delayed messages with their total count.
type ScheduledResult struct {
	Count int64           `json:"count"`
	Items []ScheduledItem `json:"items"`
}

// FlushRequest materializes pending delayed messages now.
type FlushRequest struct {
	Recipient string `json:"recipient,omitempty"`
}

// FlushResult answers a flush.
type FlushResult struct {
	Flushed int `json:"flushed"`
}

// TokenRequest creates a token.
type TokenRequest struct {
	DID  string     `json:"did"`
	Role model.Role `json:"role"`
}

// TokenResult carries a new token; it is shown once and stored hashed.
// TokenID names it for listing and revoking.
type TokenResult struct {
	Token   string     `json:"token"`
	TokenID string     `json:"token_id"`
	DID     string     `json:"did"`
	Role    model.Role `json:"role"`
}

// TokenInfo describes a stored token (never the token itself, which the
// server does not keep).
type TokenInfo struct {
	TokenID     string     `json:"token_id"`
	DID         string     `json:"did"`
	Role        model.Role `json:"role"`
	CreatedAtMS int64      `json:"created_at_ms"`
}

// TokenQuery filters GET /v1/tokens.
type TokenQuery struct {
	DID   string
	Limit int
}

// TokensResult is a page of tokens, oldest first.
type TokensResult struct {
	Items []TokenInfo `json:"items"`
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names a stable code, a message and the offending field.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Error codes.
const (
	CodeInvalid           = "invalid_argument"
	CodeNotFound          = "not_found"
	CodeConflict          = "conflict"
	CodeInvalidTransition = "invalid_transition"
	CodeTooLarge          = "too_large"
	CodeUnauthorized      = "unauthorized"
	CodeForbidden         = "forbidden"
	CodeLeaseLost         = "lease_lost"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeInternal          = "internal"
	CodeUnavailable       = "unavailable"
	// CodeNotAcceptable answers a stream request that is neither a
	// WebSocket upgrade nor asks for text/event-stream.
	CodeNotAcceptable = "not_acceptable"
	// CodeTooMany answers a request over a per-caller bound on what is
	// open at once (an agent's streams).
	CodeTooMany = "too_many_requests"
)

// WhoAmI answers GET /v1/whoami: whom the caller's token speaks for.
type WhoAmI struct {
	DID  string     `json:"did"`
	Role model.Role `json:"role"`
}
