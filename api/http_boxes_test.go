package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestHTTPNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "one"))
	second := e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "two"))
	next := boxPath(didAlice, model.Inbox, "next")

	t.Run("peek does not take", func(t *testing.T) {
		for range 2 {
			got := ok[wire.RecordWithMsg](t, e.do(t, "POST", next, e.alice, wire.NextRequest{LockOnTake: ptr(false)}))
			if got.Record.MsgID != first.MsgID || got.Record.State != model.Unread || got.Record.Lease != nil || contentOf(t, got.Msg) != "one" {
				t.Fatalf("peek %+v", got)
			}
		}
		if rec := e.record(t, model.RecordID(didAlice, model.Inbox, first.MsgID, "")); rec.State != model.Unread {
			t.Fatalf("peek changed the record: %+v", rec)
		}
	})

	var held wire.RecordWithMsg
	t.Run("claim takes the oldest with a lease", func(t *testing.T) {
		now := e.clock.NowMS()
		held = ok[wire.RecordWithMsg](t, e.do(t, "POST", next, e.alice, nil))
		r := held.Record
		if r.MsgID != first.MsgID || r.State != model.Reading || r.Owner != didAlice || r.BoxKind != model.Inbox || contentOf(t, held.Msg) != "one" {
			t.Fatalf("claim %+v", held)
		}
		if r.Lease == nil || r.Lease.ID == "" || r.Lease.Holder != didAlice ||
			r.Lease.ExpiresAtMS < now+295_000 || r.Lease.ExpiresAtMS > now+305_000 {
			t.Fatalf("lease %+v, want ~300 s from %d", r.Lease, now)
		}
		if got := e.record(t, r.RecordID); got.State != model.Reading || got.Lease == nil || got.Lease.ID != r.Lease.ID {
			t.Fatalf("stored %+v", got)
		}
	})

	t.Run("peek held records with a state filter", func(t *testing.T) {
		got := ok[wire.RecordWithMsg](t, e.do(t, "POST", next, e.alice,
			wire.NextRequest{LockOnTake: ptr(false), StateFilter: []model.State{model.Reading}, WithObject: ptr(false)}))
		if got.Record.RecordID != held.Record.RecordID || got.Msg != nil {
			t.Fatalf("peek READING %+v", got)
		}
	})

	t.Run("lease, holder and box case", func(t *testing.T) {
		now := e.clock.NowMS()
		got := ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(didAlice, "inbox", "next"), e.alice,
			wire.NextRequest{LeaseMS: 60_000, Holder: "worker-7", WithObject: ptr(false)}))
		r := got.Record
		if r.MsgID != second.MsgID || r.Lease == nil || r.Lease.Holder != "worker-7" || got.Msg != nil ||
			r.Lease.ExpiresAtMS < now+55_000 || r.Lease.ExpiresAtMS > now+65_000 {
			t.Fatalf("claim %+v lease %+v", r, r.Lease)
		}
	})

	t.Run("empty box is 204", func(t *testing.T) {
		for _, body := range []any{nil, wire.NextRequest{}, wire.NextRequest{LockOnTake: ptr(false)}} {
			r := e.do(t, "POST", next, e.alice, body)
			if r.status != http.StatusNoContent || len(r.body) != 0 {
				t.Fatalf("want 204 without body, got %s", r)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name string, body any, field string) badCase {
			return badCase{name: name, method: "POST", path: next, token: e.alice, body: body, status: 400, code: wire.CodeInvalid, field: field}
		}
		e.dispatch(t, chat("did:tg:u1", []string{didAlice}, "three")) // something to take
		e.runBad(t, []badCase{
			c("malformed JSON", `{"wait_ms":`, ""),
			c("unknown field", `{"lock":true}`, "lock"),
			c("wait_ms wrong type", `{"wait_ms":"soon"}`, "wait_ms"),
			c("lease_ms wrong type", `{"lease_ms":1.5}`, "lease_ms"),
			c("lock_on_take wrong type", `{"lock_on_take":"no"}`, "lock_on_take"),
			c("state_filter wrong type", `{"state_filter":"UNREAD"}`, "state_filter"),
			c("negative wait_ms", `{"wait_ms":-1}`, "wait_ms"),
			c("wait_ms over the maximum", `{"wait_ms":300001}`, "wait_ms"),
			c("negative lease_ms", `{"lease_ms":-5}`, "lease_ms"),
			c("lease_ms over the maximum", `{"lease_ms":43200001}`, "lease_ms"),
			c("lease_ms that would overflow", `{"lease_ms":9999999999999}`, "lease_ms"),
			c("wait_ms that would overflow", `{"wait_ms":9999999999999}`, "wait_ms"),
			c("holder too long", `{"holder":"`+strings.Repeat("w", 513)+`"}`, "holder"),
			c("holder with a control character", `{"holder":"worker\u0001"}`, "holder"),
			c("unknown state", `{"state_filter":["NOPE"],"lock_on_take":false}`, "state_filter"),
			c("claim of another state", `{"state_filter":["READED"]}`, "state_filter"),
			c("peek of a state no inbox record has", `{"state_filter":["WAIT"],"lock_on_take":false}`, "state_filter"),
			{name: "unknown box", method: "POST", path: boxPath(didAlice, "MAILBOX", "next"), token: e.alice, status: 400, code: wire.CodeInvalid, field: "box"},
			{name: "owner with space", method: "POST", path: boxPath("did:a b", model.Inbox, "next"), token: e.admin, status: 400, code: wire.CodeInvalid, field: "owner"},
			{name: "claim bob's inbox", method: "POST", path: boxPath(didBob, model.Inbox, "next"), token: e.alice, status: 403, code: wire.CodeForbidden},
			{name: "peek bob's inbox", method: "POST", path: boxPath(didBob, model.Inbox, "next"), token: e.alice,
				body: wire.NextRequest{LockOnTake: ptr(false)}, status: 403, code: wire.CodeForbidden},
		})
	})
}

func TestHTTPNextLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	next := boxPath(didCarol, model.Inbox, "next")

	t.Run("returns when another request dispatches", func(t *testing.T) {
		type result struct {
			r   resp
			err error
			d   time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			r, err := e.try("POST", next, e.carol, wire.NextRequest{WaitMS: 20_000})
			done <- result{r, err, time.Since(start)}
		}()
		time.Sleep(200 * time.Millisecond)
		select {
		case res := <-done:
			t.Fatalf("long poll returned before anything was sent: %v %v", res.r, res.err)
		default:
		}
		sent := e.dispatch(t, chat("did:tg:u1", []string{didCarol}, "wake up"))
		var res result
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("long poll did not return after a dispatch")
		}
		if res.err != nil {
			t.Fatal(res.err)
		}
		got := ok[wire.RecordWithMsg](t, res.r)
		if got.Record.MsgID != sent.MsgID || got.Record.State != model.Reading || res.d > 10*time.Second {
			t.Fatalf("long poll got %+v after %v", got.Record, res.d)
		}
	})

	t.Run("server close ends a long poll with 204", func(t *testing.T) {
		e2 := newEnv(t)
		done := make(chan resp, 1)
		go func() {
			r, err := e2.try("POST", next, e2.carol, wire.NextRequest{WaitMS: 60_000})
			if err != nil {
				r = resp{status: -1, body: []byte(err.Error())}
			}
			done <- r
		}()
		time.Sleep(200 * time.Millisecond)
		e2.api.Close()
		select {
		case r := <-done:
			if r.status != http.StatusNoContent {
				t.Fatalf("long poll at close: %s", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end the long poll")
		}
	})

	t.Run("wakes when a retry comes due", func(t *testing.T) {
		e.setRoutes(t, didExt, extRoute)
		id := e.tunnelRecord(t, "retry soon")
		e.claim(t, e.tunnel, didTunnel, model.TunnelOutbox)
		failed := e.deliver(t, e.tunnel, id, wire.DeliveryResult{Retryable: true, ErrorCode: "timeout"})
		start := time.Now()
		got := ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(didTunnel, model.TunnelOutbox, "next"), e.tunnel, wire.NextRequest{WaitMS: 20_000}))
		if got.Record.RecordID != id || e.clock.NowMS() < failed.Delivery.NextRetryAtMS || time.Since(start) > 10*time.Second {
			t.Fatalf("claimed %+v at %d, retry due at %d", got.Record, e.clock.NowMS(), failed.Delivery.NextRetryAtMS)
		}
	})

	t.Run("times out with 204", func(t *testing.T) {
		start := time.Now()
		r := e.do(t, "POST", next, e.carol, wire.NextRequest{WaitMS: 300})
		if d := time.Since(start); r.status != http.StatusNoContent || d < 250*time.Millisecond {
			t.Fatalf("got %s after %v, want 204 after ~300ms", r, d)
		}
	})
}

