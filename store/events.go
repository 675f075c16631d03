package store

import (
	"fmt"

	"github.com/msgcenter/msgcenter/model"
)

// The events of changes to contacts, tokens and read receipts. Each driver writes one in
// the transaction of its change, and only when something changed (a block
// already there, or a token registered again, is none); the record and
// message events come from plans and updates instead.

// GroupSetEvent is a group's subscribers replaced (n of them), with its
// delivery when the change set one.
func GroupSetEvent(group string, n int, delivery model.GroupDelivery, atMS int64) model.Event {
	detail := fmt.Sprintf("subscribers: %d", n)
	if delivery != "" {
		detail += ", delivery: " + string(delivery)
	}
	return model.Event{Type: model.EventGroupSet, Owner: group, AtMS: atMS, Detail: detail}
}

// GroupDeletedEvent is group made a plain DID again, with the n
// subscribers it had.
func GroupDeletedEvent(group string, n int, atMS int64) model.Event {
	return model.Event{Type: model.EventGroupDeleted, Owner: group, AtMS: atMS, Detail: fmt.Sprintf("subscribers: %d", n)}
}

// BlockEvent is owner blocking did (on) or lifting the block.
func BlockEvent(owner, did string, on bool, atMS int64) model.Event {
	typ := model.EventBlocked
	if !on {
		typ = model.EventUnblocked
	}
	return model.Event{Type: typ, Owner: owner, AtMS: atMS, Detail: did}
}

// RoutesSetEvent is did's routes replaced by n routes.
func RoutesSetEvent(did string, n int, atMS int64) model.Event {
	return model.Event{Type: model.EventRoutesSet, Owner: did, AtMS: atMS, Detail: fmt.Sprintf("routes: %d", n)}
}

// TokenEvent is a token made or revoked (typ), by its id, never its hash.
func TokenEvent(typ string, hash string, id model.Identity, atMS int64) model.Event {
	return model.Event{Type: typ, Owner: id.DID, AtMS: atMS, Detail: fmt.Sprintf("token_id: %s, role: %s", model.TokenID(hash), id.Role)}
}

// ReceiptEvent is r stored, new or changed, at nowMS (not r's own time,
// which the reader chose: the event log is in the order things happened).
func ReceiptEvent(r model.Receipt, nowMS int64) model.Event {
	owner := r.GroupID
	if owner == "" {
		owner = r.Reader
	}
	detail := fmt.Sprintf("reader: %s, status: %s", r.Reader, r.Status)
	if r.Reason != "" {
		detail += ", reason: " + r.Reason
	}
	return model.Event{Type: model.EventReceiptSet, Owner: owner, MsgID: r.MsgID, AtMS: nowMS, Detail: detail}
}
