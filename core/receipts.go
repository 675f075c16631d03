package core

// Read receipts: a reader's status for a message, usually a group's, kept
// per (message, reader); reading state follows the reader.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// maxReceiptSkew is how far ahead of the server's clock a receipt's at_ms
// may be (clients' clocks drift).
const maxReceiptSkew = 5 * time.Minute

// SetReadState is set_read_state: a reader's receipt for a message,
// usually a group message. Reading state follows the reader: a READED
// receipt also reads the reader's own INBOX copy if it is still UNREAD
// (its conversation's unread count with it), as the seed's agent loop
// marks a group message read by its receipt; nobody else's records or
// receipts change.
func (s *Service) SetReadState(ctx context.Context, who model.Identity, req *wire.ReceiptRequest) (model.Receipt, error) {
	var zero model.Receipt
	if req.MsgID == "" {
		return zero, model.Invalid("msg_id", "is required")
	}
	if err := message.CheckDID("reader_did", req.ReaderDID, true); err != nil {
		return zero, err
	}
	if err := message.CheckDID("group_id", req.GroupID, false); err != nil {
		return zero, err
	}
	if !model.ValidReceiptStatus(req.Status) {
		return zero, model.Invalid("status", fmt.Sprintf("unknown status %q (want UNREAD, READING, READED, ACCEPTED, REJECTED or QUARANTINED)", req.Status))
	}
	if req.AtMS < 0 {
		return zero, model.Invalid("at_ms", "must not be negative")
	}
	if !isAdmin(who) && who.DID != req.ReaderDID {
		return zero, model.Forbidden(fmt.Sprintf("%s may set receipts only as reader", who.DID))
	}
	if req.GroupID != "" && !isAdmin(who) {
		ok, err := s.st.IsSubscriber(ctx, req.GroupID, req.ReaderDID)
		if err != nil {
			return zero, err
		}
		if !ok {
			return zero, model.Forbidden(fmt.Sprintf("%s is not a member of %s", req.ReaderDID, req.GroupID))
		}
	}
	body, err := s.GetMessage(ctx, who, req.MsgID)
	if err != nil {
		return zero, err // a message the caller cannot read does not exist for it
	}
	m, err := message.Decode(body)
	if err != nil {
		return zero, fmt.Errorf("message %s: %w", req.MsgID, err)
	}
	group := req.GroupID
	switch {
	case group != "" && m.From != group:
		// Listed by group to the group's members: a receipt may name only
		// the group the message went to, or a private message's receipt,
		// with its reason, would show to another group.
		return zero, model.Invalid("group_id", fmt.Sprintf("message %s was not sent to group %s", req.MsgID, group))
	case group == "" && m.Source != "":
		// A group message's receipt is the group's whether or not the
		// request says so: one receipt per (message, reader), and one
		// that left the group out replaced the group's, which then no
		// longer listed it.
		d, err := s.st.GroupDelivery(ctx, m.From)
		if err != nil {
			return zero, err
		}
		if d != "" {
			group = m.From
		}
	}
	now := s.nowMS()
	at := req.AtMS
	if at == 0 {
		at = now
	}
	// A newer receipt wins over an older one, so one stamped far ahead
	// would freeze the reader's status.
	if at > now+maxReceiptSkew.Milliseconds() {
		ahead := fmt.Sprintf("%d ms", at-now)
		if at-now < math.MaxInt64/int64(time.Millisecond) { // else a Duration overflows
			ahead = (time.Duration(at-now) * time.Millisecond).String()
		}
		return zero, model.Invalid("at_ms", fmt.Sprintf("is %s ahead of the server's clock; at most %s is allowed",
			ahead, maxReceiptSkew))
	}
	rc, err := s.st.PutReceipt(ctx, model.Receipt{MsgID: req.MsgID, Iss: who.DID, Reader: req.ReaderDID,
		GroupID: group, AtMS: at, Status: req.Status, Reason: req.Reason}, now)
	if err == nil && req.Status == model.ReceiptReaded {
		err = s.readOwnCopy(ctx, req.ReaderDID, req.MsgID, now)
	}
	return rc, err
}

