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
	// Ended is the lease whose holder made the record's last change,
	// ending it (an ack, a failure, a release), and the kind of change: a
	// repeat of that change, its first answer lost, is then known for one
	// and answered, not refused as lease_lost. Nil after any other change.
	// Not on the wire: a lease id is its holder's to show.
	Ended *EndedLease `json:"-"`
}

// EndedLease is a lease its holder ended, and how (Record.Ended).
type EndedLease struct {
	ID string
	By EndedBy
}

// EndedBy is the kind of change that ended a lease. A store keeps it
// where the lease's holder was (a lease that ended has no holder).
type EndedBy string

const (
	EndedByAck  EndedBy = "ack"  // a success reported, or the done state set
	EndedByFail EndedBy = "fail" // a failure reported
	EndedBySet  EndedBy = "set"  // another state set: a release, DEAD, ARCHIVED, DELETED
)

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

// Record ids. A record's id is derived from what identifies it (owner, box,
// message, variant), so writing the same record twice is idempotent, and
// it also carries where the record lives: the first digits of its
// message's id. A store can then find a record next to its message, in an
// index keyed by the order messages arrived, instead of in an index keyed
// by a hash, where every new record lands on a random page (the cost that
// grew with the data: docs/benchmarks.md, thirteenth round).
//
//	cyrec:<32 hex: SHA-256 of owner, box, message id, variant><16 hex: the message id's first hash digits>
//
// The first 32 digits alone are the id the record had before ids carried
// the locator (LegacyRecordID), which stores of that time still hold.
const (
	recordIDPrefix = "cyrec:"
	msgIDPrefix    = "cymsg:"
	recordHashHex  = 32
	// LocatorHex is how many hex digits of the message id a record id
	// carries: 64 bits, so messages sharing a locator are rare, and a
	// store finding two checks the whole record id anyway.
	LocatorHex  = 16
	recordIDLen = len(recordIDPrefix) + recordHashHex + LocatorHex
)

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
	var sum [sha256.Size]byte
	b := make([]byte, 0, recordIDLen)
	b = append(b, recordIDPrefix...)
	b = hex.AppendEncode(b, h.Sum(sum[:0])[:recordHashHex/2])
	return string(append(b, messageLocator(msgID)...))
}

// messageLocator is the part of a record id that names its message: the
// first LocatorHex digits of a message id as message.IDOf makes them
// ("cymsg:" and 64 lowercase hex digits). Any other string gets digits of
// its own hash, which locate no message; a store finds such records the
// way it finds ids without a locator.
func messageLocator(msgID string) string {
	if isMessageID(msgID) {
		return msgID[len(msgIDPrefix) : len(msgIDPrefix)+LocatorHex]
	}
	sum := sha256.Sum256([]byte(msgID))
	return hex.EncodeToString(sum[:LocatorHex/2])
}

// isMessageID reports whether id has the form message.IDOf gives ids.
func isMessageID(id string) bool {
	return len(id) == len(msgIDPrefix)+2*sha256.Size && id[:len(msgIDPrefix)] == msgIDPrefix &&
		isLowerHex(id[len(msgIDPrefix):])
}

// RecordLocator returns the message id prefix ("cymsg:" and LocatorHex
// digits) that recordID carries; ok is false for an id without one (made
// before ids carried it, or not by RecordID).
func RecordLocator(recordID string) (msgIDPrefix string, ok bool) {
	if !wellFormed(recordID) {
		return "", false
	}
	return "cymsg:" + recordID[len(recordID)-LocatorHex:], true
}

// RecordLocates reports whether recordID carries msgID's locator: whether a
// store finds the record next to that message.
func RecordLocates(recordID, msgID string) bool {
	p, ok := RecordLocator(recordID)
	return ok && isMessageID(msgID) && msgID[:len(p)] == p
}

// LegacyRecordID returns the id RecordID gave the same record before ids
// carried a locator: recordID without it. ok is false for an id without a
// locator.
func LegacyRecordID(recordID string) (string, bool) {
	if !wellFormed(recordID) {
		return "", false
	}
	return recordID[:len(recordID)-LocatorHex], true
}

func wellFormed(recordID string) bool {
	return len(recordID) == recordIDLen && recordID[:len(recordIDPrefix)] == recordIDPrefix &&
		isLowerHex(recordID[len(recordIDPrefix):])
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
