package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/wire"
)

// req is one request as the fake server saw it.
type req struct {
	Method, Path string // Path is escaped, exactly as on the wire
	Query        url.Values
	Body         map[string]any
	Auth         string
}

// reply is a canned answer.
type reply struct {
	status int
	body   string
}

// fakeServer answers "METHOD /escaped/path" with a canned reply, records
// every request, and answers anything else with a msgcenter not_found error.
type fakeServer struct {
	t       *testing.T
	url     string
	replies map[string]reply
	reqs    []req
}

func newFakeServer(t *testing.T, replies map[string]reply) *fakeServer {
	t.Helper()
	f := &fakeServer{t: t, replies: replies}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		rq := req{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Auth: r.Header.Get("Authorization")}
		if len(data) > 0 {
			if err := json.Unmarshal(data, &rq.Body); err != nil {
				t.Errorf("request body is not a JSON object: %s", data)
			}
		}
		f.reqs = append(f.reqs, rq)
		rep, ok := f.replies[r.Method+" "+rq.Path]
		if !ok {
			rep = reply{404, `{"error":{"code":"not_found","message":"no route in fake"}}`}
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// only returns the single request the server saw.
func (f *fakeServer) only() req {
	f.t.Helper()
	if len(f.reqs) != 1 {
		f.t.Fatalf("server saw %d requests, want 1: %+v", len(f.reqs), f.reqs)
	}
	return f.reqs[0]
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line against f with a token and no environment.
func runCLI(t *testing.T, f *fakeServer, env map[string]string, argv ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	full := argv
	if f != nil {
		full = append([]string{"--server", f.url}, argv...)
		if env == nil {
			full = append(full, "--token", "T0K")
		}
	}
	code := run(context.Background(), full, stdio{in: strings.NewReader(""), out: &out, err: &errb},
		func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

// field reads a value from a decoded JSON body by dotted path.
func field(t *testing.T, body map[string]any, path string) any {
	t.Helper()
	var cur any = body
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("body has no %s: %v", path, body)
		}
		cur = m[p]
	}
	return cur
}

const recordJSON = `{"record":{"record_id":"cyrec:1","owner":"did:x:bob","box_kind":"INBOX","msg_id":"cymsg:9","state":"READING","seq":7,"delivery":{"attempts":1},"sort_key":1,"lease":{"lease_id":"L-1","expires_at_ms":1700000000000}},"msg":{"from":"did:x:alice","to":["did:x:bob"],"content":{"title":"hi","content":"hello bob"}}}`

func TestSendWithDelay(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"POST /v1/post_send": {200, `{"ok":true,"msg_id":"cymsg:abc","outbox_record_id":"cyrec:o","deliveries":[{"tunnel_did":"did:t:tg","record_id":"cyrec:t","target_did":"did:x:bob","priority":1}],"local_recipients":["did:x:carol"],"dropped_recipients":[],"scheduled_delivery_time":"2030-01-01T00:00:10Z"}`},
	})
	r := runCLI(t, f, nil, "send", "--from", "did:x:alice", "--to", "did:x:bob,did:x:carol", "--to", "did:x:dan",
		"--text", "standup", "--topic", "daily", "--delay", "10s", "--tunnel", "did:t:tg", "--idempotency-key", "k-1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	q := f.only()
	if q.Method != "POST" || q.Path != "/v1/post_send" || q.Auth != "Bearer T0K" {
		t.Fatalf("request %s %s auth %q", q.Method, q.Path, q.Auth)
	}
	if got := field(t, q.Body, "delay_ms"); got != 10000.0 {
		t.Errorf("delay_ms = %v, want 10000", got)
	}
	if _, ok := q.Body["deliver_at_ms"]; ok {
		t.Error("deliver_at_ms sent with --delay")
	}
	if got := field(t, q.Body, "msg.to"); !reflect.DeepEqual(got, []any{"did:x:bob", "did:x:carol", "did:x:dan"}) {
		t.Errorf("msg.to = %v", got)
	}
	for path, want := range map[string]any{
		"msg.from": "did:x:alice", "msg.content.content": "standup", "msg.thread.topic": "daily",
		"send_ctx.tunnel_did": "did:t:tg", "idempotency_key": "k-1",
	} {
		if got := field(t, q.Body, path); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	// With a key, the key and not the time makes the message unique, so a
	// retry is the same message.
	if msg, _ := q.Body["msg"].(map[string]any); msg["created_at_ms"] != nil || msg["nonce"] != "idempotency-key:k-1" {
		t.Errorf("a keyed send's message %v: want nonce idempotency-key:k-1 and no created_at_ms", msg)
	}
	// The due time shows as every time the CLI shows: local, to the ms.
	due := fmtMS(time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC).UnixMilli())
	for _, want := range []string{"cymsg:abc", due, "did:t:tg", "cyrec:t", "did:x:carol"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestSendScheduling(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"POST /v1/post_send": {200, `{"ok":true,"msg_id":"m"}`}})
	r := runCLI(t, f, nil, "send", "--from", "a", "--to", "b", "--text", "t", "--deliver-at", "2030-01-02T03:04:05Z")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := field(t, f.only().Body, "deliver_at_ms"); got != 1893553445000.0 {
		t.Fatalf("deliver_at_ms = %v", got)
	}
	if ms, _ := field(t, f.only().Body, "msg.created_at_ms").(float64); ms <= 0 {
		t.Errorf("created_at_ms not stamped without a key: %v", f.only().Body["msg"])
	}

	f = newFakeServer(t, map[string]reply{"POST /v1/post_send": {200, `{"ok":true,"msg_id":"m"}`}})
	r = runCLI(t, f, nil, "send", "--from", "a", "--to", "b", "--text", "t", "--delay-ms", "1500")
	if r.code != 0 || field(t, f.only().Body, "delay_ms") != 1500.0 {
		t.Fatalf("exit %d %s body %v", r.code, r.stderr, f.reqs)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		want string // in stderr
	}{
		{"send without --from", []string{"send", "--to", "b", "--text", "x"}, "--from is required"},
		{"two delays", []string{"send", "--from", "a", "--to", "b", "--text", "t", "--delay", "1s", "--delay-ms", "5"}, "--delay and --delay-ms"},
		{"bad duration", []string{"send", "--from", "a", "--delay", "10"}, "--delay"},
		{"bad deliver-at", []string{"send", "--from", "a", "--text", "t", "--deliver-at", "tomorrow"}, "RFC 3339"},
		{"bad kind", []string{"send", "--from", "a", "--text", "t", "--kind", "shout"}, "--kind \"shout\""},
		{"no text", []string{"send", "--from", "a", "--to", "b"}, "--text is required"},
		{"empty text from stdin", []string{"send", "--from", "a", "--to", "b", "--text", "-"}, "--text is required"},
		{"msg-file with flags", []string{"send", "--msg-file", "x.json", "--from", "a"}, "drop --from"},
		{"token without --did", []string{"token", "create"}, "--did is required"},
		{"token bad role", []string{"token", "create", "--did", "d", "--role", "root"}, "--role \"root\""},
		{"box list missing BOX", []string{"box", "list", "did:x:a"}, "missing BOX"},
		{"bad box kind", []string{"box", "list", "did:x:a", "MAILBOX"}, "not a box kind"},
		{"bad state", []string{"box", "list", "did:x:a", "inbox", "--state", "UNREAD,NEW"}, "\"NEW\" is not a state"},
		{"bad order", []string{"box", "list", "did:x:a", "inbox", "--order", "up"}, "asc or desc"},
		{"ack --wait without --next", []string{"record", "ack", "cyrec:1", "--wait", "5s"}, "add --next"},
		{"ack --next sub-ms lease", []string{"record", "ack", "cyrec:1", "--next", "--lease", "500us"}, "smallest unit is 1ms"},
		{"limit too big", []string{"box", "list", "did:x:a", "inbox", "--limit", "5000"}, "--limit 5000"},
		{"peek with lease", []string{"box", "next", "o", "inbox", "--peek", "--lease", "5s"}, "--peek takes no lease"},
		{"deliver without outcome", []string{"record", "deliver", "cyrec:1"}, "--ok for success"},
		{"deliver ok and error", []string{"record", "deliver", "cyrec:1", "--ok", "--error-code", "x"}, "drop the failure flags"},
		{"receipt without status", []string{"receipt", "set", "--msg", "m", "--reader", "r"}, "--status is required"},
		{"receipt list unscoped", []string{"receipt", "list"}, "at least one of --msg, --group, --reader"},
		{"group set without DIDs", []string{"group", "set", "did:g:a"}, "--clear"},
		{"route without tunnel", []string{"route", "set", "d", "--route", "chat_id=1"}, "tunnel_did is required"},
		{"route bad key", []string{"route", "set", "d", "--route", "tunnel_did=t,colour=red"}, "unknown key \"colour\""},
		{"dlq redrive both", []string{"dlq", "redrive", "o", "inbox", "--record", "r"}, "drop OWNER BOX"},
		{"unknown flag", []string{"box", "next", "o", "inbox", "--lease-time", "5s"}, "unknown flag: --lease-time"},
		{"unknown command", []string{"mailbox"}, "unknown command"},
		{"bare group", []string{"record"}, "needs a subcommand"},
		{"bad server", []string{"--server", "localhost:7420", "health"}, "--server \"localhost:7420\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			r := runCLI(t, f, nil, tc.argv...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) || !strings.HasPrefix(r.stderr, "error: ") {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.want)
			}
			if !strings.Contains(r.stderr, "--help") {
				t.Errorf("stderr %q does not point at --help", r.stderr)
			}
			if len(f.reqs) != 0 {
				t.Errorf("a usage error still called the server: %+v", f.reqs)
			}
			if r.stdout != "" {
				t.Errorf("usage error wrote to stdout: %q", r.stdout)
			}
		})
	}
}

