package wire

import (
	"encoding/json"

	"github.com/msgcenter/msgcenter/model"
)

// StreamFrame is one record pushed by GET /v1/boxes/{owner}/{box}/stream:
// the data of an SSE event (whose id is Seq) and the text of a WebSocket
// message. Seq repeats Record.Seq so that a client can keep its cursor
// without decoding the record.
type StreamFrame struct {
	Seq    int64           `json:"seq"`
	Record model.Record    `json:"record"`
	Msg    json.RawMessage `json:"msg,omitempty"`
}

// PresenceResult is GET /v1/owners/{owner}/presence: whether the owner holds
// at least one open stream (box or events) on the node answering.
type PresenceResult struct {
	Owner   string `json:"owner"`
	Online  bool   `json:"online"`
	Streams int    `json:"streams"`
}
