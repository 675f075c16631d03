package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/model"
)

// appender is what the API's responses and stream frames use.
type appender interface {
	AppendJSON([]byte) ([]byte, error)
}

// reference is what encoding/json writes, as every response does it:
// HTML escaping off, without the trailing newline.
func reference(t *rapid.T, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// text covers what HTML escaping and string escaping care about, and
// invalid UTF-8.
func text() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.SampledFrom([]string{"", "a", "<b>&</b>", "\u2028\u2029", "\x00\x1f\"\\", "\xff\xfe", "é😀"}),
		rapid.String(),
		rapid.StringOf(rapid.RuneFrom([]rune{0x2028, 0x2029, 0xfffd, 0x1f600, 0x7f, 0})),
	)
}

func ints() *rapid.Generator[int64] {
	return rapid.OneOf(rapid.SampledFrom([]int64{0, -1, 1 << 53, -1 << 63, 1<<63 - 1}), rapid.Int64())
}

func record() *rapid.Generator[model.Record] {
	return rapid.Custom(func(t *rapid.T) model.Record {
		r := model.Record{
			RecordID: text().Draw(t, "id"), Owner: text().Draw(t, "owner"),
			BoxKind: model.BoxKind(text().Draw(t, "box")), MsgID: text().Draw(t, "msg_id"),
			State: model.State(text().Draw(t, "state")), Seq: ints().Draw(t, "seq"),
			CreatedAtMS: ints().Draw(t, "created"), UpdatedAtMS: ints().Draw(t, "updated"),
			ThreadKey: text().Draw(t, "thread"), SortKey: ints().Draw(t, "sort"),
			Delivery: model.Delivery{Attempts: rapid.Int().Draw(t, "attempts"), NextRetryAtMS: ints().Draw(t, "retry"),
				ExternalMsgID: text().Draw(t, "ext"), LastError: text().Draw(t, "last_error")},
		}
		if rapid.Bool().Draw(t, "has_tags") {
			r.Tags = rapid.SliceOf(text()).Draw(t, "tags")
		}
		if rapid.Bool().Draw(t, "has_route") {
			r.Route = &model.Route{TunnelDID: text().Draw(t, "tunnel"), Address: text().Draw(t, "address"),
				Priority: rapid.Int().Draw(t, "priority"),
				ExtIDs:   rapid.MapOf(text(), text()).Draw(t, "ext_ids")}
		}
		if rapid.Bool().Draw(t, "has_lease") {
			r.Lease = &model.Lease{ID: text().Draw(t, "lease"), Holder: text().Draw(t, "holder"), ExpiresAtMS: ints().Draw(t, "until")}
		}
		return r
	})
}

// body is a stored body: compact JSON, as canonicalization leaves it
// (a string member keeps any text literally, U+2028 included).
func body() *rapid.Generator[json.RawMessage] {
	return rapid.Custom(func(t *rapid.T) json.RawMessage {
		if rapid.Bool().Draw(t, "no_body") {
			return nil
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]any{"content": map[string]string{"content": text().Draw(t, "content")},
			"created_at_ms": ints().Draw(t, "at"), "to": rapid.SliceOf(text()).Draw(t, "to")}); err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	})
}

func recordWithMsg() *rapid.Generator[RecordWithMsg] {
	return rapid.Custom(func(t *rapid.T) RecordWithMsg {
		return RecordWithMsg{Record: record().Draw(t, "record"), Msg: body().Draw(t, "msg")}
	})
}

func items(t *rapid.T) []RecordWithMsg {
	if rapid.Bool().Draw(t, "nil_items") {
		return nil
	}
	return rapid.SliceOfN(recordWithMsg(), 0, 5).Draw(t, "items")
}

func TestAppendJSONIsEncodingJSON(t *testing.T) {
	cases := map[string]func(t *rapid.T) appender{
		"RecordWithMsg": func(t *rapid.T) appender { v := recordWithMsg().Draw(t, "v"); return &v },
		"StateResult": func(t *rapid.T) appender {
			v := &StateResult{RecordWithMsg: recordWithMsg().Draw(t, "v")}
			if rapid.Bool().Draw(t, "with_next") {
				next := recordWithMsg().Draw(t, "next")
				v.Next = &next
			}
			if rapid.Bool().Draw(t, "with_next_error") {
				v.NextError = &ErrorDetail{Code: text().Draw(t, "code"), Message: text().Draw(t, "message"), Field: text().Draw(t, "field")}
			}
			return v
		},
		"StreamFrame": func(t *rapid.T) appender {
			return &StreamFrame{Seq: ints().Draw(t, "seq"), Record: record().Draw(t, "record"), Msg: body().Draw(t, "msg")}
		},
		"SyncResult": func(t *rapid.T) appender {
			return &SyncResult{Items: items(t), LastSeq: ints().Draw(t, "last")}
		},
		"ListResult": func(t *rapid.T) appender {
			return &ListResult{Items: items(t), NextCursorSortKey: ints().Draw(t, "key"),
				NextCursorRecordID: text().Draw(t, "cursor")}
		},
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				v := gen(t)
				prefix := []byte("kept:")
				got, err := v.AppendJSON(append([]byte(nil), prefix...))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(got, prefix) {
					t.Fatalf("AppendJSON lost what b held: %q", got)
				}
				if want := reference(t, v); !bytes.Equal(got[len(prefix):], want) {
					t.Fatalf("AppendJSON differs from encoding/json\n got %s\nwant %s", got[len(prefix):], want)
				}
			})
		})
	}
}

func BenchmarkRecordWithMsgJSON(b *testing.B) {
	content := string(bytes.Repeat([]byte("x"), 1024))
	msg, _ := json.Marshal(map[string]any{"content": map[string]string{"content": content}, "from": "did:a", "to": []string{"did:b"}})
	v := &RecordWithMsg{Record: model.Record{RecordID: "r1", Owner: "did:b", BoxKind: model.Inbox, MsgID: "cymsg:1",
		State: model.Reading, Seq: 42, Lease: &model.Lease{ID: "l", ExpiresAtMS: 1}}, Msg: msg}
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			var err error
			if buf, err = v.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