// pageKey is a record's place in list order.
type pageKey struct {
	sortKey int64
	id      string
}

func (a pageKey) less(b pageKey) bool {
	return a.sortKey < b.sortKey || a.sortKey == b.sortKey && a.id < b.id
}

func TestHTTPListRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := map[string]bool{}
	for i, at := range []int64{5000, 2000, 2000, 1000, 2000, 4000, 3000} {
		m := chat("did:tg:u1", []string{didAlice}, fmt.Sprint("m", i))
		m.CreatedAtMS = at
		want[model.RecordID(didAlice, model.Inbox, e.dispatch(t, m).MsgID, "")] = true
	}
	list := boxPath(didAlice, model.Inbox, "records")

	for _, order := range []string{"asc", "desc", ""} {
		t.Run("paging order "+order, func(t *testing.T) {
			seen := map[string]bool{}
			var prev *pageKey
			q := "?limit=3&order=" + order
			for page := 0; ; page++ {
				if page > 5 {
					t.Fatal("paging does not end")
				}
				res := ok[wire.ListResult](t, e.do(t, "GET", list+q, e.alice, nil))
				for _, it := range res.Items {
					k := pageKey{it.Record.SortKey, it.Record.RecordID}
					if seen[k.id] || !want[k.id] {
						t.Fatalf("record %s seen twice or unexpected", k.id)
					}
					seen[k.id] = true
					if prev != nil && (order == "asc" && !prev.less(k) || order != "asc" && !k.less(*prev)) {
						t.Fatalf("order %q: %+v after %+v", order, k, *prev)
					}
					prev = &k
					if it.Msg == nil {
						t.Fatal("message body missing by default")
					}
				}
				if len(res.Items) < 3 {
					if res.NextCursorRecordID != "" {
						t.Fatalf("short page with a cursor: %+v", res)
					}
					break
				}
				last := res.Items[len(res.Items)-1].Record
				if res.NextCursorSortKey != last.SortKey || res.NextCursorRecordID != last.RecordID {
					t.Fatalf("cursor %d/%s, want the last item %d/%s", res.NextCursorSortKey, res.NextCursorRecordID, last.SortKey, last.RecordID)
				}
				q = fmt.Sprintf("?limit=3&order=%s&cursor_sort_key=%d&cursor_record_id=%s", order, res.NextCursorSortKey, res.NextCursorRecordID)
			}
			if len(seen) != len(want) {
				t.Fatalf("paging saw %d of %d records", len(seen), len(want))
			}
		})
	}

	t.Run("state filter and with_object", func(t *testing.T) {
		held := e.claim(t, e.alice, didAlice, model.Inbox)
		for q, n := range map[string]int{"state=READING": 1, "state=unread": 6, "state=UNREAD,reading": 7, "": 7, "state=READED": 0} {
			res := ok[wire.ListResult](t, e.do(t, "GET", list+"?with_object=false&"+q, e.alice, nil))
			if len(res.Items) != n {
				t.Fatalf("%s: %d items, want %d", q, len(res.Items), n)
			}
			for _, it := range res.Items {
				if it.Msg != nil {
					t.Fatalf("with_object=false returned a body")
				}
				if q == "state=READING" && it.Record.RecordID != held.Record.RecordID {
					t.Fatalf("READING item %+v", it.Record)
				}
			}
		}
	})

	t.Run("limit bounds", func(t *testing.T) {
		for _, l := range []string{"0", "1", "1000"} {
			res := ok[wire.ListResult](t, e.do(t, "GET", list+"?limit="+l, e.alice, nil))
			if wantN := map[string]int{"0": 7, "1": 1, "1000": 7}[l]; len(res.Items) != wantN {
				t.Fatalf("limit=%s gave %d items, want %d", l, len(res.Items), wantN)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name, q, field string) badCase {
			return badCase{name: name, method: "GET", path: list + q, token: e.alice, status: 400, code: wire.CodeInvalid, field: field}
		}
		e.runBad(t, []badCase{
			c("limit too big", "?limit=1001", "limit"),
			c("negative limit", "?limit=-1", "limit"),
			c("limit not a number", "?limit=ten", "limit"),
			c("bad order", "?order=sideways", "order"),
			c("unknown state", "?state=UNREAD,NOPE", "state"),
			c("a state no inbox record has", "?state=UNREAD,SENDING", "state"),
			c("state given twice", "?state=UNREAD&state=READED", "state"),
			c("cursor_sort_key not a number", "?cursor_sort_key=x&cursor_record_id=y", "cursor_sort_key"),
			c("cursor_sort_key alone", "?cursor_sort_key=-5", "cursor_record_id"),
			c("with_object not a bool", "?with_object=maybe", "with_object"),
			{name: "unknown box", method: "GET", path: boxPath(didAlice, "NOPE", "records"), token: e.alice, status: 400, code: wire.CodeInvalid, field: "box"},
			{name: "bob reads alice's", method: "GET", path: boxPath(didAlice, model.Inbox, "records"), token: e.bob, status: 403, code: wire.CodeForbidden},
			{name: "alice reads bob's", method: "GET", path: boxPath(didBob, model.Inbox, "records"), token: e.alice, status: 403, code: wire.CodeForbidden},
		})
	})
}