func TestBoxNext(t *testing.T) {
	const path = "/v1/boxes/did:web:example.com%2Fbob/INBOX/next"
	t.Run("204 nothing available", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"POST " + path: {204, ""}})
		r := runCLI(t, f, nil, "box", "next", "did:web:example.com/bob", "inbox", "--lease", "30s", "--wait", "10s", "--state", "unread")
		if r.code != 0 || !strings.Contains(r.stdout, "no record available") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		b := f.only().Body
		if b["lease_ms"] != 30000.0 || b["wait_ms"] != 10000.0 || !reflect.DeepEqual(b["state_filter"], []any{"UNREAD"}) {
			t.Fatalf("body %v", b)
		}
		if _, ok := b["lock_on_take"]; ok {
			t.Fatalf("lock_on_take sent without --peek: %v", b)
		}
	})
	t.Run("204 with --json prints null", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"POST " + path: {204, ""}})
		r := runCLI(t, f, nil, "box", "next", "did:web:example.com/bob", "INBOX", "--json")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "null" {
			t.Fatalf("exit %d stdout %q", r.code, r.stdout)
		}
	})
	t.Run("claimed record", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"POST " + path: {200, recordJSON}})
		r := runCLI(t, f, nil, "box", "next", "did:web:example.com/bob", "INBOX", "--peek")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if f.only().Body["lock_on_take"] != false {
			t.Fatalf("--peek did not send lock_on_take=false: %v", f.reqs[0].Body)
		}
		for _, want := range []string{"cyrec:1", "READING", "L-1", "hello bob", "record ack cyrec:1 --lease-id L-1"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("claimed from a tunnel outbox", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"POST /v1/boxes/did:t:tg/TUNNEL_OUTBOX/next": {200, recordJSON}})
		r := runCLI(t, f, nil, "box", "next", "did:t:tg", "tunnel_outbox")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		// A sender reports the delivery: there is no ack to give.
		for _, want := range []string{"record deliver cyrec:1 --lease-id L-1 --ok", "record fail cyrec:1 --lease-id L-1 --retryable"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "record ack") {
			t.Errorf("a tunnel outbox's claim hints at an ack:\n%s", r.stdout)
		}
	})
}

