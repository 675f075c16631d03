package wire

import "encoding/json"

// RPCRequest is one API request carried over the GET /v1/rpc WebSocket:
// the method, path (with its query) and JSON body the same HTTP request
// would have. A client frame holds one RPCRequest or a JSON array of them.
// ID is the caller's choice, at least 1, and comes back in the answer; the
// server does not check that ids in flight are distinct.
//
// {"id":N,"cancel":true} withdraws request N, as closing an HTTP
// connection would: a long poll still waiting ends without claiming, and
// the answer to N (whatever it is by then) may still come.
type RPCRequest struct {
	ID     uint64          `json:"id"`
	Method string          `json:"method,omitempty"`
	Path   string          `json:"path,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Cancel bool            `json:"cancel,omitempty"`
}

// RPCResponse answers one RPCRequest with the status and body its HTTP
// twin would have had (an error is the usual ErrorBody with a 4xx or 5xx
// status). Headers holds the few response headers that carry meaning
// (Location, Allow). A server frame holds one RPCResponse or a JSON array
// of them, in the order the requests finished. ID 0 answers a frame that
// could not be read as requests at all.
type RPCResponse struct {
	ID      uint64            `json:"id"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}
