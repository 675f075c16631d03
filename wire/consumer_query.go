package wire

// WebSocket control frames of a box stream. Record frames (StreamFrame)
// never carry a "type" member; every control frame does, so a client tells
// them apart by the presence of "type" alone.

// Stream control frame types.
const (
	// StreamAck is the client frame {"type":"ack","seq":N} that advances a
	// durable consumer's cursor on a consumer box stream.
	StreamAck = "ack"
	// StreamAcked answers an ack: Seq is the consumer's cursor after it
	// (never below the seq acknowledged; higher if an earlier ack was).
	StreamAcked = "acked"
	// StreamError reports a client frame the server could not take; the
	// stream goes on.
	StreamError = "error"
)

// StreamClientFrame is a text message a client sends on a box stream's
// WebSocket. Only {"type":"ack","seq":N} exists, on a consumer's box.
type StreamClientFrame struct {
	Type string `json:"type"`
	Seq  *int64 `json:"seq,omitempty"`
}

// StreamControlFrame is a text message the server sends on a box stream's
// WebSocket that is not a record: {"type":"acked","seq":N} or
// {"type":"error","error":{...}}.
type StreamControlFrame struct {
	Type  string       `json:"type"`
	Seq   int64        `json:"seq,omitempty"`
	Error *ErrorDetail `json:"error,omitempty"`
}
