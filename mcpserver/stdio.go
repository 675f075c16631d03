package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// drainWait bounds how long the end of stdin waits for the answers to the
// requests read before it: the longest tool call (a claim's wait and its
// margin).
const drainWait = maxClaimWait + callTimeout

// draining is stdin and stdout for the server, such that the end of stdin
// is passed on only once every request read before it was answered: the
// SDK ends the session, in-flight calls and their answers with it, as soon
// as its input ends. A client that writes its requests and closes stdin
// (a script, a runtime shutting down) still gets its answers, and a send
// it asked for is not cut off half-way with no word of whether it
// happened.
//
// It also passes the SDK only lines it can take: the SDK ends the session
// on a line that is not one JSON-RPC message (a typo, a batch, an id that
// is an object) or that is longer than it reads (16 MiB), dropping the
// calls in flight. Such a line is answered here with the JSON-RPC error
// for it, and the session goes on.
type draining struct {
	in  io.Reader
	buf []byte // what one read of in takes

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when pending shrinks
	pending map[string]bool
	inLine  []byte // a request line read in part
	// dropping: the line being read is longer than maxTracked, more than
	// any request msgcenter would take; its rest is skipped and it is
	// answered as too large, under dropID (its id, if its start had one).
	dropping bool
	dropID   json.RawMessage
	ready    []byte // checked input, for the SDK
	inErr    error  // how in ended

	outMu   sync.Mutex // one writer on out at a time, and only between lines
	out     io.Writer
	outLine []byte   // an answer line written in part
	refusal [][]byte // answers to refused lines, waiting for the SDK's line to end
}

func newDraining(in io.Reader, out io.Writer) *draining {
	return &draining{in: in, out: out, buf: make([]byte, 64<<10), pending: map[string]bool{}, changed: make(chan struct{})}
}

// frame is what draining reads of a JSON-RPC message: a request has a
// method and an id, an answer an id and no method.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (d *draining) Read(p []byte) (int, error) {
	for {
		d.mu.Lock()
		if len(d.ready) > 0 {
			n := copy(p, d.ready)
			d.ready = d.ready[n:]
			d.mu.Unlock()
			return n, nil
		}
		inErr := d.inErr
		d.mu.Unlock()
		if inErr != nil {
			if inErr == io.EOF {
				d.wait(time.Now().Add(drainWait))
			}
			return 0, inErr
		}
		n, err := d.in.Read(d.buf)
		d.take(d.buf[:n])
		if err != nil {
			d.mu.Lock()
			d.ready, d.inLine, d.inErr = append(d.ready, d.inLine...), nil, err // a last line without its newline goes as it is
			d.mu.Unlock()
		}
	}
}

// take splits chunk into lines, passing on those the SDK can take and
// answering the others.
func (d *draining) take(chunk []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if d.dropping {
			if i < 0 {
				return
			}
			d.refuse(rpcError(d.dropID, -32600, fmt.Sprintf("invalid request: the line is over %d MiB, more than any message msgcenter takes (1 MiB by default); send less", maxTracked>>20)))
			d.dropping, d.dropID, chunk = false, nil, chunk[i+1:]
			continue
		}
		if i < 0 {
			if len(d.inLine)+len(chunk) > maxTracked {
				d.dropping, d.dropID, d.inLine = true, idOfPrefix(d.inLine), d.inLine[:0]
				return
			}
			d.inLine = append(d.inLine, chunk...)
			return
		}
		line := append(d.inLine, chunk[:i]...)
		if f, refusal := checkLine(line); refusal != nil {
			d.refuse(refusal)
		} else {
			if f.Method != "" && len(f.ID) > 0 {
				d.pending[idKey(f.ID)] = true
			}
			d.ready = append(append(d.ready, line...), '\n')
		}
		d.inLine, chunk = line[:0], chunk[i+1:]
	}
}

