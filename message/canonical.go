package message

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/msgcenter/msgcenter/model"
)

// maxNesting is the nesting limit shared by encoding/json and gowebpki/jcs.
// The old path applied jcs's limit to the whole message, so a raw part may
// nest only as deep as the limit minus the depth at which it sits.
const maxNesting = 10000

// Depth of the container that holds each raw part in the whole message.
const (
	metaDepth    = 1 // message object
	machineDepth = 2 // message, content
	refDepth     = 3 // message, content, refs array
)

// Canonical returns the RFC 8785 canonical JSON of m.
//
// Message ids are SHA-256 of this output and are stored, so it must stay
// byte for byte what the original implementation produced: json.Marshal(m)
// followed by jcs.Transform. That round trip (marshal, re-parse,
// re-serialize) dominated post_send CPU, so the fixed-shape parts of a
// message are now written directly; every rule below is the net effect of
// the round trip, pinned by differential tests against the original code.
func (m *Message) Canonical() ([]byte, error) {
	if m == nil {
		// json.Marshal of a nil pointer is "null"; kept for compatibility.
		return []byte("null"), nil
	}
	b := make([]byte, 0, m.canonicalSizeHint())

	// Members are written in RFC 8785 order. All keys are ASCII, so UTF-16
	// code unit order is plain byte order.
	b = append(b, `{"content":{`...)
	c := &m.Content
	first := true
	b = appendStringMember(b, &first, `"content":`, c.Content)
	b = appendStringMember(b, &first, `"format":`, c.Format)
	if len(c.Machine) != 0 {
		b = appendKey(b, &first, `"machine":`)
		var err error
		if b, err = appendRaw(b, c.Machine, machineDepth, "msg.content.machine"); err != nil {
			return nil, err
		}
	}
	if len(c.Refs) != 0 {
		b = appendKey(b, &first, `"refs":[`)
		for i, r := range c.Refs {
			if i > 0 {
				b = append(b, ',')
			}
			if r == nil {
				// json.RawMessage.MarshalJSON turns nil into null, but an
				// empty non-nil element is invalid JSON and fails below.
				b = append(b, "null"...)
				continue
			}
			var err error
			if b, err = appendRaw(b, r, refDepth, "msg.content.refs["+strconv.Itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendStringMember(b, &first, `"title":`, c.Title)
	b = append(b, '}')

	if m.CreatedAtMS != 0 {
		b = append(b, `,"created_at_ms":`...)
		b = appendInt(b, m.CreatedAtMS)
	}
	if m.ExpiresAtMS != 0 {
		b = append(b, `,"expires_at_ms":`...)
		b = appendInt(b, m.ExpiresAtMS)
	}
	// from has no omitempty: it is always present.
	b = append(b, `,"from":`...)
	b = appendString(b, m.From)
	if m.Kind != "" {
		b = append(b, `,"kind":`...)
		b = appendString(b, m.Kind)
	}
	if len(m.Mentions) != 0 {
		b = append(b, `,"mentions":`...)
		b = appendStrings(b, m.Mentions)
	}
	if len(m.Meta) != 0 {
		b = append(b, `,"meta":`...)
		var err error
		if b, err = appendRaw(b, m.Meta, metaDepth, "msg.meta"); err != nil {
			return nil, err
		}
	}
	if m.Nonce != "" {
		b = append(b, `,"nonce":`...)
		b = appendString(b, m.Nonce)
	}
	if m.Source != "" {
		b = append(b, `,"source":`...)
		b = appendString(b, m.Source)
	}
	if t := m.Thread; t != nil {
		// A non-nil Thread is present even when all its fields are empty.
		b = append(b, `,"thread":{`...)
		first := true
		b = appendStringMember(b, &first, `"correlation_id":`, t.CorrelationID)
		b = appendStringMember(b, &first, `"reply_to":`, t.ReplyTo)
		b = appendStringMember(b, &first, `"topic":`, t.Topic)
		b = append(b, '}')
	}
	if len(m.To) != 0 {
		b = append(b, `,"to":`...)
		b = appendStrings(b, m.To)
	}
	if m.Workspace != "" {
		b = append(b, `,"workspace":`...)
		b = appendString(b, m.Workspace)
	}
	return append(b, '}'), nil
}

// canonicalSizeHint estimates the output size so that the common message
// (no escapes, small raw parts) is encoded without regrowing the buffer.
func (m *Message) canonicalSizeHint() int {
	// Keys, punctuation and numbers of a typical message. Every field set
	// needs up to 288 bytes and may regrow once; sizing for that would put
	// every small message in a larger size class.
	const keys = 192
	n := keys + len(m.From) + len(m.Source) + len(m.Kind) + len(m.Workspace) + len(m.Nonce) + len(m.Meta)
	for _, s := range m.To {
		n += len(s) + 3
	}
	for _, s := range m.Mentions {
		n += len(s) + 3
	}
	if t := m.Thread; t != nil {
		n += len(t.Topic) + len(t.ReplyTo) + len(t.CorrelationID)
	}
	c := &m.Content
	n += len(c.Title) + len(c.Format) + len(c.Content) + len(c.Machine)
	for _, r := range c.Refs {
		n += len(r) + 5
	}
	// Slack for escapes (newlines, quotes) without a second allocation.
	return n + n/32
}

// appendKey writes a member key, with a separating comma unless it is the
// first member of its object.
func appendKey(b []byte, first *bool, key string) []byte {
	if *first {
		*first = false
	} else {
		b = append(b, ',')
	}
	return append(b, key...)
}

// appendStringMember writes a string member unless it is empty (omitempty).
func appendStringMember(b []byte, first *bool, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(appendKey(b, first, key), v)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// plain marks the bytes that are copied unchanged without a closer look.
// json.Marshal escapes <, > and & (and U+2028, U+2029), but jcs decodes
// those escapes and writes the characters back literally, so only quote,
// backslash and control characters end up escaped. DEL (0x7f) is not a
// control character for JSON and stays literal. Bytes of multi-byte UTF-8
// sequences are not plain: each sequence must be checked for validity.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainWord reports whether all eight bytes of w are plain, using the
// "determine if a word has a byte less than n / equal to n" tricks from Bit
// Twiddling Hacks: each is exact about whether any byte matches, which is
// all that is needed to decide between skipping the word and looking at
// its bytes one by one. x&msb rejects bytes >= 0x80.
func plainWord(w string) bool {
	x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
	quote := x ^ (lsb * '"')
	backslash := x ^ (lsb * '\\')
	found := (x - lsb*0x20) &^ x // a byte < 0x20
	found |= (quote - lsb) &^ quote
	found |= (backslash - lsb) &^ backslash
	return (found|x)&msb == 0
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JCS string. Invalid UTF-8 becomes U+FFFD, one
// per byte that utf8.DecodeRuneInString rejects, because json.Marshal wrote
// \ufffd for each and jcs decoded that escape.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Message text is mostly plain ASCII; skip it eight bytes at a time.
		for i+8 <= len(s) && plainWord(s[i:i+8]) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\t':
				b = append(b, '\\', 't')
			case '\n':
				b = append(b, '\\', 'n')
			case '\f':
				b = append(b, '\\', 'f')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// exactFloat bounds the integers a float64 holds exactly; within it the
// decimal digits of the integer are also its ECMAScript number form.
const exactFloat = 1 << 53

// appendInt writes v as jcs wrote it: json.Marshal printed the exact
// digits, jcs parsed them as an IEEE-754 double and printed that double in
// ECMAScript form. Beyond 2^53 this rounds (9007199254740993 becomes
// 9007199254740992). |v| < 2^63 < 1e21, so the form is never exponential.
func appendInt(b []byte, v int64) []byte {
	if -exactFloat <= v && v <= exactFloat {
		return strconv.AppendInt(b, v, 10)
	}
	// Conversion rounds to nearest even, as strconv.ParseFloat does.
	return strconv.AppendFloat(b, float64(v), 'f', -1, 64)
}

// appendRaw writes a free-form JSON part canonicalized by jcs. These parts
// are rare and arbitrary, so they still take the parse and re-serialize
// path, with the acceptance rules of the old whole-message round trip.
func appendRaw(b, raw []byte, depth int, field string) ([]byte, error) {
	// json.Marshal validated raw parts; this keeps rejecting exactly what it
	// rejected, whatever jcs might tolerate.
	if !json.Valid(raw) {
		return nil, model.Invalid(field, "is not valid JSON")
	}
	// Nesting depth cannot exceed the length, so the scan is usually skipped.
	if limit := maxNesting - depth; len(raw) > limit && nestingDepth(raw) > limit {
		return nil, model.Invalid(field, "is nested more than "+strconv.Itoa(limit)+" levels deep")
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, model.Invalid(field, "cannot canonicalize: "+err.Error())
	}
	return append(b, out...), nil
}

// nestingDepth returns the deepest array/object nesting of valid JSON.
func nestingDepth(raw []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}
