package model

// ReceiptStatus is a reader's status for one message.
type ReceiptStatus string

// Receipt statuses (MsgReceiptObj).
const (
	ReceiptUnread      ReceiptStatus = "UNREAD"
	ReceiptReading     ReceiptStatus = "READING"
	ReceiptReaded      ReceiptStatus = "READED"
	ReceiptAccepted    ReceiptStatus = "ACCEPTED"
	ReceiptRejected    ReceiptStatus = "REJECTED"
	ReceiptQuarantined ReceiptStatus = "QUARANTINED"
)

// ValidReceiptStatus reports whether s is a known receipt status.
func ValidReceiptStatus(s ReceiptStatus) bool {
	switch s {
	case ReceiptUnread, ReceiptReading, ReceiptReaded, ReceiptAccepted, ReceiptRejected, ReceiptQuarantined:
		return true
	}
	return false
}

// Receipt is a read receipt: one reader's state for one message. The latest
// receipt per (msg, reader) wins.
type Receipt struct {
	MsgID   string        `json:"msg_id"`
	Iss     string        `json:"iss"`
	Reader  string        `json:"reader"`
	GroupID string        `json:"group_id,omitempty"`
	AtMS    int64         `json:"at_ms"`
	Status  ReceiptStatus `json:"status"`
	Reason  string        `json:"reason,omitempty"`
}

// GroupDelivery is how a group's messages reach its subscribers (seed
// 000's two options for group chat).
type GroupDelivery string

const (
	// DeliverToMembers writes an INBOX record for every subscriber: each
	// member claims, acks and counts unread group messages in its own
	// INBOX, and a member's blocks apply. A send costs a record per
	// subscriber, so it suits small groups.
	DeliverToMembers GroupDelivery = "members"
	// DeliverToGroup stores the message once, in the group's GROUP_INBOX,
	// which every subscriber may read (sync, stream, get), mark with read
	// receipts, and consume through a consumer of its own. A send costs the
	// same whatever the group's size; members' INBOXes and blocks are not
	// involved.
	DeliverToGroup GroupDelivery = "group"
)

// ValidGroupDelivery reports whether d is a known delivery.
func ValidGroupDelivery(d GroupDelivery) bool { return d == DeliverToMembers || d == DeliverToGroup }

// ContactRoute is one endpoint through which a DID can be reached.
type ContactRoute struct {
	TunnelDID string `json:"tunnel_did"`
	Address   string `json:"address,omitempty"`
	Platform  string `json:"platform,omitempty"`
	ChatID    string `json:"chat_id,omitempty"`
	AccountID string `json:"account_id,omitempty"`
	Mode      string `json:"mode,omitempty"`
	Priority  int    `json:"priority,omitempty"`
}

// Conversation is the per-owner summary of one thread (seed 004).
type Conversation struct {
	Owner        string  `json:"owner"`
	ThreadKey    string  `json:"thread_key"`
	LastMsgID    string  `json:"last_msg_id"`
	LastRecordID string  `json:"last_record_id"`
	LastBox      BoxKind `json:"last_box"`
	LastSeq      int64   `json:"last_seq"`
	UnreadCount  int64   `json:"unread_count"`
	UpdatedAtMS  int64   `json:"updated_at_ms"`
}

// Event is one entry of the append-only event log.
type Event struct {
	EventID   int64   `json:"event_id"`
	Type      string  `json:"type"`
	Owner     string  `json:"owner,omitempty"`
	BoxKind   BoxKind `json:"box_kind,omitempty"`
	RecordID  string  `json:"record_id,omitempty"`
	MsgID     string  `json:"msg_id,omitempty"`
	FromState State   `json:"from_state,omitempty"`
	ToState   State   `json:"to_state,omitempty"`
	AtMS      int64   `json:"at_ms"`
	Detail    string  `json:"detail,omitempty"`
}