func TestHTTPSync(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		from := "did:tg:u1"
		if i%2 == 1 {
			from = "did:tg:u2"
		}
		e.dispatch(t, chat(from, []string{didBob}, fmt.Sprint("s", i)))
	}
	sync := boxPath(didBob, model.Inbox, "sync")

	readAll := func(t *testing.T, after int64, limit int) ([]int64, int64) {
		var seqs []int64
		for range 10 {
			res := ok[wire.SyncResult](t, e.do(t, "GET", fmt.Sprintf("%s?after_seq=%d&limit=%d", sync, after, limit), e.bob, nil))
			if len(res.Items) == 0 {
				if res.LastSeq != after {
					t.Fatalf("empty page moved the cursor from %d to %d", after, res.LastSeq)
				}
				return seqs, after
			}
			for _, it := range res.Items {
				seqs = append(seqs, it.Record.Seq)
				if it.Msg == nil || it.Record.Owner != didBob {
					t.Fatalf("item %+v", it)
				}
			}
			if res.LastSeq != res.Items[len(res.Items)-1].Record.Seq {
				t.Fatalf("last_seq %d is not the last item's seq", res.LastSeq)
			}
			after = res.LastSeq
		}
		t.Fatal("sync does not end")
		return nil, 0
	}
	noGaps := func(t *testing.T, seqs []int64, from, to int64) {
		if int64(len(seqs)) != to-from+1 {
			t.Fatalf("seqs %v, want %d..%d", seqs, from, to)
		}
		for i, s := range seqs {
			if s != from+int64(i) {
				t.Fatalf("seqs %v, want %d..%d without gaps", seqs, from, to)
			}
		}
	}

	t.Run("pages cover the log without gaps", func(t *testing.T) {
		seqs, last := readAll(t, 0, 2)
		noGaps(t, seqs, 1, 5)
		e.dispatch(t, chat("did:tg:u3", []string{didBob}, "later"))
		e.dispatch(t, chat("did:tg:u3", []string{didBob}, "later 2"))
		more, _ := readAll(t, last, 1)
		noGaps(t, more, 6, 7)
	})

	t.Run("a cursor at the end, and an empty box", func(t *testing.T) {
		if res := ok[wire.SyncResult](t, e.do(t, "GET", sync+"?after_seq=7", e.bob, nil)); len(res.Items) != 0 || res.LastSeq != 7 {
			t.Fatalf("sync at the end: %+v", res)
		}
		// past the thread's last record but not the box's: the filter
		// passed over the rest
		if res := ok[wire.SyncResult](t, e.do(t, "GET", sync+"?after_seq=6&thread_key=dm:did:tg:u2", e.bob, nil)); len(res.Items) != 0 {
			t.Fatalf("thread sync past its records: %+v", res)
		}
		empty := boxPath("did:tg:nobody", model.Inbox, "sync")
		if res := ok[wire.SyncResult](t, e.do(t, "GET", empty, e.admin, nil)); len(res.Items) != 0 || res.LastSeq != 0 {
			t.Fatalf("sync of an empty box: %+v", res)
		}
	})

	t.Run("thread_key and with_object", func(t *testing.T) {
		res := ok[wire.SyncResult](t, e.do(t, "GET", sync+"?thread_key=dm:did:tg:u2&with_object=false", e.bob, nil))
		if len(res.Items) != 2 || res.Items[0].Record.Seq != 2 || res.Items[1].Record.Seq != 4 || res.Items[0].Msg != nil || res.LastSeq != 4 {
			t.Fatalf("thread sync %+v", res)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		c := func(name, q, field string) badCase {
			return badCase{name: name, method: "GET", path: sync + q, token: e.bob, status: 400, code: wire.CodeInvalid, field: field}
		}
		e.runBad(t, []badCase{
			c("negative after_seq", "?after_seq=-1", "after_seq"),
			c("after_seq not a number", "?after_seq=abc", "after_seq"),
			// a cursor of another box or store: it would wait for ever
			c("after_seq beyond the last seq", "?after_seq=8", "after_seq"),
			c("after_seq the largest", "?after_seq=9223372036854775807", "after_seq"),
			c("after_seq beyond, with a thread", "?after_seq=8&thread_key=dm:did:tg:u2", "after_seq"),
			c("limit too big", "?limit=1001", "limit"),
			c("negative limit", "?limit=-3", "limit"),
			c("with_object not a bool", "?with_object=2x", "with_object"),
			{name: "unknown box", method: "GET", path: boxPath(didBob, "SPAM", "sync"), token: e.bob, status: 400, code: wire.CodeInvalid, field: "box"},
			{name: "alice syncs bob's", method: "GET", path: sync, token: e.alice, status: 403, code: wire.CodeForbidden},
		})
	})
}