// checkLine returns the frame of a line the SDK can take, or the answer to
// one it cannot. A blank line is taken (the SDK skips it).
func checkLine(line []byte) (frame, []byte) {
	var f frame
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return f, nil
	}
	if !json.Valid(t) {
		return f, rpcError(nil, -32700, "parse error: a line must be one JSON-RPC message")
	}
	if t[0] != '{' {
		return f, rpcError(nil, -32600, "invalid request: a line must be one JSON object (batches are not supported)")
	}
	// Keys as written: encoding/json would match "JSONRPC" to "jsonrpc".
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return f, rpcError(nil, -32600, "invalid request: "+err.Error())
	}
	id := m["id"]
	if len(id) > 0 && !strings.ContainsRune(`"-0123456789n`, rune(id[0])) {
		return f, rpcError(nil, -32600, "invalid request: id must be a string or a number")
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return f, rpcError(id, -32600, `invalid request: "jsonrpc" must be "2.0"`)
	}
	method, isCall := m["method"]
	if isCall && json.Unmarshal(method, &f.Method) != nil {
		return f, rpcError(id, -32600, "invalid request: method must be a string")
	}
	if _, ok := m["result"]; !isCall && !ok {
		if _, ok := m["error"]; !ok {
			return f, rpcError(id, -32600, "invalid request: neither a method nor a result")
		}
	}
	f.ID = id
	return f, nil
}

func rpcError(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return append(b, '\n')
}

// refuse writes the answer to a refused line, once out is between lines.
func (d *draining) refuse(answer []byte) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	if len(d.outLine) > 0 {
		d.refusal = append(d.refusal, answer)
		return
	}
	_, _ = d.out.Write(answer) // a client that stopped reading stops the SDK's writes too
}

// idKey is a request id as the SDK writes it back: a number in its
// shortest form (a client's 1.0 is answered as 1).
func idKey(id json.RawMessage) string {
	if len(id) > 0 && id[0] != '"' && id[0] != 'n' {
		var n json.Number
		if json.Unmarshal(id, &n) == nil {
			if f, err := n.Float64(); err == nil {
				return strconv.FormatFloat(f, 'g', -1, 64)
			}
		}
	}
	return string(id)
}

func (d *draining) Write(p []byte) (int, error) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	n, err := d.out.Write(p)
	d.outLine = scanLines(d.outLine, p[:n], func(f frame) {
		if f.Method == "" && len(f.ID) > 0 {
			d.mu.Lock()
			if k := idKey(f.ID); d.pending[k] {
				delete(d.pending, k)
				close(d.changed)
				d.changed = make(chan struct{})
			}
			d.mu.Unlock()
		}
	})
	if len(d.outLine) == 0 {
		for _, a := range d.refusal {
			_, _ = d.out.Write(a)
		}
		d.refusal = d.refusal[:0]
	}
	return n, err
}

func (d *draining) Close() error { return nil }

// wait blocks until no request read is unanswered, or until deadline.
func (d *draining) wait(deadline time.Time) {
	for {
		d.mu.Lock()
		left, changed := len(d.pending), d.changed
		d.mu.Unlock()
		if left == 0 {
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			return
		}
	}
}

// maxTracked bounds a request line: a longer one is refused (a tools/call
// carrying the largest message msgcenter takes, 1 MiB by default, each
// byte escaped as six, stays under it), where the SDK would end the
// session past its own 16 MiB.
const maxTracked = 8 << 20

// idOfPrefix finds the id of a JSON-RPC request from the start of its line
// (a top-level "id" member before any value too long to read), to answer a
// line too long to read whole under its id.
func idOfPrefix(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k == "id" && len(v) > 0 && strings.ContainsRune(`"-0123456789`, rune(v[0])) {
			return v
		}
	}
	return nil
}

// scanLines calls fn with each line that chunk completes (partial holds
// the line's start from earlier chunks) that decodes as a frame, and
// returns the start of the line chunk leaves open.
func scanLines(partial, chunk []byte, fn func(frame)) []byte {
	for {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if len(partial)+len(chunk) > maxTracked {
				return partial[:0]
			}
			return append(partial, chunk...)
		}
		line := append(partial, chunk[:i]...)
		var f frame
		if json.Unmarshal(line, &f) == nil {
			fn(f)
		}
		partial, chunk = line[:0], chunk[i+1:]
	}
}

// Serve runs the server over stdin and stdout until the client goes away
// or ctx ends; requests read before stdin ended are answered first.
func Serve(ctx context.Context, srv *mcp.Server) error {
	return serveIO(ctx, srv, os.Stdin, os.Stdout)
}

func serveIO(ctx context.Context, srv *mcp.Server, in io.Reader, out io.Writer) error {
	d := newDraining(in, out)
	err := srv.Run(ctx, &mcp.IOTransport{Reader: d, Writer: d})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
