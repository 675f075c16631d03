package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"
)

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, want string }{
		{`{"a":1,"b":2}`, ""},
		{`{"a":1,"a":2}`, "a"},
		{`{"msg":{"from":"x","to":["y"],"from":"z"}}`, "msg.from"},
		{`{"a":{"x":1},"b":{"x":1}}`, ""}, // the same key in two objects
		{`{"routes":[{"address":"a"},{"address":"b","address":"c"}]}`, "routes[1].address"},
		{`[{"k":1},{"k":1,"k":2}]`, "[1].k"},
		{`{"a":1,"\u0061":2}`, "a"},        // the same name, escaped
		{`{"a\"b":1,"a\u0022b":2}`, `a"b`}, // an escaped quote in a key
		{`{"A":1,"a":2}`, ""},              // names differ in case
		{`{"s":"{\"a\":1,\"a\":2}"}`, ""},  // keys inside a string are text
		{`{"a":[1,{"b":[],"c":{}}],"d":"]}"}`, ""},
		{`  {"x" : 1 , "x" : 2}  `, "x"},
	} {
		if got := duplicateKey([]byte(c.body)); got != c.want {
			t.Errorf("duplicateKey(%s) = %q, want %q", c.body, got, c.want)
		}
	}
}

// FuzzDuplicateKey checks the byte scanner against a reference walk of
// encoding/json's tokens, on every input that is JSON.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"msg":{"to":["x",{"y":1,"y":2}]}}`, `[{"\u0041":1,"A":2}]`, `{"a\\":1,"a\\":2}`, `"x"`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) || !utf8.Valid(body) { // checkText refuses the rest first
			return
		}
		if got, want := duplicateKey(body), referenceDuplicateKey(t, body); got != want {
			t.Fatalf("duplicateKey(%q) = %q, the reference says %q", body, got, want)
		}
	})
}

// referenceDuplicateKey is duplicateKey written the slow, obvious way.
func referenceDuplicateKey(t *testing.T, body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		seen   map[string]bool
		key    string
		index  int
		inKey  bool // the next string token of this object is a key
	}
	var stack []*frame
	path := func() string {
		s := ""
		for _, f := range stack {
			if f.object {
				if s != "" {
					s += "."
				}
				s += f.key
			} else {
				s += "[" + strconv.Itoa(f.index) + "]"
			}
		}
		return s
	}
	// afterValue moves the enclosing frame past a value.
	afterValue := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.object {
			top.inKey = true
		} else {
			top.index++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, seen: map[string]bool{}, inKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].inKey {
				top := stack[len(stack)-1]
				top.key = v
				if top.seen[v] {
					return path()
				}
				top.seen[v] = true
				top.inKey = false
				continue
			}
			afterValue()
		default:
			afterValue()
		}
	}
}

// Objects past smallObject keys are checked through a set, the same way.
func TestDuplicateKeyBigObject(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(`{"meta":{`)
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	clean := b.String() + `}}`
	if got := duplicateKey([]byte(clean)); got != "" {
		t.Fatalf("5,000 distinct keys: duplicate %q", got)
	}
	for _, c := range []struct{ dup, want string }{{`"k3"`, "meta.k3"}, {`"k4999"`, "meta.k4999"}, {`"\u006b17"`, "meta.k17"}} {
		if got := duplicateKey([]byte(b.String() + `,` + c.dup + `:1}}`)); got != c.want {
			t.Errorf("key %s again: %q, want %q", c.dup, got, c.want)
		}
	}
}
