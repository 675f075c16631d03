package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// base is the suite's "now". Time is always passed into the store, so the
// tests use fixed, realistic epoch milliseconds and never sleep.
const base int64 = 1_750_000_000_000

// DIDs used throughout the suite.
const (
	alice  = "did:test:alice"
	bob    = "did:test:bob"
	carol  = "did:test:carol"
	dave   = "did:test:dave"
	tunnel = "did:test:tunnel-tg"
	grp    = "did:test:group-1"
)

// msgID returns a message id shaped like the real ones (cymsg:<sha256 hex>).
// Being hashes, ids sort in no particular order relative to creation, which
// catches drivers that order by id where they should order by seq or time.
func msgID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "cymsg:" + hex.EncodeToString(sum[:])
}

// msgBody returns canonical JSON for a message. It contains characters a
// JSON encoder would escape or normalize (<, &, >, non-ASCII), so a driver
// that re-encodes the body instead of storing the bytes is caught.
func msgBody(name string) []byte {
	return []byte(`{"content":{"content":"body of ` + name + ` <&> café ☕","format":"text/plain"},"from":"did:test:sender","nonce":"` + name + `"}`)
}

// recOpt customizes a record built by newRec.
type recOpt func(*model.Record)

// newRec builds a record of msg in owner's box, in the box's initial state,
// created (and sorted) at nowMS. Options are applied in order.
func newRec(owner string, box model.BoxKind, msg string, nowMS int64, opts ...recOpt) model.Record {
	r := model.Record{
		RecordID:    model.RecordID(owner, box, msg, ""),
		Owner:       owner,
		BoxKind:     box,
		MsgID:       msg,
		State:       model.InitialState(box),
		CreatedAtMS: nowMS,
		UpdatedAtMS: nowMS,
		SortKey:     nowMS,
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// withVariant derives the record id with a variant (several records of one
// message in one box).
func withVariant(v string) recOpt {
	return func(r *model.Record) { r.RecordID = model.RecordID(r.Owner, r.BoxKind, r.MsgID, v) }
}

func withState(s model.State) recOpt       { return func(r *model.Record) { r.State = s } }
func withThread(k string) recOpt           { return func(r *model.Record) { r.ThreadKey = k } }
func withSortKey(k int64) recOpt           { return func(r *model.Record) { r.SortKey = k } }
func withTags(tags ...string) recOpt       { return func(r *model.Record) { r.Tags = tags } }
func withRoute(rt model.Route) recOpt      { return func(r *model.Record) { r.Route = &rt } }
func withRetryAt(ms int64) recOpt          { return func(r *model.Record) { r.Delivery.NextRetryAtMS = ms } }
func withDelivery(d model.Delivery) recOpt { return func(r *model.Record) { r.Delivery = d } }

// newPlan builds a plan for msg carrying recs.
func newPlan(msg string, nowMS int64, recs ...model.Record) *store.Plan {
	return &store.Plan{MsgID: msg, MsgBody: msgBody(msg), Records: recs, NowMS: nowMS}
}

func mustApply(t *testing.T, s store.Store, p *store.Plan) *store.ApplyResult {
	t.Helper()
	res, err := s.Apply(t.Context(), p)
	if err != nil {
		t.Fatalf("Apply(%s): %v", short(p.MsgID), err)
	}
	if res == nil {
		t.Fatalf("Apply(%s): nil result", short(p.MsgID))
	}
	return res
}

// seedBox creates n records in owner's box, one message each (named by
// prefix), applied one plan at a time at nowMS+i. opts, if not nil, gives
// extra options per index. It returns the created records in order.
func seedBox(t *testing.T, s store.Store, prefix, owner string, box model.BoxKind, n int, nowMS int64, opts func(i int) []recOpt) []model.Record {
	t.Helper()
	out := make([]model.Record, 0, n)
	for i := range n {
		m := msgID(fmt.Sprintf("%s/%s/%s/%d", prefix, owner, box, i))
		var o []recOpt
		if opts != nil {
			o = opts(i)
		}
		res := mustApply(t, s, newPlan(m, nowMS+int64(i), newRec(owner, box, m, nowMS+int64(i), o...)))
		if len(res.Created) != 1 {
			t.Fatalf("seedBox: Apply created %d records, want 1", len(res.Created))
		}
		out = append(out, res.Created[0])
	}
	return out
}

func mustGet(t *testing.T, s store.Store, id string) model.Record {
	t.Helper()
	r, err := s.GetRecord(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRecord(%s): %v", id, err)
	}
	return r
}

func requireNoRecord(t *testing.T, s store.Store, id string) {
	t.Helper()
	r, err := s.GetRecord(t.Context(), id)
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetRecord(%s) = %s, %v; want model.ErrNotFound", id, dump(r), err)
	}
}

func requireNoError(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

func requireErrIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v; want one wrapping %v", what, err, target)
	}
}

