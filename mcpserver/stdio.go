package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
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
type draining struct {
	in  io.Reader
	out io.Writer

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when pending shrinks
	pending map[string]bool
	inLine  []byte // a request line read in part
	outLine []byte // an answer line written in part
}

func newDraining(in io.Reader, out io.Writer) *draining {
	return &draining{in: in, out: out, pending: map[string]bool{}, changed: make(chan struct{})}
}

// frame is what draining reads of a JSON-RPC message: a request has a
// method and an id, an answer an id and no method.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (d *draining) Read(p []byte) (int, error) {
	n, err := d.in.Read(p)
	d.mu.Lock()
	d.inLine = scanLines(d.inLine, p[:n], func(f frame) {
		if f.Method != "" && len(f.ID) > 0 {
			d.pending[string(f.ID)] = true
		}
	})
	d.mu.Unlock()
	if err == io.EOF {
		d.wait(time.Now().Add(drainWait))
	}
	return n, err
}

func (d *draining) Write(p []byte) (int, error) {
	n, err := d.out.Write(p)
	d.mu.Lock()
	d.outLine = scanLines(d.outLine, p[:n], func(f frame) {
		if f.Method == "" && len(f.ID) > 0 && d.pending[string(f.ID)] {
			delete(d.pending, string(f.ID))
			close(d.changed)
			d.changed = make(chan struct{})
		}
	})
	d.mu.Unlock()
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

// maxTracked bounds the part of a line kept to read its id: a longer line
// (a message of megabytes) is passed on untracked; the SDK bounds lines
// itself.
const maxTracked = 8 << 20

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
