package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/api"
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/sqlite"
	"github.com/msgcenter/msgcenter/wire"
)

// The identities every test server knows, with a token each.
const (
	didAlice  = "did:alice"
	didBob    = "did:bob"
	didCarol  = "did:carol"
	didTunnel = "did:tunnel:tg"
	didGroup  = "did:group:g1" // subscribers: alice, bob, carol
	didGroup2 = "did:group:g2" // subscribers: bob only
	didExt    = "did:ext:dave" // an external contact reached through the tunnel
)

// watchedDIDs are the DIDs whose contacts a snapshot looks at.
var watchedDIDs = []string{didAlice, didBob, didCarol, didTunnel, didGroup, didGroup2, didExt}

// testClock is the real clock plus an offset tests can advance, so retry
// backoff and lease times can be crossed without sleeping.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func (c *testClock) NowMS() int64 { return c.Now().UnixMilli() }

// env is one real listening server on a fresh SQLite store, with a token
// per identity.
type env struct {
	url    string
	api    *api.API
	svc    *core.Service
	clock  *testClock
	client *http.Client

	admin, alice, bob, carol, tunnel string // bearer tokens
}

// newEnv starts a server. Every top-level test gets its own.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, api.Options{})
}

// newEnvWith is newEnv with API options (metrics are always set).
func newEnvWith(t testing.TB, opts api.Options) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "msgcenter.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &testClock{}
	metrics := api.NewMetrics()
	svc := core.New(st, core.Config{Now: clk.Now, Metrics: metrics})
	metrics.WatchService(svc)
	opts.Metrics = metrics
	h := api.New(svc, opts)

	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = svc.Run(bg) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })

	e := &env{url: srv.URL, api: h, svc: svc, clock: clk, client: srv.Client()}
	for _, p := range []struct {
		tok *string
		id  model.Identity
	}{
		{&e.admin, model.Identity{DID: core.AdminDID, Role: model.RoleAdmin}},
		{&e.alice, model.Identity{DID: didAlice, Role: model.RoleAgent}},
		{&e.bob, model.Identity{DID: didBob, Role: model.RoleAgent}},
		{&e.carol, model.Identity{DID: didCarol, Role: model.RoleAgent}},
		{&e.tunnel, model.Identity{DID: didTunnel, Role: model.RoleTunnel}},
	} {
		*p.tok = core.NewToken()
		if err := svc.EnsureToken(ctx, *p.tok, p.id); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// resp is a response read in full.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

// do sends one request. body may be nil (no body), a string or []byte (sent
// as is) or anything else (sent as JSON). An empty token sends no
// Authorization header.
func (e *env) do(t testing.TB, method, path, token string, body any) resp {
	t.Helper()
	r, err := e.try(method, path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// try is do for goroutines other than the test's: it returns the error.
func (e *env) try(method, path, token string, body any) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return resp{}, fmt.Errorf("encode %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		return resp{}, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := e.client.Do(req)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: data}, nil
}

// ok asserts a 200 with a JSON body and decodes it strictly into T, so a
// field the server sends that the wire type lacks is caught too.
func ok[T any](t testing.TB, r resp) T {
	t.Helper()
	var v T
	if r.status != http.StatusOK {
		t.Fatalf("want 200, got %s", r)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r, err)
	}
	return v
}

// wantErr asserts an error status and the JSON error body: exactly
// {"error":{"code","message"[,"field"]}} with a non-empty message.
func wantErr(t testing.TB, r resp, status int, code, field string) wire.ErrorDetail {
	t.Helper()
	if r.status != status {
		t.Fatalf("want %d %s (field %q), got %s", status, code, field, r)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type = %q, want application/json", ct)
	}
	var body wire.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("error body %s: %v", r, err)
	}
	d := body.Error
	if d.Code != code || d.Field != field {
		t.Fatalf("error = {code %q field %q}, want {code %q field %q}: %s", d.Code, d.Field, code, field, r)
	}
	if strings.TrimSpace(d.Message) == "" {
		t.Fatalf("error without message: %s", r)
	}
	return d
}

// badCase is one refused request: what is sent and the error it must get.
type badCase struct {
	name   string
	method string
	path   string
	token  string
	body   any
	status int
	code   string
	field  string
}

// runBad runs refused requests, each in its own subtest. After each it
// checks that the event log and the delayed messages did not move (every
// record change is an event); after all of them it re-reads every record,
// receipt, subscriber list and route and compares them with before.
func (e *env) runBad(t *testing.T, cases []badCase) {
	t.Helper()
	before := e.snap(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, e.do(t, c.method, c.path, c.token, c.body), c.status, c.code, c.field)
			e.assertNoNewEvents(t, before)
		})
	}
	e.assertUnchanged(t, before)
}

