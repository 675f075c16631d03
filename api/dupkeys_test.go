package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/msgcenter/msgcenter/wire"
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
		if got, _ := duplicateKey([]byte(c.body)); got != c.want {
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
		if got, want := first(duplicateKey(body)), referenceDuplicateKey(t, body); got != want {
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
	if got, _ := duplicateKey([]byte(clean)); got != "" {
		t.Fatalf("5,000 distinct keys: duplicate %q", got)
	}
	for _, c := range []struct{ dup, want string }{{`"k3"`, "meta.k3"}, {`"k4999"`, "meta.k4999"}, {`"\u006b17"`, "meta.k17"}} {
		if got, _ := duplicateKey([]byte(b.String() + `,` + c.dup + `:1}}`)); got != c.want {
			t.Errorf("key %s again: %q, want %q", c.dup, got, c.want)
		}
	}
}

func first(dup, _ string) string { return dup }

// Keys that differ only in case are reported as twins, not duplicates, and
// count as duplicates only in an object decoded into a struct.
func TestCaseTwins(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, twin string }{
		{`{"msg":{"from":"a","From":"b"}}`, "msg.From"},
		{`{"msg":{"meta":{"k":1,"K":2}}}`, "msg.meta.K"},
		{`{"routes":[{"address":"a"},{"address":"b","ADDRESS":"c"}]}`, "routes[1].ADDRESS"},
		{`{"a":1,"b":2}`, ""},
		{`{"\u0041":1,"a":2}`, "a"},
	} {
		dup, twin := duplicateKey([]byte(c.body))
		if dup != "" || twin != c.twin {
			t.Errorf("duplicateKey(%s) = %q, %q; want no duplicate and twin %q", c.body, dup, twin, c.twin)
		}
	}
	var big strings.Builder
	big.WriteString(`{"meta":{`)
	for i := range 40 {
		big.WriteString(`"k` + strconv.Itoa(i) + `":0,`)
	}
	big.WriteString(`"K39":1}}`)
	if _, twin := duplicateKey([]byte(big.String())); twin != "meta.K39" {
		t.Errorf("a twin in a big object: %q", twin)
	}

	for _, c := range []struct {
		v    any
		path string
		want bool
	}{
		{&wire.PostSendRequest{}, "msg.From", true},
		{&wire.PostSendRequest{}, "msg.content.Content", true},
		{&wire.PostSendRequest{}, "msg.meta.K", false},            // free-form JSON
		{&wire.PostSendRequest{}, "msg.content.machine.X", false}, // free-form JSON
		{&wire.PostSendRequest{}, "Msg", true},
		{&wire.RoutesRequest{}, "routes[1].ADDRESS", true},
		{&wire.PostSendRequest{}, "nothing.here", false},
	} {
		if got := caseTwinInStruct(reflect.TypeOf(c.v), c.path); got != c.want {
			t.Errorf("caseTwinInStruct(%T, %s) = %v, want %v", c.v, c.path, got, c.want)
		}
	}
}

// BenchmarkDuplicateKey is the scan every request body gets: a post_send
// with a 1 KiB text.
func BenchmarkDuplicateKey(b *testing.B) {
	body := []byte(`{"msg":{"from":"did:web:example.com:agents:alice","to":["did:web:example.com:agents:bob"],` +
		`"kind":"chat","content":{"content":"` + strings.Repeat("x", 1024) + `","format":"text/plain"},` +
		`"thread":{"topic":"planning"},"created_at_ms":1700000000000},"idempotency_key":"k-1"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if dup, twin := duplicateKey(body); dup != "" || twin != "" {
			b.Fatal(dup, twin)
		}
	}
}