func TestRecordFail(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"POST /v1/records/cyrec:1/delivery": {200, recordJSON}})
	r := runCLI(t, f, nil, "record", "fail", "cyrec:1", "--error-code", "rate_limited", "--error-message", "slow down",
		"--retry-after", "5s", "--lease-id", "L-1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b := f.only().Body
	want := map[string]any{
		"result":   map[string]any{"ok": false, "error_code": "rate_limited", "error_message": "slow down", "retryable": true, "retry_after_ms": 5000.0},
		"lease_id": "L-1",
	}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("body %v\nwant %v", b, want)
	}

	f = newFakeServer(t, map[string]reply{"POST /v1/records/cyrec:1/delivery": {200, recordJSON}})
	if r := runCLI(t, f, nil, "record", "deliver", "cyrec:1", "--ok", "--external-id", "tg:5"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := f.only().Body["result"]; !reflect.DeepEqual(got, map[string]any{"ok": true, "external_msg_id": "tg:5"}) {
		t.Fatalf("deliver --ok body %v", got)
	}
}

func TestRecordAckNext(t *testing.T) {
	const path = "POST /v1/records/cyrec:1/delivery"
	acked := `{"record":{"record_id":"cyrec:1","owner":"did:x:bob","box_kind":"INBOX","state":"READED","seq":1}`
	f := newFakeServer(t, map[string]reply{path: {200, acked + `,"next":` + recordJSON + `}`}})
	r := runCLI(t, f, nil, "record", "ack", "cyrec:1", "--lease-id", "L-0", "--next", "--wait", "10s", "--lease", "30s")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := map[string]any{"result": map[string]any{"ok": true}, "lease_id": "L-0",
		"next": map[string]any{"wait_ms": 10000.0, "lease_ms": 30000.0}}
	if b := f.only().Body; !reflect.DeepEqual(b, want) {
		t.Fatalf("body %v\nwant %v", b, want)
	}
	for _, want := range []string{"acked cyrec:1 (READED)", "READING", "L-1", "hello bob"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	f = newFakeServer(t, map[string]reply{path: {200, acked + `}`}})
	if r := runCLI(t, f, nil, "record", "ack", "cyrec:1", "--next"); r.code != 0 || !strings.Contains(r.stdout, "no record available in did:x:bob INBOX") {
		t.Fatalf("nothing next: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	// The ack stood but the claim failed: say both, and exit non-zero.
	f = newFakeServer(t, map[string]reply{path: {200, acked + `,"next_error":{"code":"internal","message":"internal error"}}`}})
	r = runCLI(t, f, nil, "record", "ack", "cyrec:1", "--next")
	if r.code != 1 || !strings.Contains(r.stdout, "acked cyrec:1 (READED)") || !strings.Contains(r.stderr, "acked, but claiming the next record failed: internal") {
		t.Fatalf("next failed: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestTokenCreate(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"POST /v1/tokens": {200, `{"token":"mc_secret","did":"did:x:bob","role":"tunnel"}`}})
	r := runCLI(t, f, nil, "token", "create", "--did", "did:x:bob", "--role", "Tunnel")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !reflect.DeepEqual(f.only().Body, map[string]any{"did": "did:x:bob", "role": "tunnel"}) {
		t.Fatalf("body %v", f.reqs[0].Body)
	}
	if r.stdout != "mc_secret\n" {
		t.Fatalf("stdout should be the token alone, got %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "shown once") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestJSONOutputIsValid(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"GET /v1/boxes/o/TUNNEL_OUTBOX/records": {200, `{"items":[` + recordJSON + `],"next_cursor_sort_key":5,"next_cursor_record_id":"cyrec:1"}`},
		"GET /v1/routes/d":                      {200, `{"did":"d","routes":[{"tunnel_did":"t","priority":3}]}`},
		"GET /v1/events":                        {200, `{"items":[{"event_id":4,"type":"record.dead","at_ms":1}],"next_after":4}`},
		"POST /v1/tokens":                       {200, `{"token":"x","did":"d","role":"agent"}`},
		"GET /v1/messages/cymsg:9":              {200, `{"from":"a","content":{"machine":{"price":1.50}}}`},
		"GET /healthz":                          {200, `{"status":"ok"}`},
	})
	cases := [][]string{
		{"dlq", "list", "o", "tunnel_outbox"},
		{"route", "get", "d"},
		{"events"},
		{"token", "create", "--did", "d"},
		{"message", "get", "cymsg:9"},
		{"health"},
	}
	for _, argv := range cases {
		r := runCLI(t, f, nil, append(argv, "--json")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", argv, r.code, r.stderr)
		}
		if !json.Valid([]byte(r.stdout)) {
			t.Fatalf("%v: stdout is not JSON:\n%s", argv, r.stdout)
		}
	}
	// message get --json keeps the stored bytes (1.50 is not rewritten as 1.5).
	r := runCLI(t, f, nil, "message", "get", "cymsg:9", "--json")
	if !strings.Contains(r.stdout, "1.50") {
		t.Fatalf("raw message altered: %s", r.stdout)
	}
	// dlq list asks for DEAD records only, in the default (desc) order.
	for _, q := range f.reqs {
		if q.Path == "/v1/boxes/o/TUNNEL_OUTBOX/records" {
			if q.Query.Get("state") != "DEAD" || q.Query.Get("order") != "desc" {
				t.Fatalf("dlq list query %v", q.Query)
			}
		}
	}
}

func TestAPIErrorOutput(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"POST /v1/records/cyrec:1/state": {409, `{"error":{"code":"invalid_transition","message":"an INBOX record cannot move from READED to READING","field":"new_state"}}`},
	})
	r := runCLI(t, f, nil, "record", "state", "cyrec:1", "reading")
	if r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
	if want := "error: invalid_transition: new_state: an INBOX record cannot move from READED to READING\n"; r.stderr != want {
		t.Fatalf("stderr %q\nwant   %q", r.stderr, want)
	}
	// With --json the error is JSON too: the API's error body and the exit code.
	r = runCLI(t, f, nil, "record", "state", "cyrec:1", "reading", "--json")
	var got struct {
		Error wire.ErrorDetail
		Exit  int
	}
	if err := json.Unmarshal([]byte(r.stderr), &got); err != nil || r.code != 1 || got.Exit != 1 ||
		got.Error != (wire.ErrorDetail{Code: "invalid_transition", Field: "new_state", Message: "an INBOX record cannot move from READED to READING"}) {
		t.Fatalf("--json error: exit %d, stderr %q (%v)", r.code, r.stderr, err)
	}
	if r.stdout != "" {
		t.Fatalf("error wrote to stdout: %q", r.stdout)
	}
	if len(f.reqs) != 2 || f.reqs[0].Body["new_state"] != "READING" {
		t.Fatalf("requests %v", f.reqs)
	}

	r = runCLI(t, f, nil, "record", "get", "cyrec:nope")
	if r.code != 1 || r.stderr != "error: not_found: no route in fake\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// A field the server names in milliseconds is traced to the flag that
// set it, when one did.
func TestAPIErrorNamesTheFlag(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"POST /v1/boxes/did:x:bob/INBOX/next": {400, `{"error":{"code":"invalid_argument","message":"must be between 1 and 43200000","field":"lease_ms"}}`},
		"POST /v1/records/cyrec:1/delivery":   {400, `{"error":{"code":"invalid_argument","message":"must be between 0 and 300000","field":"next.wait_ms"}}`},
	})
	r := runCLI(t, f, nil, "box", "next", "did:x:bob", "inbox", "--lease", "13h")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "hint: lease_ms is --lease here\n") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, f, nil, "record", "ack", "cyrec:1", "--next", "--wait", "6m")
	if r.code != 1 || !strings.HasSuffix(r.stderr, "hint: next.wait_ms is --wait here\n") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	// without the flag given there is nothing to point at
	r = runCLI(t, f, nil, "box", "next", "did:x:bob", "inbox")
	if r.code != 1 || strings.Contains(r.stderr, "hint") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestSendNotOKFails(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"POST /v1/dispatch": {200, `{"ok":false,"msg_id":"m","dropped_recipients":["did:x:bob"],"reason":"blocked"}`}})
	r := runCLI(t, f, nil, "dispatch", "--from", "did:tg:1", "--to", "did:x:bob", "--text", "hi", "--platform", "telegram", "--chat-id", "42")
	if r.code != 1 || !strings.Contains(r.stderr, "not delivered: blocked") || !strings.Contains(r.stdout, "did:x:bob") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := f.only().Body["ingress_ctx"]; !reflect.DeepEqual(got, map[string]any{"platform": "telegram", "chat_id": "42"}) {
		t.Fatalf("ingress_ctx %v", got)
	}
}

