package message

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/msgcenter/msgcenter/model"
)

// RFC 8785 vectors: the canonical form is pinned as a literal, so a change
// of library or of struct layout that changes ids fails here.
func TestCanonicalVectors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"key order and whitespace",
			`{ "to": ["did:b"], "from": "did:a",  "content": {"content": "hi"} }`,
			`{"content":{"content":"hi"},"from":"did:a","to":["did:b"]}`},
		{"numbers in meta (RFC 8785 §3.2.2.3)",
			`{"from":"did:a","to":["did:b"],"content":{},"meta":{"n":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001,-0]}}`,
			`{"content":{},"from":"did:a","meta":{"n":[333333333.3333333,1e+30,4.5,0.002,1e-27,0]},"to":["did:b"]}`},
		{"unicode escapes (RFC 8785 §3.2.2.2)",
			`{"from":"did:a","to":["did:b"],"content":{"content":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/"}}`,
			`{"content":{"content":"€$\u000f\nA'B\"\\\\\"/"},"from":"did:a","to":["did:b"]}`},
		{"meta keys sorted by UTF-16 code units (RFC 8785 §3.2.3)",
			`{"from":"did:a","to":["did:b"],"content":{},"meta":{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}}`,
			"{\"content\":{},\"from\":\"did:a\",\"meta\":{\"\\r\":2,\"1\":4,\"\u0080\":6,\"ö\":7,\"€\":1,\"😀\":5,\"דּ\":3},\"to\":[\"did:b\"]}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("canonical\n got %s\nwant %s", got, tc.want)
			}
			sum := sha256.Sum256([]byte(tc.want))
			if id, _ := m.ID(); id != "cymsg:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("id %s is not the SHA-256 of the canonical form", id)
			}
		})
	}
}

