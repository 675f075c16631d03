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
