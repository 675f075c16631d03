package wire

import "github.com/msgcenter/msgcenter/model"

// Limits on page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// ListQuery is GET /v1/boxes/{owner}/{box}/records (list_box_by_time).
// Query parameters: state (comma separated), tag, order (asc|desc, default
// desc), cursor_sort_key, cursor_record_id, limit, with_object.
type ListQuery struct {
	Owner          string
	Box            model.BoxKind
	States         []model.State
	Tag            string
	Desc           bool
	CursorSortKey  int64
	CursorRecordID string
	Limit          int
	WithObject     bool
}

// SyncQuery is GET /v1/boxes/{owner}/{box}/sync. Query parameters:
// after_seq, limit, thread_key, with_object.
type SyncQuery struct {
	Owner      string
	Box        model.BoxKind
	AfterSeq   int64
	Limit      int
	ThreadKey  string
	WithObject bool
}

// ReceiptQuery is GET /v1/read_receipts. Query parameters: msg_id,
// group_id, reader, limit. At least one of the first three is required.
type ReceiptQuery struct {
	MsgID   string
	GroupID string
	Reader  string
	Limit   int
	// The last receipt of the page before (next_cursor_* of its answer),
	// when CursorMsgID is set.
	CursorAtMS   int64
	CursorMsgID  string
	CursorReader string
}

// ScheduledQuery is GET /v1/scheduled. Query parameters: sender,
// recipient, limit. An admin lists anyone's delayed messages; anyone else
// only those it sent, with or without naming itself as sender.
type ScheduledQuery struct {
	Sender    string
	Recipient string
	Limit     int
}

// EventQuery is GET /v1/events. Query parameters: after, owner, limit.
type EventQuery struct {
	After int64
	Owner string
	Limit int
}
