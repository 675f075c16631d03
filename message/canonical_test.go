package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/model"
)

// referenceCanonical is the original Canonical: marshal, then let jcs
// re-parse and re-serialize. Stored message ids were computed with it, so
// the direct encoder must agree with it on every input.
func referenceCanonical(m *Message) ([]byte, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, &model.Error{Kind: model.ErrInvalid, Field: "msg", Message: "cannot canonicalize message: " + err.Error()}
	}
	return out, nil
}

// sameAsReference fails unless Canonical and referenceCanonical both
// succeed with identical bytes, or both fail. It returns Canonical's result.
func sameAsReference(t interface {
	Helper()
	Fatalf(format string, args ...any)
}, m *Message) ([]byte, error) {
	t.Helper()
	want, werr := referenceCanonical(m)
	got, gerr := m.Canonical()
	switch {
	case werr != nil && gerr == nil:
		t.Fatalf("reference fails (%v) but Canonical accepts:\n%q\nmessage %#v", werr, got, m)
	case werr == nil && gerr != nil:
		t.Fatalf("reference accepts but Canonical fails (%v):\n%q\nmessage %#v", gerr, want, m)
	case werr == nil && !bytes.Equal(got, want):
		t.Fatalf("canonical mismatch\n got %q\nwant %q\nmessage %#v", got, want, m)
	case gerr != nil && !errors.Is(gerr, model.ErrInvalid):
		t.Fatalf("error %v is not ErrInvalid", gerr)
	}
	return got, gerr
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// nested returns n nested arrays around a zero.
func nested(n int) json.RawMessage {
	return raw(strings.Repeat("[", n) + "0" + strings.Repeat("]", n))
}

func allControls() string {
	var b strings.Builder
	for c := 0; c < 0x20; c++ {
		b.WriteByte(byte(c))
	}
	b.WriteByte(0x7f)
	return b.String()
}

// trickyStrings exercise every branch of string escaping, including the
// ways json.Marshal repairs invalid UTF-8.
var trickyStrings = []string{
	"",
	"plain",
	allControls(),
	`"\/'`,
	"<script>&amp;</script>",
	"\u2028\u2029",
	"\ufffd",
	"é€😀\U0010ffff",
	"\x80",             // lone continuation byte
	"a\xc3",            // truncated 2-byte sequence
	"\xe2\x82",         // truncated 3-byte sequence
	"\xf0\x9f\x98",     // truncated 4-byte sequence
	"\xed\xa0\x80",     // UTF-8 encoded surrogate U+D800
	"\xed\xb0\x80x",    // UTF-8 encoded surrogate U+DC00
	"\xc0\x80",         // overlong NUL
	"\xe0\x80\xaf",     // overlong slash
	"\xf4\x90\x80\x80", // beyond U+10FFFF
	"\xff\xfe",
	"\xe2\x80\xa8\xe2\x80", // U+2028 then a truncated one
	"x\xf0\x9f\x98\x80\xf0",
}

func TestCanonicalMatchesReference(t *testing.T) {
	t.Parallel()
	type canonCase struct {
		name  string
		m     Message
		want  string // pinned output; "" to only compare with the reference
		field string // expected error field; "" if Canonical must succeed
	}
	cases := []canonCase{
		{name: "empty message", m: Message{}, want: `{"content":{},"from":""}`},
		{name: "empty thread", m: Message{From: "a", Thread: &Thread{}}, want: `{"content":{},"from":"a","thread":{}}`},
		{name: "full thread", m: Message{From: "a", Thread: &Thread{Topic: "t", ReplyTo: "r", CorrelationID: "c"}},
			want: `{"content":{},"from":"a","thread":{"correlation_id":"c","reply_to":"r","topic":"t"}}`},
		{name: "empty slices", m: Message{To: []string{}, Mentions: []string{}, Content: Content{Refs: []json.RawMessage{}}, Meta: raw("")},
			want: `{"content":{},"from":""}`},
		{name: "empty strings in slices", m: Message{To: []string{""}, Mentions: []string{"", ""}},
			want: `{"content":{},"from":"","mentions":["",""],"to":[""]}`},
		{name: "every field", m: Message{From: "f", To: []string{"t1", "t2"}, Source: "s", Kind: "chat", Thread: &Thread{Topic: "x"},
			Workspace: "w", Mentions: []string{"m"}, CreatedAtMS: 1, ExpiresAtMS: 2, Nonce: "n",
			Content: Content{Title: "ti", Format: "fo", Content: "co", Machine: raw(`{"b":1,"a":2}`), Refs: []json.RawMessage{raw(`"r"`)}},
			Meta:    raw(`{"z":true}`)},
			want: `{"content":{"content":"co","format":"fo","machine":{"a":2,"b":1},"refs":["r"],"title":"ti"},"created_at_ms":1,"expires_at_ms":2,"from":"f","kind":"chat","mentions":["m"],"meta":{"z":true},"nonce":"n","source":"s","thread":{"topic":"x"},"to":["t1","t2"],"workspace":"w"}`},
		{name: "refs with nil element", m: Message{Content: Content{Refs: []json.RawMessage{nil, raw(`{"a":1}`), nil}}},
			want: `{"content":{"refs":[null,{"a":1},null]},"from":""}`},
		{name: "refs with empty element", m: Message{Content: Content{Refs: []json.RawMessage{nil, raw(`1`), {}}}}, field: "msg.content.refs[2]"},
		{name: "control characters", m: Message{From: allControls()},
			want: `{"content":{},"from":"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f` + "\x7f" + `"}`},
		{name: "html and line separators stay literal", m: Message{From: "<>&\u2028\u2029"}, want: "{\"content\":{},\"from\":\"<>&\u2028\u2029\"}"},
		{name: "invalid UTF-8 becomes one U+FFFD per bad byte", m: Message{From: "a\xed\xa0\x80b\xc0\x80\xe2\x82"},
			want: "{\"content\":{},\"from\":\"a\ufffd\ufffd\ufffdb\ufffd\ufffd\ufffd\ufffd\"}"},
		{name: "2^53+1 rounds", m: Message{CreatedAtMS: 1<<53 + 1}, want: `{"content":{},"created_at_ms":9007199254740992,"from":""}`},
		{name: "2^53+3 rounds up", m: Message{CreatedAtMS: 1<<53 + 3}, want: `{"content":{},"created_at_ms":9007199254740996,"from":""}`},
		{name: "max int64", m: Message{CreatedAtMS: math.MaxInt64}, want: `{"content":{},"created_at_ms":9223372036854776000,"from":""}`},
		{name: "min int64", m: Message{ExpiresAtMS: math.MinInt64}, want: `{"content":{},"expires_at_ms":-9223372036854776000,"from":""}`},
		{name: "negative", m: Message{CreatedAtMS: -1, ExpiresAtMS: -(1<<53 + 1)}, want: `{"content":{},"created_at_ms":-1,"expires_at_ms":-9007199254740992,"from":""}`},
		{name: "round trailing digits", m: Message{CreatedAtMS: 1234567890123456789}, want: `{"content":{},"created_at_ms":1234567890123456800,"from":""}`},
		{name: "raw parts with whitespace", m: Message{Meta: raw(" \n{ \"b\" :\t[ 1 , 2 ] ,\r\"a\" : null }\n "),
			Content: Content{Machine: raw(" [ {} , [ ] ] "), Refs: []json.RawMessage{raw("  \"x\"  ")}}},
			want: `{"content":{"machine":[{},[]],"refs":["x"]},"from":"","meta":{"a":null,"b":[1,2]}}`},
		{name: "meta keys in UTF-16 order", m: Message{Meta: raw(`{"\ud83d\ude00":1,"\u20ac":2,"\ufb33":3,"a":4}`)},
			want: "{\"content\":{},\"from\":\"\",\"meta\":{\"a\":4,\"\u20ac\":2,\"\U0001f600\":1,\"\ufb33\":3}}"},
		{name: "meta numbers", m: Message{Meta: raw(`[1e21,1e20,0.1,-0,1e-7,1E+2,5e-324,1.7976931348623157e308]`)},
			want: `{"content":{},"from":"","meta":[1e+21,100000000000000000000,0.1,0,1e-7,100,5e-324,1.7976931348623157e+308]}`},
		{name: "meta number out of range", m: Message{Meta: raw(`{"n":1E400}`)}, field: "msg.meta"},
		{name: "meta duplicate keys", m: Message{Meta: raw(`{"a":1,"a":2}`)}, field: "msg.meta"},
		{name: "meta duplicate keys after unescaping", m: Message{Meta: raw(`{"a":1,"\u0061":2}`)}, field: "msg.meta"},
		{name: "meta lone surrogate escape", m: Message{Meta: raw(`"\ud800"`)}, field: "msg.meta"},
		{name: "meta invalid UTF-8", m: Message{Meta: raw("\"\xff\"")}, field: "msg.meta"},
		{name: "meta invalid JSON", m: Message{Meta: raw(`{"a":}`)}, field: "msg.meta"},
		{name: "meta whitespace only", m: Message{Meta: raw(" ")}, field: "msg.meta"},
		{name: "meta trailing data", m: Message{Meta: raw(`{} {}`)}, field: "msg.meta"},
		{name: "meta scalars", m: Message{Meta: raw(`null`), Content: Content{Machine: raw(`42.0`)}},
			want: `{"content":{"machine":42},"from":"","meta":null}`},
		{name: "meta escapes", m: Message{Meta: raw(`"\u003c\u003e\u0026\u2028\/\u00e9\u001F\u007f\ud83d\ude00"`)},
			want: "{\"content\":{},\"from\":\"\",\"meta\":\"<>&\u2028/é\\u001f\x7f😀\"}"},
		{name: "meta literal html and separators", m: Message{Meta: raw("\"<>&\u2028\u2029\"")},
			want: "{\"content\":{},\"from\":\"\",\"meta\":\"<>&\u2028\u2029\"}"},
		{name: "machine invalid", m: Message{Content: Content{Machine: raw(`tru`)}}, field: "msg.content.machine"},
		{name: "ref invalid", m: Message{Content: Content{Refs: []json.RawMessage{raw(`1`), raw(`1`), raw(`[1,]`)}}}, field: "msg.content.refs[2]"},
		// The old path applied the nesting limit to the whole message.
		{name: "meta at nesting limit", m: Message{Meta: nested(maxNesting - metaDepth)}},
		{name: "meta beyond nesting limit", m: Message{Meta: nested(maxNesting - metaDepth + 1)}, field: "msg.meta"},
		{name: "machine at nesting limit", m: Message{Content: Content{Machine: nested(maxNesting - machineDepth)}}},
		{name: "machine beyond nesting limit", m: Message{Content: Content{Machine: nested(maxNesting - machineDepth + 1)}}, field: "msg.content.machine"},
		{name: "ref at nesting limit", m: Message{Content: Content{Refs: []json.RawMessage{nested(maxNesting - refDepth)}}}},
		{name: "ref beyond nesting limit", m: Message{Content: Content{Refs: []json.RawMessage{nested(maxNesting - refDepth + 1)}}}, field: "msg.content.refs[0]"},
		{name: "brackets in strings do not nest", m: Message{Meta: raw(`["` + strings.Repeat(`[\"{`, 5000) + `"]`)}},
	}
	for _, s := range trickyStrings {
		cases = append(cases, canonCase{name: fmt.Sprintf("string %q", s), m: everyString(s)})
	}
	for _, n := range []int64{1, -1, 1<<53 - 1, 1 << 53, -(1 << 53), 1<<53 + 1, 1<<53 + 2, -(1<<53 + 1), 1<<62 + 511, 1<<62 + 512, 1<<62 + 513,
		1e15, 1e17 + 1, 1e18, 999999999999999999, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 63 >> 1} {
		cases = append(cases, canonCase{name: fmt.Sprintf("int %d", n), m: Message{CreatedAtMS: n, ExpiresAtMS: -n}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := sameAsReference(t, &tc.m)
			if tc.field != "" {
				var me *model.Error
				if !errors.As(err, &me) || me.Kind != model.ErrInvalid || me.Field != tc.field {
					t.Fatalf("err = %v, want ErrInvalid on %q", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && string(got) != tc.want {
				t.Fatalf("canonical\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// everyString puts s in every string field of a message.
func everyString(s string) Message {
	return Message{From: s, To: []string{s, s}, Source: s, Kind: s, Thread: &Thread{Topic: s, ReplyTo: s, CorrelationID: s},
		Workspace: s, Mentions: []string{s}, Nonce: s, Content: Content{Title: s, Format: s, Content: s}}
}

func TestCanonicalNil(t *testing.T) {
	t.Parallel()
	var m *Message
	if got, _ := sameAsReference(t, m); string(got) != "null" {
		t.Fatalf("got %q", got)
	}
}

// FuzzCanonical compares the direct encoder with the reference on messages
// built from fuzzed fields. flags choose the shapes that strings alone
// cannot: nil or empty slices and thread, nil refs.
func FuzzCanonical(f *testing.F) {
	f.Add("did:a", "did:b", "", "chat", "", "n1", "topic", "", "", "title", "markdown", "hello\nworld",
		int64(1700000000000), int64(0), []byte(`{"k":[1,2.5e3,"x"]}`), []byte(nil), []byte(`{"a":1}`), uint8(0x0f))
	f.Add("\xed\xa0\x80", "\u2028", "<&>", "\x00\x1f\x7f", "\xc0\x80", "\xf0\x9f\x98", "😀", "\ufffd", "\\\"", "", "", "",
		int64(math.MaxInt64), int64(math.MinInt64), []byte(" { \"\\u20ac\" : 1 , \"\\ud83d\\ude00\" : -0 } "), []byte(`[1e21, 0.1]`), []byte(`null`), uint8(0xff))
	f.Add("", "", "", "", "", "", "", "", "", "", "", "", int64(1<<53+1), int64(-(1<<53 + 1)),
		[]byte(`{"a":1,"a":2}`), []byte(`1E400`), []byte(``), uint8(0x30))
	f.Add("a", "b", "", "", "", "", "", "", "", "", "", "", int64(0), int64(0),
		[]byte(`"\u003c\u2028\/"`), []byte("\"\xff\""), []byte(`"\ud800"`), uint8(0x12))
	f.Fuzz(func(t *testing.T, from, to, source, kind, workspace, nonce, topic, replyTo, corr, title, format, content string,
		created, expires int64, meta, machine, ref []byte, flags uint8) {
		m := &Message{From: from, Source: source, Kind: kind, Workspace: workspace, Nonce: nonce,
			CreatedAtMS: created, ExpiresAtMS: expires, Meta: meta,
			Content: Content{Title: title, Format: format, Content: content, Machine: machine}}
		if flags&1 != 0 {
			m.To = []string{to}
		} else if flags&2 != 0 {
			m.To = []string{}
		}
		if flags&4 != 0 {
			m.Mentions = []string{to, from}
		}
		if flags&8 != 0 {
			m.Thread = &Thread{Topic: topic, ReplyTo: replyTo, CorrelationID: corr}
		}
		if flags&0x10 != 0 {
			m.Content.Refs = append(m.Content.Refs, ref)
		}
		if flags&0x20 != 0 {
			m.Content.Refs = append(m.Content.Refs, nil)
		}
		if flags&0x40 != 0 {
			m.Content.Refs = append(m.Content.Refs, meta)
		}
		if flags&0x80 != 0 {
			m.Content.Refs = []json.RawMessage{}
		}
		sameAsReference(t, m)
	})
}

// Property: random messages, with strings over all of Unicode, invalid
// UTF-8 and random raw JSON, canonicalize exactly as the reference does.
func TestCanonicalProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genText()
		strs := rapid.SliceOfN(s, 0, 3)
		rawPart := genRaw()
		m := &Message{
			From: s.Draw(t, "from"), To: strs.Draw(t, "to"), Source: s.Draw(t, "source"), Kind: s.Draw(t, "kind"),
			Workspace: s.Draw(t, "workspace"), Mentions: strs.Draw(t, "mentions"), Nonce: s.Draw(t, "nonce"),
			CreatedAtMS: genInt().Draw(t, "created"), ExpiresAtMS: genInt().Draw(t, "expires"),
			Meta: rawPart.Draw(t, "meta"),
			Content: Content{Title: s.Draw(t, "title"), Format: s.Draw(t, "format"), Content: s.Draw(t, "content"),
				Machine: rawPart.Draw(t, "machine")},
		}
		if rapid.Bool().Draw(t, "thread") {
			m.Thread = &Thread{Topic: s.Draw(t, "topic"), ReplyTo: s.Draw(t, "reply_to"), CorrelationID: s.Draw(t, "correlation_id")}
		}
		if rapid.Bool().Draw(t, "refs") {
			m.Content.Refs = rapid.SliceOfN(rawPart, 0, 3).Draw(t, "refs")
		}
		sameAsReference(t, m)
	})
}

// genText draws strings that are mostly valid Unicode, sometimes tricky
// literals, sometimes arbitrary bytes.
func genText() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom(trickyStrings),
		rapid.String(),
		rapid.StringOf(rapid.SampledFrom([]rune{0, '\b', '\t', '\n', '\f', '\r', 0x1f, '"', '\\', '/', '<', '>', '&', 0x7f,
			0x80, 0x2028, 0x2029, 0xfffd, 0xfeff, 0x1f600, 0x10ffff, 'a'})),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
		rapid.Map(rapid.SliceOf(rapid.SampledFrom([]byte{'a', 0x80, 0xbf, 0xc0, 0xc3, 0xe2, 0x82, 0xa8, 0xed, 0xa0, 0xf0, 0x9f, 0xf4, 0xff})),
			func(b []byte) string { return string(b) }),
	)
}

func genInt() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64(),
		rapid.Map(rapid.Uint64(), func(u uint64) int64 { return int64(u) }),
		rapid.SampledFrom([]int64{0, 1, -1, 1 << 53, 1<<53 + 1, -(1<<53 + 1), math.MaxInt64, math.MinInt64, 1700000000000}),
		rapid.Map(rapid.Int64Range(-1<<20, 1<<20), func(d int64) int64 { return 1<<53 + d }),
		rapid.Map(rapid.Int64Range(-1<<20, 1<<20), func(d int64) int64 { return math.MaxInt64 - 1<<20 + d }),
	)
}

// genRaw draws a raw JSON part: usually a valid (if oddly spaced) value,
// sometimes one the old path rejected, sometimes nil or empty.
func genRaw() *rapid.Generator[json.RawMessage] {
	return rapid.Custom(func(t *rapid.T) json.RawMessage {
		switch rapid.IntRange(0, 9).Draw(t, "raw kind") {
		case 0:
			return nil
		case 1:
			return json.RawMessage{}
		case 2:
			return json.RawMessage(rapid.SampledFrom([]string{`{"a":1,"a":2}`, `1E400`, `"\udc00"`, "\"\xc3\"", `[1,]`, `{`, ` `,
				`-01`, `.5`, `0x10`, `+1`, `NaN`, `"\x"`, `tru`, `[] []`}).Draw(t, "invalid"))
		}
		var b []byte
		genValue(t, &b, 0)
		return b
	})
}

func genSpace(t *rapid.T, b *[]byte) {
	if rapid.IntRange(0, 3).Draw(t, "ws?") == 0 {
		*b = append(*b, rapid.SampledFrom([]string{" ", "\n", "\t", "\r\n  "}).Draw(t, "ws")...)
	}
}

func genValue(t *rapid.T, b *[]byte, depth int) {
	genSpace(t, b)
	kind := rapid.IntRange(0, 5).Draw(t, "value kind")
	if depth >= 3 && kind >= 4 {
		kind = 0
	}
	switch kind {
	case 0:
		*b = append(*b, rapid.SampledFrom([]string{"null", "true", "false"}).Draw(t, "literal")...)
	case 1:
		*b = append(*b, genNumber(t)...)
	case 2, 3:
		genJSONString(t, b)
	case 4:
		*b = append(*b, '[')
		n := rapid.IntRange(0, 4).Draw(t, "len")
		for i := 0; i < n; i++ {
			if i > 0 {
				*b = append(*b, ',')
			}
			genValue(t, b, depth+1)
		}
		genSpace(t, b)
		*b = append(*b, ']')
	case 5:
		*b = append(*b, '{')
		n := rapid.IntRange(0, 4).Draw(t, "len")
		for i := 0; i < n; i++ {
			if i > 0 {
				*b = append(*b, ',')
			}
			genSpace(t, b)
			genJSONString(t, b)
			genSpace(t, b)
			*b = append(*b, ':')
			genValue(t, b, depth+1)
		}
		genSpace(t, b)
		*b = append(*b, '}')
	}
	genSpace(t, b)
}

func genNumber(t *rapid.T) string {
	switch rapid.IntRange(0, 3).Draw(t, "number kind") {
	case 0:
		return rapid.SampledFrom([]string{"0", "-0", "1e21", "1e20", "0.1", "1E400", "-1e-400", "1e-7", "0.000001", "5e-324",
			"9007199254740993", "333333333.33333329", "4.50", "2e-3", "1E+30", "-0.0e-0", "123456789012345678901234567890"}).Draw(t, "number")
	case 1:
		return strconv.FormatInt(genInt().Draw(t, "int"), 10)
	default:
		f := rapid.Float64().Draw(t, "float")
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return "0"
		}
		return strconv.FormatFloat(f, rapid.SampledFrom([]byte{'e', 'E', 'f', 'g'}).Draw(t, "fmt"), -1, 64)
	}
}

// genJSONString writes a JSON string token, mixing literal characters with
// every escape form; rarely it breaks the string on purpose.
func genJSONString(t *rapid.T, b *[]byte) {
	s := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"a", "b", "€", "😀", "דּ", "\u0080", "\r", "1"})).Draw(t, "str")
	*b = append(*b, '"')
	for _, r := range s {
		switch rapid.IntRange(0, 4).Draw(t, "escape") {
		case 0:
			if r >= 0x10000 {
				r1, r2 := utf16Pair(r)
				*b = fmt.Appendf(*b, `\u%04x\u%04X`, r1, r2)
			} else {
				*b = fmt.Appendf(*b, `\u%04x`, r)
			}
			continue
		case 1:
			if e, ok := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}[r]; ok {
				*b = append(*b, e...)
				continue
			}
		}
		switch {
		case r < 0x20 || r == '"' || r == '\\':
			*b = fmt.Appendf(*b, `\u%04X`, r)
		default:
			*b = utf8.AppendRune(*b, r)
		}
	}
	if rapid.IntRange(0, 49).Draw(t, "break string") == 0 {
		*b = append(*b, rapid.SampledFrom([]string{"\xff", `\ud800`, `\udc00`, "\x01", `\u12`, "\xed\xa0\x80"}).Draw(t, "bad")...)
	}
	*b = append(*b, '"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + r>>10, 0xdc00 + r&0x3ff
}