// normRecord makes semantically equal records deeply equal: empty and nil
// slices and maps are the same thing to a caller.
func normRecord(r model.Record) model.Record {
	if len(r.Tags) == 0 {
		r.Tags = nil
	}
	if r.Route != nil {
		c := *r.Route
		if len(c.ExtIDs) == 0 {
			c.ExtIDs = nil
		}
		r.Route = &c
	}
	if r.Lease != nil {
		c := *r.Lease
		r.Lease = &c
	}
	return r
}

func requireRecord(t *testing.T, got, want model.Record, what string) {
	t.Helper()
	if !reflect.DeepEqual(normRecord(got), normRecord(want)) {
		t.Fatalf("%s: record mismatch\n got: %s\nwant: %s", what, dump(got), dump(want))
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func short(id string) string {
	if len(id) > 18 {
		return id[:18] + "…"
	}
	return id
}

func recordIDs(recs []model.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.RecordID
	}
	return out
}

func seqs(recs []model.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// requireSameSet compares two string lists as sets (duplicates are errors).
func requireSameSet(t *testing.T, got, want []string, what string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %v, want %v (as sets)", what, g, w)
	}
}

func requireIDs(t *testing.T, got []model.Record, want []string, what string) {
	t.Helper()
	if g := recordIDs(got); !slices.Equal(g, want) {
		t.Fatalf("%s: got record ids (in order)\n %v\nwant\n %v", what, g, want)
	}
}

// allEvents reads the whole event log, paging with After.
func allEvents(t *testing.T, s store.Store, owner string) []model.Event {
	t.Helper()
	var out []model.Event
	var after int64
	for range 10_000 {
		page, err := s.ListEvents(t.Context(), store.EventFilter{After: after, Owner: owner, Limit: 500})
		requireNoError(t, err, "ListEvents")
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].EventID
	}
	t.Fatal("ListEvents: paging does not terminate")
	return nil
}

// eventsOf returns the events of the given type about recordID.
func eventsOf(evs []model.Event, typ, recordID string) []model.Event {
	var out []model.Event
	for _, e := range evs {
		if e.Type == typ && (recordID == "" || e.RecordID == recordID) {
			out = append(out, e)
		}
	}
	return out
}

// countRecordEvents counts events of typ per record id.
func countRecordEvents(evs []model.Event, typ string) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		if e.Type == typ {
			out[e.RecordID]++
		}
	}
	return out
}

// claimParams claims the next record of owner's box in its claimable state.
func claimParams(owner string, box model.BoxKind, nowMS int64, leaseID string) store.ClaimParams {
	return store.ClaimParams{
		Owner:        owner,
		Box:          box,
		From:         model.ClaimableState(box),
		To:           model.HeldState(box),
		NowMS:        nowMS,
		LeaseID:      leaseID,
		Holder:       "worker-" + leaseID,
		LeaseUntilMS: nowMS + 30_000,
	}
}

func mustClaim(t *testing.T, s store.Store, p store.ClaimParams) model.Record {
	t.Helper()
	requireClaimable(t, s, p, true)
	r, err := s.Claim(t.Context(), p)
	if err != nil {
		t.Fatalf("Claim(%s %s %s→%s at %d): %v", p.Owner, p.Box, p.From, p.To, p.NowMS, err)
	}
	return r
}

// requireClaimable checks that Claimable agrees with the claim that follows
// it: every claim test thereby tests Claimable too.
func requireClaimable(t *testing.T, s store.Store, p store.ClaimParams, want bool) {
	t.Helper()
	got, err := s.Claimable(t.Context(), p.Owner, p.Box, p.From, p.NowMS)
	if err != nil || got != want {
		t.Fatalf("Claimable(%s %s %s at %d) = %v, %v; want %v (what the claim does)", p.Owner, p.Box, p.From, p.NowMS, got, err, want)
	}
}

func requireNoClaim(t *testing.T, s store.Store, p store.ClaimParams) {
	t.Helper()
	requireClaimable(t, s, p, false)
	r, err := s.Claim(t.Context(), p)
	if !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("Claim(%s %s %s→%s at %d) = %s, %v; want model.ErrNotFound", p.Owner, p.Box, p.From, p.To, p.NowMS, dump(r), err)
	}
}

func mustUpdate(t *testing.T, s store.Store, u *store.Update) model.Record {
	t.Helper()
	r, err := s.Update(t.Context(), u)
	if err != nil {
		t.Fatalf("Update(%s %s→%s): %v", u.RecordID, u.From, u.To, err)
	}
	return r
}

// transition is a plain state change at nowMS that clears the lease.
func transition(id string, from, to model.State, nowMS int64) *store.Update {
	return &store.Update{RecordID: id, From: from, To: to, NowMS: nowMS, VisibleAtMS: nowMS, EventType: model.EventRecordState}
}