// assertNoNewEvents is the cheap check: no event after the snapshot's
// last, and the same number of pending delayed messages.
func (e *env) assertNoNewEvents(t testing.TB, before snapshot) {
	t.Helper()
	evs := ok[wire.EventsResult](t, e.do(t, "GET", fmt.Sprintf("/v1/events?after=%d&limit=5", before.lastEvent), e.admin, nil))
	if len(evs.Items) > 0 {
		t.Fatalf("a refused request changed state: new events %+v", evs.Items)
	}
	sc := ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled?limit=1", e.admin, nil))
	if sc.Count != before.scheduled.Count {
		t.Fatalf("scheduled messages went from %d to %d", before.scheduled.Count, sc.Count)
	}
}

// snapshot is everything a refused request must leave alone: the event log,
// every record of every box the log mentions, pending delayed messages, and
// the receipts, subscribers and routes of the watched DIDs.
type snapshot struct {
	events    int
	lastEvent int64
	records   map[string]model.Record
	scheduled wire.ScheduledResult
	receipts  []model.Receipt
	subs      map[string][]string
	routes    map[string][]model.ContactRoute
}

func (e *env) snap(t testing.TB) snapshot {
	t.Helper()
	s := snapshot{records: map[string]model.Record{}, subs: map[string][]string{}, routes: map[string][]model.ContactRoute{}}
	boxes := map[[2]string]bool{}
	for _, ev := range e.allEvents(t, e.admin, "") {
		s.events++
		s.lastEvent = ev.EventID
		if ev.RecordID != "" {
			boxes[[2]string{ev.Owner, string(ev.BoxKind)}] = true
		}
	}
	for b := range boxes {
		for _, it := range e.syncAll(t, e.admin, b[0], model.BoxKind(b[1])) {
			s.records[it.Record.RecordID] = it.Record
		}
	}
	s.scheduled = ok[wire.ScheduledResult](t, e.do(t, "GET", "/v1/scheduled?limit=1000", e.admin, nil))
	for _, d := range watchedDIDs {
		if r := e.do(t, "GET", "/v1/groups/"+esc(d)+"/subscribers", e.admin, nil); r.status != http.StatusNotFound {
			s.subs[d] = ok[wire.SubscribersResult](t, r).Subscribers
		}
		s.routes[d] = ok[wire.RoutesResult](t, e.do(t, "GET", "/v1/routes/"+esc(d), e.admin, nil)).Routes
		rs := ok[wire.ReceiptsResult](t, e.do(t, "GET", "/v1/read_receipts?limit=1000&reader="+url.QueryEscape(d), e.admin, nil))
		s.receipts = append(s.receipts, rs.Items...)
	}
	return s
}

func (e *env) assertUnchanged(t testing.TB, before snapshot) {
	t.Helper()
	after := e.snap(t)
	if after.events != before.events {
		t.Fatalf("event log grew from %d to %d events", before.events, after.events)
	}
	if len(after.records) != len(before.records) {
		t.Fatalf("record count changed from %d to %d", len(before.records), len(after.records))
	}
	for id, r := range before.records {
		if !reflect.DeepEqual(after.records[id], r) {
			t.Fatalf("record %s changed:\nbefore %+v\nafter  %+v", id, r, after.records[id])
		}
	}
	for _, c := range []struct {
		what string
		a, b any
	}{
		{"scheduled messages", before.scheduled, after.scheduled},
		{"receipts", before.receipts, after.receipts},
		{"subscribers", before.subs, after.subs},
		{"routes", before.routes, after.routes},
	} {
		if !reflect.DeepEqual(c.a, c.b) {
			t.Fatalf("%s changed:\nbefore %+v\nafter  %+v", c.what, c.a, c.b)
		}
	}
}

// esc escapes a DID (or id) as one path segment.
func esc(s string) string { return url.PathEscape(s) }

func boxPath(owner string, box model.BoxKind, rest string) string {
	return "/v1/boxes/" + esc(owner) + "/" + esc(string(box)) + "/" + rest
}

func recPath(id, rest string) string {
	p := "/v1/records/" + esc(id)
	if rest != "" {
		p += "/" + rest
	}
	return p
}

// chat builds a direct message; the text makes it unique.
func chat(from string, to []string, text string) *message.Message {
	return &message.Message{From: from, To: to, Kind: message.KindChat, Content: message.Content{Content: text}}
}

func ptr[T any](v T) *T { return &v }

// dispatch sends an inbound message as the tunnel.
func (e *env) dispatch(t testing.TB, m *message.Message) wire.DispatchResult {
	t.Helper()
	return ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.tunnel, wire.DispatchRequest{Msg: m}))
}

// adminDispatch dispatches m as the admin, who may write in a local
// identity's name (a tunnel may not: TestHTTPTunnelSpeaksOnlyForItsPeople).
func (e *env) adminDispatch(t testing.TB, m *message.Message) wire.DispatchResult {
	t.Helper()
	return ok[wire.DispatchResult](t, e.do(t, "POST", "/v1/dispatch", e.admin, wire.DispatchRequest{Msg: m}))
}

// postSend sends an outbound message with token.
func (e *env) postSend(t testing.TB, token string, m *message.Message) wire.PostSendResult {
	t.Helper()
	return ok[wire.PostSendResult](t, e.do(t, "POST", "/v1/post_send", token, wire.PostSendRequest{Msg: m}))
}

