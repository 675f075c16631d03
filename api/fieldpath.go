package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// unknownFieldPath says where in body the unknown field name is, as the
// dotted path of the JSON (msg.content.bogus, routes[1].bogus):
// encoding/json names only the key, which for a field of a nested object
// does not tell the caller what to fix. It walks body against t, the type
// it was decoded into, and returns "" when it cannot tell.
func unknownFieldPath(body []byte, t reflect.Type, name string) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return ""
	}
	var found []string
	walkUnknown(v, t, "", name, &found)
	if len(found) == 0 {
		return ""
	}
	sort.Strings(found) // a map's order is random; any answer must be the same each time
	return found[0]
}

func walkUnknown(v any, t reflect.Type, path, name string, found *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(json.RawMessage(nil)) {
		return
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			for k, sub := range val {
				ft, ok := jsonField(t, k)
				switch {
				case !ok && k == name:
					*found = append(*found, join(path, k))
				case ok:
					walkUnknown(sub, ft, join(path, k), name, found)
				}
			}
		case reflect.Map:
			for k, sub := range val {
				walkUnknown(sub, t.Elem(), join(path, k), name, found)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, sub := range val {
				walkUnknown(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i), name, found)
			}
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonField finds the field of struct t that encoding/json would decode key
// into: by its tag's name or its Go name, exactly or else case-insensitively,
// through embedded structs.
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	var fold reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if ft, ok := jsonField(et, key); ok {
					return ft, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		n := tag
		if n == "" {
			n = f.Name
		}
		if n == key {
			return f.Type, true
		}
		if fold == nil && strings.EqualFold(n, key) {
			fold = f.Type
		}
	}
	return fold, fold != nil
}

// pathAt is the dotted path (routes[1].priority) of the value of body that
// ends at or after byte off, "" if body has none there.
func pathAt(body []byte, off int64) string {
	type frame struct {
		obj       bool
		expectKey bool
		key       string
		idx       int
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	done := func() { // the value at the top's position has been read
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].expectKey = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].expectKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				if dec.InputOffset() >= off {
					return path()
				}
				done()
				continue
			}
			key, _ := tok.(string)
			stack[n-1].key, stack[n-1].expectKey = key, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			// encoding/json places a container of the wrong type just
			// after its opening delimiter.
			if dec.InputOffset() >= off {
				return path()
			}
			stack = append(stack, frame{obj: tok == json.Delim('{'), expectKey: tok == json.Delim('{')})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			if dec.InputOffset() >= off {
				return path()
			}
			done()
		default:
			if dec.InputOffset() >= off {
				return path()
			}
			done()
		}
	}
}

// withoutIndexes drops a path's array indexes: routes[1].priority is
// routes.priority, as encoding/json names it.
func withoutIndexes(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			for i < len(path) && path[i] != ']' {
				i++
			}
			continue
		}
		b.WriteByte(path[i])
	}
	return b.String()
}