func TestTokenAndServerResolution(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"GET /v1/routes/d": {200, `{"did":"d","routes":[]}`}})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		argv []string
		auth string
	}{
		{"admin token file via --data", map[string]string{}, []string{"--server", f.url, "--data", dir}, "Bearer from-file"},
		{"data dir and server from env", map[string]string{"MSGCENTER_DATA": dir, "MSGCENTER_SERVER": f.url}, nil, "Bearer from-file"},
		{"env token beats file", map[string]string{"MSGCENTER_TOKEN": "from-env", "MSGCENTER_SERVER": f.url}, []string{"--data", dir}, "Bearer from-env"},
		{"flag beats env", map[string]string{"MSGCENTER_TOKEN": "from-env", "MSGCENTER_SERVER": "http://unused:1"}, []string{"--server", f.url, "--token", "from-flag"}, "Bearer from-flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.reqs = nil
			r := runCLI(t, nil, tc.env, append(tc.argv, "route", "get", "d")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := f.only().Auth; got != tc.auth {
				t.Fatalf("auth %q, want %q", got, tc.auth)
			}
		})
	}
	r := runCLI(t, nil, map[string]string{}, "--server", f.url, "--data", t.TempDir(), "route", "get", "d")
	if r.code != 1 || !strings.Contains(r.stderr, "no API token") || !strings.Contains(r.stderr, "MSGCENTER_TOKEN") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestRouteSetAndGroupSet(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"PUT /v1/routes/did:x:a%2Fb":            {200, `{"did":"did:x:a/b","routes":[]}`},
		"PUT /v1/groups/did:g:team/subscribers": {200, `{"group":"did:g:team","subscribers":["a","b"]}`},
		"DELETE /v1/groups/did:g:team":          {204, ``},
	})
	r := runCLI(t, f, nil, "route", "set", "did:x:a/b",
		"--route", "tunnel_did=did:t:tg,platform=telegram,chat_id=42,priority=10",
		"--route", "tunnel=did:t:mail,address=bob@example.com")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := []any{
		map[string]any{"tunnel_did": "did:t:tg", "platform": "telegram", "chat_id": "42", "priority": 10.0},
		map[string]any{"tunnel_did": "did:t:mail", "address": "bob@example.com"},
	}
	if got := f.only().Body["routes"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("routes %v", got)
	}

	f.reqs = nil
	r = runCLI(t, f, nil, "group", "set", "did:g:team", "a", "b")
	if r.code != 0 || !reflect.DeepEqual(f.only().Body["subscribers"], []any{"a", "b"}) || !strings.Contains(r.stdout, "2 subscribers") {
		t.Fatalf("exit %d stdout %q body %v", r.code, r.stdout, f.reqs)
	}

	f.reqs = nil
	r = runCLI(t, f, nil, "group", "delete", "did:g:team")
	if r.code != 0 || f.only().Method != "DELETE" || !strings.Contains(r.stdout, "did:g:team is no longer a group") {
		t.Fatalf("group delete: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestBoxListQueryAndPaging(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"GET /v1/boxes/did:x:bob/INBOX/records": {200, `{"items":[` + recordJSON + `],"next_cursor_sort_key":5,"next_cursor_record_id":"cyrec:1"}`},
	})
	r := runCLI(t, f, nil, "box", "list", "did:x:bob", "inbox", "--state", "unread,reading", "--order", "asc",
		"--limit", "20", "--cursor-sort-key", "9", "--cursor-record-id", "cyrec:0", "--tag", "vip", "--with-object")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := url.Values{"state": {"UNREAD,READING"}, "order": {"asc"}, "limit": {"20"}, "cursor_sort_key": {"9"},
		"cursor_record_id": {"cyrec:0"}, "tag": {"vip"}, "with_object": {"true"}}
	if got := f.only().Query; !reflect.DeepEqual(got, want) {
		t.Fatalf("query %v\nwant  %v", got, want)
	}
	for _, s := range []string{"RECORD_ID", "cyrec:1", "did:x:alice: hi", "--cursor-sort-key 5 --cursor-record-id cyrec:1"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("output lacks %q:\n%s", s, r.stdout)
		}
	}
}