func TestSameContentSameID(t *testing.T) {
	t.Parallel()
	a, _ := Decode([]byte(`{"from":"did:a","to":["did:b"],"content":{"content":"x"},"meta":{"k":1.0}}`))
	b, _ := Decode([]byte(`{"meta":{"k":1},"content":{"content":"x"},"to":["did:b"],"from":"did:a"}`))
	c, _ := Decode([]byte(`{"meta":{"k":2},"content":{"content":"x"},"to":["did:b"],"from":"did:a"}`))
	ida, _ := a.ID()
	idb, _ := b.ID()
	idc, _ := c.ID()
	if ida != idb {
		t.Fatalf("same content, different ids: %s %s", ida, idb)
	}
	if ida == idc {
		t.Fatal("different content, same id")
	}
	// Content left out or null is the empty content: one message, one id.
	var ids []string
	for _, in := range []string{`{"from":"did:a","to":["did:b"]}`, `{"from":"did:a","to":["did:b"],"content":null}`, `{"from":"did:a","to":["did:b"],"content":{}}`} {
		m, err := Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := m.ID()
		ids = append(ids, id)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("content left out, null and {}: ids %v, want one", ids)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	long := "did:" + strings.Repeat("x", 253)
	cases := []struct {
		name      string
		m         Message
		fromGroup bool
		max       int
		field     string
		kind      error
	}{
		{"ok", Message{From: "did:a", To: []string{"did:b"}}, false, 0, "", nil},
		{"from required", Message{To: []string{"did:b"}}, false, 0, "msg.from", model.ErrInvalid},
		{"to required", Message{From: "did:a"}, false, 0, "msg.to", model.ErrInvalid},
		{"to optional from a group", Message{From: "did:g", Source: "did:a"}, true, 0, "", nil},
		{"did too long", Message{From: long, To: []string{"did:b"}}, false, 0, "msg.from", model.ErrInvalid},
		{"did with space", Message{From: "did:a", To: []string{"did: b"}}, false, 0, "msg.to[0]", model.ErrInvalid},
		{"empty recipient", Message{From: "did:a", To: []string{"did:b", ""}}, false, 0, "msg.to[1]", model.ErrInvalid},
		{"unknown kind", Message{From: "did:a", To: []string{"did:b"}, Kind: "gossip"}, false, 0, "msg.kind", model.ErrInvalid},
		{"topic at the limit", Message{From: "did:a", To: []string{"did:b"}, Thread: &Thread{Topic: strings.Repeat("t", MaxTopicBytes)}}, false, 0, "", nil},
		{"topic too long", Message{From: "did:a", To: []string{"did:b"}, Thread: &Thread{Topic: strings.Repeat("t", MaxTopicBytes+1)}}, false, 0, "msg.thread.topic", model.ErrInvalid},
		{"topic with a newline", Message{From: "did:a", To: []string{"did:b"}, Thread: &Thread{Topic: "a\nb"}}, false, 0, "msg.thread.topic", model.ErrInvalid},
		{"expires before created", Message{From: "did:a", To: []string{"did:b"}, CreatedAtMS: 10, ExpiresAtMS: 5}, false, 0, "msg.expires_at_ms", model.ErrInvalid},
		{"too large", Message{From: "did:a", To: []string{"did:b"}, Content: Content{Content: strings.Repeat("x", 2000)}}, false, 1024, "msg", model.ErrTooLarge},
		{"1 MiB default", Message{From: "did:a", To: []string{"did:b"}, Content: Content{Content: strings.Repeat("x", 1<<20)}}, false, 0, "msg", model.ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.m.Validate(tc.max, tc.fromGroup)
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var me *model.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &me) || me.Field != tc.field {
				t.Fatalf("err = %v, want %v on field %q", err, tc.kind, tc.field)
			}
		})
	}
	if len(long) != 257 {
		t.Fatalf("test DID is %d bytes", len(long))
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{"from":"a","tto":["b"]}`, `{"from":1}`, `{"from":"a"} {}`, `{"from":"a"}}`, `{"from":"a"} ]`, `[`, ``} {
		if _, err := Decode([]byte(in)); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("Decode(%q) = %v, want invalid", in, err)
		}
	}
}

// FuzzDecode: any input either fails to decode with ErrInvalid or yields a
// message whose canonical form decodes back to the same id (canonical JSON
// is a fixed point), and never panics.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"from":"did:a","to":["did:b"],"content":{"content":"hi"}}`))
	f.Add([]byte(`{"from":"did:a","to":["did:b"],"content":{"machine":{"x":[1,2.5e3,"y"]}},"meta":{"z":null}}`))
	f.Add([]byte(`{"from":"did:g","source":"did:a","thread":{"topic":"t"},"content":{"refs":[{"a":1}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("decode error of the wrong kind: %v", err)
			}
			return
		}
		c, err := m.Canonical()
		if err != nil {
			return // e.g. numbers JCS cannot represent
		}
		again, err := Decode(c)
		if err != nil {
			t.Fatalf("canonical form does not decode: %v\n%s", err, c)
		}
		c2, err := again.Canonical()
		if err != nil || string(c2) != string(c) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", c, c2)
		}
		if _, err := jcs.Transform(c); err != nil {
			t.Fatalf("canonical output is not valid JSON for JCS: %v", err)
		}
		_, _ = m.Validate(0, false)
	})
}

// A DID that would show as another one is refused: invisible and
// reordering characters, besides spaces and controls.
func TestCheckDIDRefusesLookAlikes(t *testing.T) {
	t.Parallel()
	for _, did := range []string{"did:alice\u200b", "did:\u202ealice", "did:al\u2060ice", "did:alice\ufeff", "did:a lice", "did:alice\n"} {
		if err := CheckDID("did", did, true); err == nil {
			t.Errorf("CheckDID(%q) accepted it", did)
		}
	}
	for _, did := range []string{"did:alice", "did:web:example.com/alice", "did:tg:用户:42", "did:émile"} {
		if err := CheckDID("did", did, true); err != nil {
			t.Errorf("CheckDID(%q): %v", did, err)
		}
	}
}
