package mcpserver

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCheckLine: any line is either passed on as one JSON-RPC 2.0 object
// (or blank) or answered with one JSON-RPC error line, and nothing panics.
func FuzzCheckLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `garbage`, `[]`, `{"id":{"a":1}}`,
		`{"jsonrpc":"2.0","id":1.0,"result":{}}`, ``, `  `, `{"jsonrpc":"2.0","method":7}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, refusal := checkLine(line)
		if refusal != nil {
			var m struct {
				JSONRPC string              `json:"jsonrpc"`
				ID      json.RawMessage     `json:"id"`
				Error   *struct{ Code int } `json:"error"`
			}
			if err := json.Unmarshal(refusal, &m); err != nil || m.JSONRPC != "2.0" || m.Error == nil || !bytes.HasSuffix(refusal, []byte("\n")) {
				t.Fatalf("answer to %q is not one JSON-RPC error line: %q", line, refusal)
			}
			return
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var m map[string]json.RawMessage
			if json.Unmarshal(t, &m) != nil || string(m["jsonrpc"]) != `"2.0"` {
				panic("passed on a line that is not a JSON-RPC 2.0 object: " + string(line))
			}
		}
		_ = fr
	})
}
