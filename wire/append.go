package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The shapes that carry stored message bodies encode themselves by
// appending. encoding/json re-scans every json.RawMessage byte by byte to
// validate and compact it, and a body is a kilobyte or more: in a claim+ack
// profile that scan was 11% of the server's CPU, for bodies that were
// validated and canonicalized when they were accepted and are stored
// compact. AppendJSON writes the same bytes encoding/json writes with HTML
// escaping off (what every response and stream frame uses; a test keeps
// them equal) and copies the body as stored.

// Append appends v's JSON to b as responses and stream frames carry it:
// no trailing newline, <, > and & left as they are (a message's bytes are
// its identity; clients compare them). A shape with an AppendJSON method
// writes itself; anything else goes through encoding/json.
func Append(b []byte, v any) ([]byte, error) {
	if a, ok := v.(interface{ AppendJSON([]byte) ([]byte, error) }); ok {
		return a.AppendJSON(b)
	}
	return appendPlain(b, v)
}

// AppendJSON appends r's JSON to b.
func (r *RecordWithMsg) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"record":`...)
	b, err := appendPlain(b, &r.Record)
	if err != nil {
		return b, err
	}
	return appendMsg(b, r.Msg), nil
}

// AppendJSON appends r's JSON to b. Written out, not left to the embedded
// RecordWithMsg's method, which would drop next and next_error.
func (r *StateResult) AppendJSON(b []byte) ([]byte, error) {
	b, err := r.RecordWithMsg.AppendJSON(b)
	if err != nil || (r.Next == nil && r.NextError == nil) {
		return b, err
	}
	b = b[:len(b)-1] // the closing brace, written again below
	if r.Next != nil {
		b = append(b, `,"next":`...)
		if b, err = r.Next.AppendJSON(b); err != nil {
			return b, err
		}
	}
	if r.NextError != nil {
		b = append(b, `,"next_error":`...)
		if b, err = appendPlain(b, r.NextError); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// AppendJSON appends f's JSON to b.
func (f *StreamFrame) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, f.Seq, 10)
	b = append(b, `,"record":`...)
	b, err := appendPlain(b, &f.Record)
	if err != nil {
		return b, err
	}
	return appendMsg(b, f.Msg), nil
}

// AppendJSON appends p's JSON to b.
func (p *SyncResult) AppendJSON(b []byte) ([]byte, error) {
	b, err := appendItems(b, p.Items)
	if err != nil {
		return b, err
	}
	b = append(b, `,"last_seq":`...)
	b = strconv.AppendInt(b, p.LastSeq, 10)
	return append(b, '}'), nil
}

// AppendJSON appends p's JSON to b.
func (p *ListResult) AppendJSON(b []byte) ([]byte, error) {
	b, err := appendItems(b, p.Items)
	if err != nil {
		return b, err
	}
	if p.NextCursorSortKey != 0 {
		b = append(b, `,"next_cursor_sort_key":`...)
		b = strconv.AppendInt(b, p.NextCursorSortKey, 10)
	}
	if p.NextCursorRecordID != "" {
		b = append(b, `,"next_cursor_record_id":`...)
		if b, err = appendPlain(b, p.NextCursorRecordID); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendItems opens an object with its "items" member, a nil slice being
// null as encoding/json has it.
func appendItems(b []byte, items []RecordWithMsg) ([]byte, error) {
	b = append(b, `{"items":`...)
	if items == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = items[i].AppendJSON(b); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendMsg appends the optional "msg" member and closes the object.
func appendMsg(b []byte, msg json.RawMessage) []byte {
	if len(msg) > 0 {
		b = append(b, `,"msg":`...)
		b = append(b, msg...)
	}
	return append(b, '}')
}

// appendPlain appends v as encoding/json encodes it with HTML escaping off.
func appendPlain(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // Encode ends with a newline
}