// A server the CLI cannot reach and an address serve cannot listen on get
// different hints: only the first is about --server.
func TestNetworkErrorHints(t *testing.T) {
	t.Parallel()
	unreach := runCLI(t, nil, nil, "--server", "http://127.0.0.1:1", "--token", "x", "events")
	if unreach.code != 1 || !strings.Contains(unreach.stderr, "is `msgcenter serve` running at http://127.0.0.1:1") {
		t.Errorf("unreachable server: exit %d, stderr %q", unreach.code, unreach.stderr)
	}
	listen := runCLI(t, nil, nil, "serve", "--listen", "nope", "--data", t.TempDir())
	if listen.code != 1 || !strings.Contains(listen.stderr, "hint: --listen wants HOST:PORT") || strings.Contains(listen.stderr, "--server") {
		t.Errorf("bad listen address: exit %d, stderr %q", listen.code, listen.stderr)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := runCLI(t, nil, nil, "serve", "--listen", held.Addr().String(), "--data", t.TempDir())
	if busy.code != 1 || !strings.Contains(busy.stderr, "hint: another process holds that port") {
		t.Errorf("a port in use: exit %d, stderr %q", busy.code, busy.stderr)
	}
}

// serve's flags come from MSGCENTER_<NAME> when not given, and a value a
// flag refuses names the variable; the flag wins over the variable.
func TestServeFlagsFromEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, nil, map[string]string{"MSGCENTER_MAX_ATTEMPTS": "x"}, "serve", "--data", dir)
	if r.code != 2 || !strings.Contains(r.stderr, `MSGCENTER_MAX_ATTEMPTS="x"`) {
		t.Fatalf("bad variable: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, map[string]string{"MSGCENTER_DEFAULT_LEASE": "100ms"}, "serve", "--data", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "--default-lease must be at least 1s") {
		t.Fatalf("variable not read: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, map[string]string{"MSGCENTER_LOG_LEVEL": "loud"}, "serve", "--data", dir, "--log-level", "chatty")
	if r.code != 2 || !strings.Contains(r.stderr, `"chatty"`) {
		t.Fatalf("the flag did not win: exit %d stderr %q", r.code, r.stderr)
	}
}

// A PostgreSQL URL with the default SQLite store is a mistake, not a node
// quietly running on a database of its own.
func TestPostgresURLWithoutPostgresStore(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"migrate"}, {"serve", "--listen", "127.0.0.1:0"}, {"migrate", "--store", "sqlite"}} {
		dir := t.TempDir()
		r := runCLI(t, nil, map[string]string{"MSGCENTER_POSTGRES_URL": "postgres://nowhere.invalid/db"}, append(args, "--data", dir)...)
		if r.code != 2 || !strings.Contains(r.stderr, "add --store postgres") {
			t.Errorf("%v with a PostgreSQL URL: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "msgcenter.db")); err == nil {
			t.Errorf("%v made an SQLite database", args)
		}
	}
}

// serve and migrate that cannot reach their PostgreSQL are told about the
// database, not about a server the CLI would talk to.
func TestUnreachablePostgresHint(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, nil, "migrate", "--store", "postgres", "--postgres-url", "postgres://postgres@127.0.0.1:1/db?connect_timeout=2", "--data", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "check --postgres-url") || strings.Contains(r.stderr, "--server") {
		t.Errorf("migrate with PostgreSQL unreachable: exit %d, stderr %q", r.code, r.stderr)
	}
}