// record reads a record as admin.
func (e *env) record(t testing.TB, id string) model.Record {
	t.Helper()
	return ok[wire.RecordWithMsg](t, e.do(t, "GET", recPath(id, "")+"?with_object=false", e.admin, nil)).Record
}

// claim claims the next record of a box; it fails on 204.
func (e *env) claim(t testing.TB, token, owner string, box model.BoxKind) wire.RecordWithMsg {
	t.Helper()
	return ok[wire.RecordWithMsg](t, e.do(t, "POST", boxPath(owner, box, "next"), token, wire.NextRequest{}))
}

// setSubscribers replaces a group's subscribers as admin.
func (e *env) setSubscribers(t testing.TB, group string, subs ...string) {
	t.Helper()
	ok[wire.SubscribersResult](t, e.do(t, "PUT", "/v1/groups/"+esc(group)+"/subscribers", e.admin,
		wire.SubscribersRequest{Subscribers: subs}))
}

// setRoutes replaces a DID's routes as admin.
func (e *env) setRoutes(t testing.TB, did string, routes ...model.ContactRoute) {
	t.Helper()
	ok[wire.RoutesResult](t, e.do(t, "PUT", "/v1/routes/"+esc(did), e.admin, wire.RoutesRequest{Routes: routes}))
}

// syncAll reads a whole box by seq with token.
func (e *env) syncAll(t testing.TB, token, owner string, box model.BoxKind) []wire.RecordWithMsg {
	t.Helper()
	var out []wire.RecordWithMsg
	after := int64(0)
	for {
		res := ok[wire.SyncResult](t, e.do(t, "GET", fmt.Sprintf("%s?after_seq=%d&limit=1000&with_object=false",
			boxPath(owner, box, "sync"), after), token, nil))
		if len(res.Items) == 0 {
			return out
		}
		out = append(out, res.Items...)
		after = res.LastSeq
	}
}

// allEvents reads the whole event log visible to token.
func (e *env) allEvents(t testing.TB, token, owner string) []model.Event {
	t.Helper()
	var out []model.Event
	after := int64(0)
	for {
		q := url.Values{"after": {fmt.Sprint(after)}, "limit": {"1000"}}
		if owner != "" {
			q.Set("owner", owner)
		}
		res := ok[wire.EventsResult](t, e.do(t, "GET", "/v1/events?"+q.Encode(), token, nil))
		if len(res.Items) == 0 {
			return out
		}
		out = append(out, res.Items...)
		after = res.NextAfter
	}
}

// msgIDsOf lists the msg ids of items, sorted.
func msgIDsOf(items []wire.RecordWithMsg) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.Record.MsgID)
	}
	sort.Strings(out)
	return out
}

// contentOf decodes a returned message body and gives its text.
func contentOf(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	m, err := message.Decode(raw)
	if err != nil {
		t.Fatalf("decode message %s: %v", raw, err)
	}
	return m.Content.Content
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func equalSet(a, b []string) bool { return reflect.DeepEqual(sortedCopy(a), sortedCopy(b)) }

// extRoute is the route through which didExt is reached.
var extRoute = model.ContactRoute{TunnelDID: didTunnel, Platform: "telegram", Address: "tg:dave", ChatID: "1001", Priority: 1}

// tunnelRecord has alice send text to didExt (routed through the tunnel)
// and returns the TUNNEL_OUTBOX record id. The route must be set.
func (e *env) tunnelRecord(t testing.TB, text string) string {
	t.Helper()
	res := e.postSend(t, e.alice, chat(didAlice, []string{didExt}, text))
	if len(res.Deliveries) != 1 {
		t.Fatalf("post_send to a routed recipient: %+v", res)
	}
	return res.Deliveries[0].RecordID
}

// deliver reports a delivery result for a held record as token, under the
// lease that holds it (the tests of fencing send their own requests).
func (e *env) deliver(t testing.TB, token, id string, res wire.DeliveryResult) model.Record {
	t.Helper()
	req := wire.DeliveryRequest{Result: &res}
	if l := e.record(t, id).Lease; l != nil {
		req.LeaseID = l.ID
	}
	return ok[wire.RecordWithMsg](t, e.do(t, "POST", recPath(id, "delivery"), token, req)).Record
}

// deadRecord makes a TUNNEL_OUTBOX record and lets it fail for good.
func (e *env) deadRecord(t testing.TB, text string) string {
	t.Helper()
	id := e.tunnelRecord(t, text)
	if got := e.claim(t, e.tunnel, didTunnel, model.TunnelOutbox); got.Record.RecordID != id {
		t.Fatalf("claimed %s, want %s", got.Record.RecordID, id)
	}
	if rec := e.deliver(t, e.tunnel, id, wire.DeliveryResult{ErrorCode: "bad_chat"}); rec.State != model.Dead {
		t.Fatalf("non-retryable failure left %+v", rec)
	}
	return id
}
