package model

import (
	"crypto/sha256"
	"encoding/hex"
)

// Record is one owner's view of one message in one box (MsgRecord).
type Record struct {
	RecordID    string   `json:"record_id"`
	Owner       string   `json:"owner"`
	BoxKind     BoxKind  `json:"box_kind"`
	MsgID       string   `json:"msg_id"`
	State       State    `json:"state"`
	Seq         int64    `json:"seq"`
	CreatedAtMS int64    `json:"created_at_ms"`
	UpdatedAtMS int64    `json:"updated_at_ms"`
	Route       *Route   `json:"route,omitempty"`
	Delivery    Delivery `json:"delivery"`
	ThreadKey   string   `json:"thread_key,omitempty"`
	SortKey     int64    `json:"sort_key"`
	Tags        []string `json:"tags,omitempty"`
	Lease       *Lease   `json:"lease,omitempty"`
}

// Route says how a record reaches its external target: which tunnel, which
// platform account and address. It lives on the record, not the message, so
// the message id stays stable whatever the delivery path.
type Route struct {
	TunnelDID string            `json:"tunnel_did,omitempty"`
	Platform  string            `json:"platform,omitempty"`
	AccountID string            `json:"account_id,omitempty"`
	Address   string            `json:"address,omitempty"`
	ChatID    string            `json:"chat_id,omitempty"`
	TargetDID string            `json:"target_did,omitempty"`
	Mode      string            `json:"mode,omitempty"`
	Priority  int               `json:"priority,omitempty"`
	ExtIDs    map[string]string `json:"ext_ids,omitempty"`
}

// Delivery is the retry bookkeeping of a record.
type Delivery struct {
	Attempts      int    `json:"attempts"`
	NextRetryAtMS int64  `json:"next_retry_at_ms,omitempty"`
	ExternalMsgID string `json:"external_msg_id,omitempty"`
	DeliveredAtMS int64  `json:"delivered_at_ms,omitempty"`
	ErrorCode     string `json:"error_code,omitempty"`
	ErrorMessage  string `json:"error_message,omitempty"`
	RetryAfterMS  int64  `json:"retry_after_ms,omitempty"`
	LastError     string `json:"last_error,omitempty"`
}

// Lease is present while a record is claimed (READING or SENDING). The id
// lets a holder prove the claim is still its own: after the lease expired and
// someone else claimed the record, the old id no longer matches.
type Lease struct {
	ID          string `json:"lease_id"`
	Holder      string `json:"holder,omitempty"`
	ExpiresAtMS int64  `json:"expires_at_ms"`
}

// RecordID derives the id of the record of msgID in owner's box. The same
// inputs always give the same id, which makes every record write idempotent.
// variant separates several records of one message in one box (one per
// route in a tunnel outbox).
func RecordID(owner string, box BoxKind, msgID, variant string) string {
	h := sha256.New()
	for _, p := range []string{owner, string(box), msgID, variant} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "cyrec:" + hex.EncodeToString(h.Sum(nil)[:16])
}