func TestHTTPRedriveBox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setRoutes(t, didExt, extRoute)
	dead := []string{e.deadRecord(t, "d1"), e.deadRecord(t, "d2")}
	e.tunnelRecord(t, "still waiting")
	redrive := boxPath(didTunnel, model.TunnelOutbox, "redrive")

	t.Run("bad input", func(t *testing.T) {
		c := func(name string, body any, field string) badCase {
			return badCase{name: name, method: "POST", path: redrive, token: e.tunnel, body: body, status: 400, code: wire.CodeInvalid, field: field}
		}
		e.runBad(t, []badCase{
			c("malformed JSON", `{"limit":`, ""),
			c("unknown field", `{"max":1}`, "max"),
			c("limit wrong type", `{"limit":"all"}`, "limit"),
			c("negative limit", `{"limit":-1}`, "limit"),
			c("limit too big", `{"limit":1001}`, "limit"),
			{name: "unknown box", method: "POST", path: boxPath(didTunnel, "DLQ", "redrive"), token: e.tunnel, status: 400, code: wire.CodeInvalid, field: "box"},
			{name: "alice redrives the tunnel's box", method: "POST", path: redrive, token: e.alice, status: 403, code: wire.CodeForbidden},
		})
	})

	t.Run("limit", func(t *testing.T) {
		res := ok[wire.RedriveResult](t, e.do(t, "POST", redrive, e.tunnel, wire.RedriveRequest{Limit: 1}))
		if res.Redriven != 1 || len(res.RecordIDs) != 1 || res.RecordIDs[0] != dead[0] {
			t.Fatalf("redrive limit 1: %+v, want the oldest %s", res, dead[0])
		}
	})

	t.Run("all dead records", func(t *testing.T) {
		res := ok[wire.RedriveResult](t, e.do(t, "POST", redrive, e.tunnel, nil))
		if res.Redriven != 1 || len(res.RecordIDs) != 1 || res.RecordIDs[0] != dead[1] {
			t.Fatalf("redrive %+v, want %s", res, dead[1])
		}
		for _, id := range dead {
			if rec := e.record(t, id); rec.State != model.Wait || rec.Delivery.Attempts != 0 {
				t.Fatalf("redriven record %+v", rec)
			}
		}
		res = ok[wire.RedriveResult](t, e.do(t, "POST", boxPath(didTunnel, "tunnel_outbox", "redrive"), e.admin, wire.RedriveRequest{}))
		if res.Redriven != 0 || res.RecordIDs == nil || len(res.RecordIDs) != 0 {
			t.Fatalf("nothing left to redrive: %+v", res)
		}
	})
}
