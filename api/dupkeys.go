package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// duplicateKey finds the first object in body that names a key twice and
// returns that key's path (msg.from, routes[1].address); "" when there is
// none. encoding/json keeps the last of such keys without a word, and a
// message is stored under the hash of what was decoded: whoever read the
// first (a proxy, a log, the client's own hash) saw another message.
// RFC 8785, by which message ids are computed, forbids duplicate names.
// Keys are compared as decoded, so "a" and "\u0061" are the same key.
// body must be one JSON value that decoded.
func duplicateKey(body []byte) string {
	type frame struct {
		object bool
		keys   [][]byte        // raw (escaped) names seen so far, inside their quotes
		names  map[string]bool // the same, decoded, once there are many
		key    string          // the current key (objects), as decoded
		index  int             // the current element (arrays)
	}
	var stack []frame
	expectKey := false
	path := func(last string) string {
		var b strings.Builder
		for _, f := range stack[:len(stack)-1] {
			writePathStep(&b, f.object, f.key, f.index)
		}
		writePathStep(&b, true, last, 0)
		return b.String()
	}
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			stack = append(stack, frame{object: true})
			expectKey = true
		case '[':
			stack = append(stack, frame{})
			expectKey = false
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			if top := len(stack) - 1; top >= 0 {
				if stack[top].object {
					expectKey = true
				} else {
					stack[top].index++
				}
			}
		case '"':
			end := stringEnd(body, i)
			if expectKey {
				top := &stack[len(stack)-1]
				raw := body[i+1 : end]
				top.key = decodeKey(raw)
				if top.names != nil {
					if top.names[top.key] {
						return path(top.key)
					}
					top.names[top.key] = true
				} else {
					for _, k := range top.keys {
						if sameKey(k, raw) {
							return path(top.key)
						}
					}
					top.keys = append(top.keys, raw)
					if len(top.keys) > smallObject { // past a few, a set: no quadratic scan of a big object
						top.names = make(map[string]bool, 2*len(top.keys))
						for _, k := range top.keys {
							top.names[decodeKey(k)] = true
						}
						top.keys = nil
					}
				}
				expectKey = false
			}
			i = end
		}
	}
	return ""
}

// smallObject is how many keys an object's duplicates are looked for
// among by comparing bytes, before a set of names takes over.
const smallObject = 16

func writePathStep(b *strings.Builder, object bool, key string, index int) {
	if !object {
		b.WriteString("[" + strconv.Itoa(index) + "]")
		return
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
}

// stringEnd returns the index of the quote that closes the JSON string
// whose opening quote is at body[start].
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(body) - 1
}

// sameKey compares two raw key texts as the names they decode to.
func sameKey(a, b []byte) bool {
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return bytes.Equal(a, b)
	}
	return decodeKey(a) == decodeKey(b)
}

// decodeKey decodes a raw key text (between its quotes).
func decodeKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if json.Unmarshal(q, &s) != nil {
		return string(raw)
	}
	return s
}
