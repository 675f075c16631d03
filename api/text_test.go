package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/msgcenter/msgcenter/model"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		bad  bool
	}{
		{`{"a":"plain"}`, false},
		{`{"a":"\ud83d\ude00"}`, false}, // a pair: 😀
		{`{"a":"\uD83D\uDE00 and \u00e9"}`, false},
		{`{"a":"\\ud800"}`, false}, // an escaped backslash, then text
		{`{"a":"\"\ud800"}`, true},
		{`{"a":"\ud800"}`, true},
		{`{"a":"\ud800x"}`, true},
		{`{"a":"\udc00"}`, true},
		{`{"a":"\ud800\u0041"}`, true},
		{`{"a":"\ud800\ud800"}`, true},
		{`{"\ud800":1}`, true}, // keys are strings too
		{"{\"a\":\"\xff\"}", true},
	} {
		err := checkText([]byte(tc.body))
		if tc.bad != (err != nil) || (err != nil && !errors.Is(err, model.ErrInvalid)) {
			t.Errorf("checkText(%s) = %v, want bad %v", tc.body, err, tc.bad)
		}
	}
}

// FuzzLoneSurrogate: whatever the input, no panic; JSON that encoding/json
// writes (never a lone surrogate) passes; and a body passes only if
// decoding it into a string and writing it again keeps every character.
func FuzzLoneSurrogate(f *testing.F) {
	for _, s := range []string{`"\ud800"`, `"\ud83d\ude00"`, `"\\u"`, `"\u12"`, `"a\"b"`, `"\udc00\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		at := loneSurrogate(body)
		if at >= 0 && (at+6 > len(body) || body[at] != '\\' || body[at+1] != 'u') {
			t.Fatalf("loneSurrogate(%q) = %d, not at an escape", body, at)
		}
		var s string
		if json.Unmarshal(body, &s) != nil || !utf8.Valid(body) {
			return
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if loneSurrogate(again) >= 0 {
			t.Fatalf("encoding/json's own %s has a lone surrogate", again)
		}
		// A lone surrogate decodes to U+FFFD; a body without one and
		// without U+FFFD of its own decodes without one.
		if at < 0 && !containsRune(body, '\uFFFD') && !hasEscapedFFFD(body) && containsRune([]byte(s), '\uFFFD') {
			t.Fatalf("%q passed, but decodes to %q", body, s)
		}
	})
}

func containsRune(b []byte, r rune) bool {
	for _, c := range string(b) {
		if c == r {
			return true
		}
	}
	return false
}

func hasEscapedFFFD(b []byte) bool {
	for i := 0; i+6 <= len(b); i++ {
		if b[i] == '\\' && b[i+1] == 'u' {
			if r, ok := hex4(b, i+2); ok && r == 0xFFFD {
				return true
			}
		}
	}
	return false
}

// The type a wrong-typed field wanted, in JSON's words.
func TestGoTypeName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"int64": "integer", "*int64": "integer", "float64": "number",
		"[]model.State": "array", "[]string": "array", "model.State": "string", "bool": "boolean", "wire.SendCtx": "object"} {
		if got := goTypeName(in); got != want {
			t.Errorf("goTypeName(%s) = %s, want %s", in, got, want)
		}
	}
}

// An unknown field of a nested object is named by its path.
func TestUnknownFieldPath(t *testing.T) {
	t.Parallel()
	type inner struct {
		Content string `json:"content"`
	}
	type item struct {
		Name string `json:"name"`
	}
	type embedded struct {
		Extra string `json:"extra"`
	}
	type req struct {
		embedded
		Msg   *inner            `json:"msg"`
		Items []item            `json:"items"`
		Meta  map[string]item   `json:"meta"`
		Raw   json.RawMessage   `json:"raw"`
		Top   string            `json:"top"`
		Tags  map[string]string `json:"tags"`
	}
	for _, tc := range []struct{ body, name, want string }{
		{`{"bogus":1}`, "bogus", "bogus"},
		{`{"msg":{"content":"x","bogus":1}}`, "bogus", "msg.bogus"},
		{`{"items":[{"name":"a"},{"name":"b","bogus":1}]}`, "bogus", "items[1].bogus"},
		{`{"meta":{"k":{"bogus":1}}}`, "bogus", "meta.k.bogus"},
		{`{"extra":"x","MSG":{"bogus":1}}`, "bogus", "MSG.bogus"}, // keys match fields case-insensitively
		{`{"raw":{"bogus":1},"bogus":2}`, "bogus", "bogus"},       // RawMessage holds anything
		{`{"top":"x"}`, "bogus", ""},
	} {
		if got := unknownFieldPath([]byte(tc.body), reflect.TypeOf(&req{}), tc.name); got != tc.want {
			t.Errorf("unknownFieldPath(%s, %s) = %q, want %q", tc.body, tc.name, got, tc.want)
		}
	}
}
