package sqlite

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/msgcenter/msgcenter/store"
)

// planHead is a plan without its records: the outer Records, nil and
// omitted, hides the plan's own (a field less deep wins in encoding/json),
// so every other field of store.Plan is encoded as json.Marshal would,
// including any added later. It holds while Plan's records are encoded
// under the name Records and Plan has no MarshalJSON of its own;
// TestEncodePlanDecodesAsMarshal checks the payload names them once.
type planHead struct {
	*store.Plan
	Records *struct{} `json:"Records,omitempty"`
}

// encodePlan is the payload of an apply: the kind byte, then what
// json.Marshal(p) decodes to, with the records written one at a time into
// a buffer of its own.
//
// Why not json.Marshal: it builds its output in a buffer from a pool and
// returns a copy, which is copied again behind the kind byte. For a
// fan-out to 10,000 members (4 MB of JSON) a heap profile at the
// server's peak held the pooled buffer and Marshal's copy besides the
// payload, 17 of 62 MB live; what is live at a collection sets the heap's
// next target, so the server's peak RSS (docs/benchmarks.md, nineteenth
// round).
func encodePlan(p *store.Plan) ([]byte, error) {
	head, err := json.Marshal(planHead{Plan: p})
	if err != nil {
		return nil, fmt.Errorf("sqlite: encode write for the apply log: %w", err)
	}
	// Room for the head and a few records; a big plan's is sized below.
	b := bytes.NewBuffer(make([]byte, 0, len(head)+len(`,"Records":[]}`)+512*min(len(p.Records), 16)))
	b.WriteByte(logApply)
	b.Write(head[:len(head)-1]) // without its closing brace
	if len(head) > len("{}") {
		b.WriteByte(',')
	}
	b.WriteString(`"Records":`)
	if p.Records == nil {
		b.WriteString("null}")
		return b.Bytes(), nil
	}
	b.WriteByte('[')
	enc := json.NewEncoder(b) // escapes as Marshal does; its newlines are whitespace
	if n := len(p.Records); n > 16 {
		// Size the buffer once rather than let it double its way up. The
		// records of a plan are much alike, except the first, which is
		// often the author's or the group's own: measure by the last.
		var last bytes.Buffer
		if err := json.NewEncoder(&last).Encode(&p.Records[n-1]); err != nil {
			return nil, fmt.Errorf("sqlite: encode write for the apply log: %w", err)
		}
		b.Grow((last.Len() + 1) * n * 17 / 16)
	}
	for i := range p.Records {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := enc.Encode(&p.Records[i]); err != nil {
			return nil, fmt.Errorf("sqlite: encode write for the apply log: %w", err)
		}
	}
	b.WriteString("]}")
	out := b.Bytes()
	if len(out) > 64<<10 && cap(out)-len(out) > len(out)/8 {
		// The records were not as alike as that: the payload is kept
		// until its commit, so keep it at its size.
		out = bytes.Clone(out)
	}
	return out, nil
}