// readOwnCopy moves reader's INBOX record of msgID from UNREAD to READED,
// if it has one in that state: a copy claimed, read or archived since is
// left as it is, and so is one a concurrent change moved first.
func (s *Service) readOwnCopy(ctx context.Context, reader, msgID string, now int64) error {
	rec, err := s.st.GetRecord(ctx, model.RecordID(reader, model.Inbox, msgID, ""))
	if errors.Is(err, model.ErrNotFound) {
		return nil
	}
	if err != nil || rec.State != model.Unread {
		return err
	}
	_, err = s.readUnread(ctx, rec, now, "read receipt")
	return err
}

// readUnread moves an UNREAD record to READED as a change of its own (its
// event with detail, the unread count, a group member's receipt), and
// says whether it did: a record a concurrent change moved first (a claim)
// is left as it is.
func (s *Service) readUnread(ctx context.Context, rec model.Record, now int64, detail string) (bool, error) {
	_, err := s.update(ctx, rec, &store.Update{RecordID: rec.RecordID, From: model.Unread, To: model.Readed,
		Delivery: rec.Delivery, NowMS: now, EventDetail: detail}, nil)
	if errors.Is(err, model.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// memberReceipt is a group member's read of a group message delivered to
// its INBOX (DeliverToMembers), for the ack that reads it: acknowledging
// the record is reading it, and the group's receipts then show it as they
// show the reads of a GROUP_INBOX message. The store writes it with the
// ack (store.Update.Receipt), so neither is without the other, and a
// decision the member set before acking (ACCEPTED, REJECTED, QUARANTINED,
// or READED itself, with its reason) stands, as does a newer receipt.
// Nil for any other record.
func memberReceipt(was model.Record, nowMS int64) *model.Receipt {
	if was.BoxKind != model.Inbox {
		return nil
	}
	for _, tag := range was.Tags {
		if group, ok := strings.CutPrefix(tag, "group:"); ok {
			return &model.Receipt{MsgID: was.MsgID, Iss: was.Owner, Reader: was.Owner, GroupID: group,
				AtMS: nowMS, Status: model.ReceiptReaded}
		}
	}
	return nil
}

// ListReceipts is list_read_receipts by message, group or reader. Agents
// see their own receipts, those of groups they belong to, and those of
// messages they hold.
func (s *Service) ListReceipts(ctx context.Context, who model.Identity, q wire.ReceiptQuery) (*wire.ReceiptsResult, error) {
	if q.MsgID == "" && q.GroupID == "" && q.Reader == "" {
		return nil, model.Invalid("msg_id", "give at least one of msg_id, group_id, reader")
	}
	limit := q.Limit
	if limit == 0 {
		limit = wire.MaxLimit
	}
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, err
	}
	if !isAdmin(who) {
		allowed := q.Reader == who.DID
		if !allowed && q.GroupID != "" {
			if allowed, err = s.st.IsSubscriber(ctx, q.GroupID, who.DID); err != nil {
				return nil, err
			}
		}
		if !allowed && q.MsgID != "" {
			if allowed, err = s.st.CanReadMessage(ctx, who.DID, q.MsgID); err != nil {
				return nil, err
			}
		}
		if !allowed {
			return nil, model.Forbidden(fmt.Sprintf("%s may list only its own receipts, its groups' and its messages'", who.DID))
		}
	}
	if (q.CursorMsgID == "") != (q.CursorReader == "") || q.CursorMsgID == "" && q.CursorAtMS != 0 {
		return nil, model.Invalid("cursor_msg_id", "give cursor_at_ms, cursor_msg_id and cursor_reader together (the next_cursor_* of the page before), or none")
	}
	items, err := s.st.ListReceipts(ctx, store.ReceiptFilter{MsgID: q.MsgID, GroupID: q.GroupID, Reader: q.Reader, Limit: limit,
		CursorAtMS: q.CursorAtMS, CursorMsgID: q.CursorMsgID, CursorReader: q.CursorReader})
	if err != nil {
		return nil, err
	}
	if items == nil {
		items = []model.Receipt{}
	}
	res := &wire.ReceiptsResult{Items: items}
	if len(items) == limit {
		last := items[len(items)-1]
		res.NextCursorAtMS, res.NextCursorMsgID, res.NextCursorReader = last.AtMS, last.MsgID, last.Reader
	}
	return res, nil
}
