package api

import (
	"bytes"
	"encoding/json"
	"reflect"
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
//
// twin is the path of the first key that differs from an earlier one of
// its object only in letter case: encoding/json fills a struct's field from
// either, so in an object decoded into a struct it is a duplicate too
// (caseTwinInStruct tells), while in a map or free-form JSON it is not.
// body must be one JSON value that decoded.
func duplicateKey(body []byte) (dup, twin string) {
	type frame struct {
		object bool
		start  int             // where this object's names begin in keys
		names  map[string]bool // its names, decoded, once there are many
		folded map[string]bool // and lower-cased
		key    []byte          // the current key (objects), raw
		index  int             // the current element (arrays)
	}
	// Without allocating for the usual body: the raw names of the open
	// objects share one slice, each object's at the end of its parent's.
	var stackBuf [8]frame
	var keysBuf [32][]byte
	stack, keys := stackBuf[:0], keysBuf[:0]
	expectKey := false
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			writePathStep(&b, f.object, decodeKey(f.key), f.index)
		}
		return b.String()
	}
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			stack = append(stack, frame{object: true, start: len(keys)})
			expectKey = true
		case '[':
			stack = append(stack, frame{start: len(keys)})
			expectKey = false
		case '}', ']':
			if len(stack) == 0 { // not one JSON value: nothing to report
				return "", twin
			}
			keys = keys[:stack[len(stack)-1].start]
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
				top.key = raw
				if top.names != nil {
					name := decodeKey(raw)
					if top.names[name] {
						return path(), twin
					}
					lower := strings.ToLower(name)
					if twin == "" && top.folded[lower] {
						twin = path()
					}
					top.names[name], top.folded[lower] = true, true
				} else {
					for _, k := range keys[top.start:] {
						switch {
						case sameKey(k, raw):
							return path(), twin
						case twin == "" && foldKey(k, raw):
							twin = path()
						}
					}
					keys = append(keys, raw)
					if len(keys)-top.start > smallObject { // past a few, a set: no quadratic scan of a big object
						top.names = make(map[string]bool, 2*(len(keys)-top.start))
						top.folded = make(map[string]bool, 2*(len(keys)-top.start))
						for _, k := range keys[top.start:] {
							name := decodeKey(k)
							top.names[name], top.folded[strings.ToLower(name)] = true, true
						}
						keys = keys[:top.start]
					}
				}
				expectKey = false
			}
			i = end
		}
	}
	return "", twin
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

// foldKey says whether two raw key texts name keys that differ only in
// letter case.
func foldKey(a, b []byte) bool {
	if bytes.IndexByte(a, '\\') < 0 && bytes.IndexByte(b, '\\') < 0 {
		return bytes.EqualFold(a, b)
	}
	return strings.EqualFold(decodeKey(a), decodeKey(b))
}

// caseTwinInStruct says whether the object holding the key at path (as
// duplicateKey writes paths) is decoded into a struct of t, where
// encoding/json matches names without regard to case. Inside a map or
// free-form JSON (json.RawMessage) names that differ in case are distinct.
func caseTwinInStruct(t reflect.Type, path string) bool {
	steps := pathSteps(path)
	if len(steps) == 0 {
		return false
	}
	for _, step := range steps[:len(steps)-1] {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == rawMessageType:
			return false
		case step.index:
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return false
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			ft, ok := jsonField(t, step.name)
			if !ok {
				return false
			}
			t = ft
		default:
			return false
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != rawMessageType
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

type pathStep struct {
	name  string
	index bool // an array element, not a key
}

// pathSteps splits a path duplicateKey wrote (a.b[1].c) into its steps.
func pathSteps(path string) []pathStep {
	var out []pathStep
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" || rest == "" {
			out = append(out, pathStep{name: name})
		}
		for rest != "" {
			_, after, ok := strings.Cut(rest, "[")
			out = append(out, pathStep{index: true})
			if !ok {
				break
			}
			rest = after
		}
	}
	return out
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
