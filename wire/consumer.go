package wire

import "github.com/msgcenter/msgcenter/model"

// Consumer start positions.
const (
	StartBeginning = "beginning"
	StartNow       = "now"
)

// ConsumerRequest is POST /v1/consumers: create a durable consumer.
type ConsumerRequest struct {
	// Owner defaults to the caller; only an admin may name another DID.
	Owner       string               `json:"owner,omitempty"`
	Name        string               `json:"name"`
	SourceOwner string               `json:"source_owner"`
	SourceBox   string               `json:"source_box"`
	Filter      model.ConsumerFilter `json:"filter"`
	// Start is "beginning" (the default: every record the source still
	// holds) or "now" (only records that arrive after creation).
	Start string `json:"start,omitempty"`
	// AfterSeq starts after this seq of the source box instead; it
	// excludes Start.
	AfterSeq *int64 `json:"after_seq,omitempty"`
}

// ConsumerInfo is a consumer with its progress.
type ConsumerInfo struct {
	model.Consumer
	// Box is the consumer's own box, to use with every /v1/boxes call.
	Box model.BoxKind `json:"box"`
	// SourceLastSeq is the source box's last seq: SourceLastSeq - SourceSeq
	// records are still to be examined.
	SourceLastSeq int64 `json:"source_last_seq"`
	// LastSeq is the last seq of the consumer's box: LastSeq - AckedSeq
	// records are not acknowledged yet.
	LastSeq int64 `json:"last_seq"`
}

// ConsumersResult is GET /v1/consumers.
type ConsumersResult struct {
	Consumers []ConsumerInfo `json:"consumers"`
}

// AckRequest is POST /v1/consumers/{owner}/{name}/ack, and the WebSocket
// client frame {"type":"ack","seq":N} on a consumer's box stream.
type AckRequest struct {
	Seq int64 `json:"seq"`
}

// RetentionPolicy is GET /v1/admin/retention: how long terminal records of
// each box family are kept (0: forever; GROUP_INBOX's applies to every
// record of a group's log, which no one finishes), how often retention
// runs, and how long events are kept.
type RetentionPolicy struct {
	TerminalMS map[model.BoxKind]int64 `json:"terminal_ms"`
	EventsMS   int64                   `json:"events_ms"`
	// IdempotencyKeysMS: how long an idempotency key is kept after it was
	// bound (the longest record period; 0: forever).
	IdempotencyKeysMS int64 `json:"idempotency_keys_ms"`
	IntervalMS        int64 `json:"interval_ms"`
	Enabled           bool  `json:"enabled"`
}

// RetentionResult is POST /v1/admin/retention/run: what one full pass
// deleted.
type RetentionResult struct {
	Records         map[model.BoxKind]int64 `json:"records"`
	Messages        int64                   `json:"messages"`
	Events          int64                   `json:"events"`
	IdempotencyKeys int64                   `json:"idempotency_keys"`
}