// Event types.
const (
	EventRecordCreated   = "record.created"
	EventRecordState     = "record.state_changed"
	EventRecordClaimed   = "record.claimed"
	EventRecordRetry     = "record.retry_scheduled"
	EventRecordDead      = "record.dead"
	EventLeaseExpired    = "record.lease_expired"
	EventLeaseExtended   = "record.lease_extended"
	EventRecordDelivered = "record.delivered"
	EventRecordRedriven  = "record.redriven"

	// What the author of a message hears of its deliveries through
	// tunnels: the owner is the author (the message's source when a group
	// speaks), the record the tunnel's TUNNEL_OUTBOX record, which the
	// author may read. Sent and dead end a delivery; redriven reopens a
	// dead one.
	EventDeliverySent     = "delivery.sent"
	EventDeliveryDead     = "delivery.dead"
	EventDeliveryRedriven = "delivery.redriven"
	EventMsgScheduled     = "message.scheduled"
	EventMsgCancelled     = "message.schedule_cancelled"
	// EventMsgDropped: the server dropped a delayed message that came due
	// but could no longer be delivered (its author left the group it
	// speaks for, say); the detail says why.
	EventMsgDropped = "message.schedule_dropped"

	// Changes to contacts and tokens, written with the change; the owner
	// is the group, the blocking owner, the routed DID or the token's DID.
	EventGroupSet     = "group.subscribers_set"
	EventGroupDeleted = "group.deleted"
	EventBlocked      = "contact.blocked"
	EventUnblocked    = "contact.unblocked"
	EventRoutesSet    = "contact.routes_set"
	EventTokenCreated = "token.created"
	EventTokenRevoked = "token.revoked"

	// A reader's receipt for a message stored or changed (set_read_state);
	// the owner is the group when the receipt names one, else the reader;
	// msg_id names the message, the detail the reader and the status.
	EventReceiptSet = "receipt.set"

	// Aggregation (store.Mail); the owner is the tunnel that dispatched
	// the parts. mail.flushed names the Mail in msg_id, mail.part_added
	// the part.
	EventMailPartAdded = "mail.part_added"
	EventMailFlushed   = "mail.flushed"
	EventMailDropped   = "mail.dropped"
)

// EventTypes lists every event type, in the order the API documents them
// (a test keeps it complete).
var EventTypes = []string{EventRecordCreated, EventRecordState, EventRecordClaimed, EventRecordRetry,
	EventRecordDead, EventLeaseExpired, EventLeaseExtended, EventRecordDelivered, EventRecordRedriven,
	EventDeliverySent, EventDeliveryDead, EventDeliveryRedriven,
	EventMsgScheduled, EventMsgCancelled, EventMsgDropped, EventConsumerCreated, EventConsumerDeleted, EventPurged,
	EventGroupSet, EventGroupDeleted, EventBlocked, EventUnblocked, EventRoutesSet, EventTokenCreated, EventTokenRevoked,
	EventReceiptSet, EventMailPartAdded, EventMailFlushed, EventMailDropped}

// Role is what a token may do.
type Role string

// Token roles.
const (
	RoleAdmin  Role = "admin"
	RoleAgent  Role = "agent"
	RoleTunnel Role = "tunnel"
)

// ValidRole reports whether r is a known role.
func ValidRole(r Role) bool { return r == RoleAdmin || r == RoleAgent || r == RoleTunnel }

// Identity is who is calling: the DID a token is bound to and its role.
type Identity struct {
	DID  string `json:"did"`
	Role Role   `json:"role"`
}

// Block is one owner refusing one sender (a DID or a group).
type Block struct {
	Owner string `json:"owner"`
	DID   string `json:"did"`
	AtMS  int64  `json:"at_ms"`
}

// TokenIDLen is how much of a token's hash names it: 64 bits, so that two
// tokens of a server share an id only by a chance nobody meets (and a
// revoke by an id two tokens share refuses to pick one).
const TokenIDLen = 16

// TokenID names a stored token by the start of its hash, which says
// nothing of the token.
func TokenID(hash string) string { return hash[:min(len(hash), TokenIDLen)] }

// TokenInfo is a stored token: its hash (never the token), the identity it
// acts as, and when it was made.
type TokenInfo struct {
	Hash string
	Identity
	CreatedAtMS int64
}
