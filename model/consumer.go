package model

// Consumer is a durable consumer: a named subscription of one DID to a
// source box, with a filter. Every source record that matches gives the
// consumer its own record in its own box (ConsumerBox(Name)), with its own
// state, lease and retries, so consumers of one source never affect each
// other (seed 002's workspaces).
//
// Two positions are kept server-side and survive restarts:
//   - SourceSeq: how far the source box has been examined. Source records
//     above it may still be needed, so retention never purges them.
//   - AckedSeq: the cursor, the highest seq of the consumer's own box that
//     the consumer acknowledged as a log (seed 003); acked records may be
//     purged, and a stream opened without a cursor resumes after it.
type Consumer struct {
	Owner       string         `json:"owner"`
	Name        string         `json:"name"`
	SourceOwner string         `json:"source_owner"`
	SourceBox   BoxKind        `json:"source_box"`
	Filter      ConsumerFilter `json:"filter"`
	SourceSeq   int64          `json:"source_seq"`
	AckedSeq    int64          `json:"acked_seq"`
	CreatedAtMS int64          `json:"created_at_ms"`
	UpdatedAtMS int64          `json:"updated_at_ms"`
}

// Box is the consumer's own box.
func (c *Consumer) Box() BoxKind { return ConsumerBox(c.Name) }

// ConsumerFilter selects the source records a consumer takes. Every field
// that is set must match (AND); within a list, any element may match (OR).
// An empty filter takes everything.
type ConsumerFilter struct {
	From      []string `json:"from,omitempty"`
	To        []string `json:"to,omitempty"`
	Kind      []string `json:"kind,omitempty"`
	Topic     []string `json:"topic,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Mentions  []string `json:"mentions,omitempty"`
	Workspace []string `json:"workspace,omitempty"`
	// Text matches, ignoring case, a substring of the content's title or
	// text.
	Text string `json:"text,omitempty"`
}

// Consumer event types.
const (
	EventConsumerCreated = "consumer.created"
	EventConsumerDeleted = "consumer.deleted"
	EventPurged          = "retention.purged"
)
