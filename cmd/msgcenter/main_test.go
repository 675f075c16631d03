package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

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
