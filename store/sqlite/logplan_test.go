package sqlite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"testing"

	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// marshalPlan is the payload encodePlan replaces: what decodes from it is
// what the log must give back.
func marshalPlan(t fataler, p *store.Plan) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{logApply}, b...)
}

func decodePlan(t fataler, payload []byte) *store.Plan {
	w, err := decodeWrite(1, payload)
	if err != nil {
		t.Fatal(fmt.Sprintf("decode %q: %v", payload, err))
	}
	if w.apply == nil {
		t.Fatal(fmt.Sprintf("decoded %q to no plan", payload))
	}
	return w.apply
}

// A plan's payload decodes to what json.Marshal's would, whatever the plan
// holds: records with every optional part, none (nil or empty), strings
// that JSON escapes, and strings that are not UTF-8 (which both encoders
// replace the same way).
func TestEncodePlanDecodesAsMarshal(t *testing.T) {
	t.Parallel()
	str := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"", "<a&b>", "\u2028\"\\", "\xff\xfe", "did:x:1"}))
	record := rapid.Custom(func(rt *rapid.T) model.Record {
		r := model.Record{RecordID: str.Draw(rt, "id"), Owner: str.Draw(rt, "owner"),
			BoxKind: model.BoxKind(str.Draw(rt, "box")), MsgID: str.Draw(rt, "msg"), State: model.State(str.Draw(rt, "state")),
			Seq: rapid.Int64().Draw(rt, "seq"), CreatedAtMS: rapid.Int64().Draw(rt, "created"),
			ThreadKey: str.Draw(rt, "thread"), SortKey: rapid.Int64().Draw(rt, "sort"),
			Tags: rapid.SliceOfN(str, -1, 3).Draw(rt, "tags")}
		r.Delivery = model.Delivery{Attempts: rapid.IntRange(0, 9).Draw(rt, "attempts"), LastError: str.Draw(rt, "err")}
		if rapid.Bool().Draw(rt, "route") {
			r.Route = &model.Route{TunnelDID: str.Draw(rt, "tunnel"), Priority: rapid.Int().Draw(rt, "prio"),
				ExtIDs: rapid.MapOfN(str, str, -1, 3).Draw(rt, "ext")}
		}
		if rapid.Bool().Draw(rt, "lease") {
			r.Lease = &model.Lease{ID: str.Draw(rt, "lease_id"), ExpiresAtMS: rapid.Int64().Draw(rt, "until")}
		}
		return r
	})
	rapid.Check(t, func(rt *rapid.T) {
		p := &store.Plan{MsgID: str.Draw(rt, "msg_id"), MsgBody: []byte(str.Draw(rt, "body")),
			NowMS: rapid.Int64().Draw(rt, "now"), ConsumeSchedule: rapid.Int64().Draw(rt, "sched")}
		switch rapid.IntRange(0, 2).Draw(rt, "records") {
		case 0: // nil
		case 1:
			p.Records = []model.Record{}
		default:
			p.Records = rapid.SliceOfN(record, 1, 20).Draw(rt, "recs")
		}
		if rapid.Bool().Draw(rt, "idem") {
			p.Idem = &store.Idempotency{Scope: str.Draw(rt, "scope"), Key: str.Draw(rt, "key")}
		}
		b, err := encodePlan(p)
		if err != nil {
			rt.Fatal(err)
		}
		if !json.Valid(b[1:]) {
			rt.Fatalf("not JSON: %q", b)
		}
		// Decoding keeps the last of two keys alike, so a head that did not
		// hide the plan's records would decode the same, at twice the size.
		if n := bytes.Count(b, []byte(`"Records":`)); n != 1 {
			rt.Fatalf("the payload names Records %d times: %q", n, b)
		}
		got, want := decodePlan(rt, b), decodePlan(rt, marshalPlan(rt, p))
		if !reflect.DeepEqual(got, want) {
			rt.Fatalf("encodePlan decodes to\n%+v\njson.Marshal to\n%+v", got, want)
		}
	})
}

// fanOutPlan is a plan as a dispatch through a group of n members makes
// it: the group's own record, then the members'.
func fanOutPlan(n int) *store.Plan {
	const group = "did:load:18eb867971dc3a6d:group"
	p := &store.Plan{MsgID: msgID(1), MsgBody: make([]byte, 1024), NowMS: 1_700_000_000_000}
	record := func(owner string, box model.BoxKind, tags []string) model.Record {
		return model.Record{RecordID: model.RecordID(owner, box, p.MsgID, ""), Owner: owner, BoxKind: box,
			MsgID: p.MsgID, State: model.InitialState(box), CreatedAtMS: p.NowMS, UpdatedAtMS: p.NowMS,
			ThreadKey: "group:" + group, SortKey: p.NowMS, Tags: tags}
	}
	p.Records = append(p.Records, record(group, model.GroupInbox, nil))
	for i := range n {
		owner := fmt.Sprintf("did:load:18eb867971dc3a6d:g%d-members:m%d", n, i)
		p.Records = append(p.Records, record(owner, model.Inbox, []string{"group:" + group}))
	}
	return p
}

// The point of encodePlan: encoding a big plan leaves nothing behind but
// its payload. With json.Marshal, a fan-out to 10,000 left 10.5 MB for a
// payload of 4.2 MB: the pooled buffer outlives the next collection.
// Encoding allocates little more than the payload, too.
func TestEncodePlanLeavesOnlyItsPayload(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap; -short skips it")
	}
	p := fanOutPlan(10_000)
	// No collection but the ones below: what is alive at the first one
	// after the encoding is what the server's next heap target is set by.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	heapAfter := func(encode func() []byte) (payload, kept, allocated uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b := encode()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(b)
		runtime.KeepAlive(p) // or its death offsets what the encoding kept
		return uint64(len(b)), after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), after.TotalAlloc - before.TotalAlloc
	}
	payload, kept, allocated := heapAfter(func() []byte {
		b, err := encodePlan(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
	if kept > payload*5/4 {
		t.Errorf("encodePlan of %d bytes left %d bytes on the heap after a collection", payload, kept)
	}
	// Not under the race detector, whose sync.Pool drops what it is given
	// at random: json.Encoder then allocates a new state for many records.
	if allocated > payload*3/2 && !raceEnabled {
		t.Errorf("encodePlan of %d bytes allocated %d bytes: its buffer was not sized once", payload, allocated)
	}
	t.Logf("payload %d bytes, %d on the heap after a collection, %d allocated", payload, kept, allocated)
}

func BenchmarkEncodePlan(b *testing.B) {
	for _, n := range []int{1, 1000, 10_000} {
		p := fanOutPlan(n)
		b.Run(fmt.Sprintf("members=%d/encodePlan", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodePlan(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("members=%d/json.Marshal", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				marshalPlan(b, p)
			}
		})
	}
}