func benchMessage(size int) *Message {
	words := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", size/56+1)
	return &Message{
		From: "did:web:alice.example.com", To: []string{"did:web:bob.example.com"}, Kind: KindChat,
		Thread: &Thread{Topic: "standup"}, CreatedAtMS: 1767225600000, Nonce: "6f1c2a9e4b7d",
		Content: Content{Format: "text/markdown", Content: words[:size] + "\n"},
	}
}

// go test -run '^$' -bench BenchmarkCanonical -benchmem ./message/
func BenchmarkCanonical(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"100B", 100}, {"1KiB", 1024}} {
		m := benchMessage(size.n)
		b.Run("new/"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Canonical(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("reference/"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := referenceCanonical(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The word-at-a-time scan must stop for every non-plain byte at every
// offset within the word.
func TestPlainWord(t *testing.T) {
	t.Parallel()
	for _, fill := range []byte{' ', 'a', '~', 0x7f, '!', '#', '[', ']'} {
		for pos := 0; pos < 8; pos++ {
			for c := 0; c < 256; c++ {
				w := []byte(strings.Repeat(string(fill), 8))
				w[pos] = byte(c)
				if got := plainWord(string(w)); got != plain[c] {
					t.Fatalf("plainWord(%q) = %v, want %v", w, got, plain[c])
				}
			}
		}
	}
}

// Every escape and repair at every offset around the word boundaries.
func TestCanonicalStringOffsets(t *testing.T) {
	t.Parallel()
	specials := []string{"\x00", "\x1f", "\n", "\"", "\\", "\x7f", "<", "é", "\u2028", "😀", "\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80", "\xff"}
	for _, sp := range specials {
		for pre := 0; pre < 18; pre++ {
			for _, post := range []int{0, 1, 7, 8, 9} {
				s := strings.Repeat("p", pre) + sp + strings.Repeat("q", post)
				sameAsReference(t, &Message{From: s, Content: Content{Content: s + sp + s}})
			}
		}
	}
}
