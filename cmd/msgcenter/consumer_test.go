package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/server"
	"github.com/msgcenter/msgcenter/wire"
)

const consumerJSON = `{"owner":"did:web:example.com/ann","name":"work","source_owner":"did:web:example.com/ann","source_box":"INBOX","filter":{"topic":["work"]},"source_seq":4,"acked_seq":2,"created_at_ms":1,"updated_at_ms":2,"box":"CONSUMER:work","source_last_seq":5,"last_seq":3}`

func TestConsumerCreateRequest(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"POST /v1/consumers": {201, consumerJSON}})
	r := runCLI(t, f, nil, "consumer", "create", "work", "--source", "did:web:example.com/ann/inbox",
		"--topic", "work", "--from", "did:x:a,did:x:b", "--from", "did:x:c", "--tag", "t1", "--mention", "did:x:m",
		"--workspace", "w", "--kind", "chat", "--to", "did:x:to", "--text", "Outage", "--start", "NOW")
	if r.code != 0 || !strings.Contains(r.stdout, "created consumer work of did:web:example.com/ann: box CONSUMER:work") ||
		!strings.Contains(r.stdout, "filter: topic=work") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	q := f.only()
	want := map[string]any{
		"name": "work", "source_owner": "did:web:example.com/ann", "source_box": "INBOX", "start": "now",
		"filter": map[string]any{"from": []any{"did:x:a", "did:x:b", "did:x:c"}, "to": []any{"did:x:to"},
			"kind": []any{"chat"}, "topic": []any{"work"}, "tags": []any{"t1"}, "mentions": []any{"did:x:m"},
			"workspace": []any{"w"}, "text": "Outage"},
	}
	if !reflect.DeepEqual(q.Body, want) {
		t.Fatalf("body %v\nwant %v", q.Body, want)
	}

	f = newFakeServer(t, map[string]reply{"POST /v1/consumers": {201, consumerJSON}})
	r = runCLI(t, f, nil, "consumer", "create", "work", "--source-owner", "did:x:a", "--source-box", "inbox",
		"--after-seq", "0", "--owner", "did:x:o", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	var got wire.ConsumerInfo
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Box != "CONSUMER:work" {
		t.Fatalf("--json printed %q: %v", r.stdout, err)
	}
	q = f.only()
	if q.Body["after_seq"] != 0.0 || q.Body["owner"] != "did:x:o" || q.Body["start"] != nil || q.Body["filter"] == nil {
		t.Fatalf("body %v", q.Body)
	}
}

func TestConsumerUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		argv []string
		want string
	}{
		{"create without source", []string{"consumer", "create", "work"}, "--source OWNER/BOX"},
		{"create source without box", []string{"consumer", "create", "work", "--source", "did:x:a"}, "want OWNER/BOX"},
		{"create source trailing slash", []string{"consumer", "create", "work", "--source", "did:x:a/"}, "want OWNER/BOX"},
		{"create both sources", []string{"consumer", "create", "work", "--source", "did:x:a/INBOX", "--source-box", "INBOX"}, "drop --source-owner"},
		{"create bad box", []string{"consumer", "create", "work", "--source", "did:x:a/MAILBOX"}, "not a box kind"},
		{"create from a consumer", []string{"consumer", "create", "work", "--source", "did:x:a/consumer:x"}, "not another consumer's box"},
		{"create start and after", []string{"consumer", "create", "work", "--source", "did:x:a/INBOX", "--start", "now", "--after-seq", "3"}, "give one"},
		{"create bad start", []string{"consumer", "create", "work", "--source", "did:x:a/INBOX", "--start", "end"}, "beginning or now"},
		{"create negative after", []string{"consumer", "create", "work", "--source", "did:x:a/INBOX", "--after-seq", "-1"}, "must not be negative"},
		{"bad name", []string{"consumer", "get", "my feed"}, "NAME: consumer name"},
		{"get without name", []string{"consumer", "get"}, "missing NAME"},
		{"list filters without NAME", []string{"consumer", "list", "--state", "UNREAD"}, "give NAME"},
		{"ack bad seq", []string{"consumer", "ack", "work", "x"}, "SEQ \"x\""},
		{"ack fractional seq", []string{"consumer", "ack", "work", "1.5"}, "SEQ \"1.5\""},
		{"fail two messages", []string{"consumer", "fail", "work", "cyrec:1", "--error", "a", "--error-message", "b"}, "give one of them"},
		{"claim negative lease", []string{"consumer", "claim", "work", "--lease", "-1s"}, "--lease"},
		{"sync limit", []string{"consumer", "sync", "work", "--limit", "5000"}, "--limit 5000"},
		{"bare consumer", []string{"consumer"}, "needs a subcommand"},
		{"bare retention", []string{"retention"}, "needs a subcommand"},
		{"serve bad retention", []string{"serve", "--retention", "INBOX=soon"}, "--retention INBOX \"soon\""},
		{"serve bad family", []string{"serve", "--retention", "MAILBOX=1d"}, "unknown box family \"MAILBOX\""},
		{"serve bad events", []string{"serve", "--retention-events", "0"}, "--retention-events \"0\": must be positive"},
		{"serve bad interval", []string{"serve", "--retention-interval", "off"}, "--retention-interval \"off\": want a pause between passes of at least 1s"},
		{"serve interval not a duration", []string{"serve", "--retention-interval", "abc"}, "--retention-interval \"abc\": not a pause"},
		{"serve zero interval", []string{"serve", "--retention-interval", "0"}, "--retention-interval \"0\": want a pause between passes of at least 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			r := runCLI(t, f, nil, append(tc.argv, "--data", t.TempDir())...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
			if len(f.reqs) != 0 {
				t.Errorf("a usage error still called the server: %+v", f.reqs)
			}
		})
	}
}

// Without --owner the CLI finds NAME among the consumers the token sees.
func TestConsumerOwnerLookup(t *testing.T) {
	const get = "GET /v1/consumers/did:web:example.com%2Fann/work"
	list := `{"consumers":[` + consumerJSON + `,` + strings.Replace(consumerJSON, `"name":"work"`, `"name":"other"`, 1) + `]}`
	t.Run("one match", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"GET /v1/consumers": {200, list},
			"POST /v1/consumers/did:web:example.com%2Fann/work/ack": {200, consumerJSON}})
		r := runCLI(t, f, nil, "consumer", "ack", "work", "3")
		if r.code != 0 || !strings.Contains(r.stdout, "consumer work: cursor at seq 2 of 3 (1 not acknowledged)") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		if len(f.reqs) != 2 || f.reqs[0].Query.Get("owner") != "" || f.reqs[1].Body["seq"] != 3.0 {
			t.Fatalf("requests %+v", f.reqs)
		}
	})
	t.Run("--owner skips the lookup", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{get: {200, consumerJSON}})
		r := runCLI(t, f, nil, "consumer", "get", "work", "--owner", "did:web:example.com/ann")
		if r.code != 0 || !strings.Contains(r.stdout, "acked seq 2 of 3 (1 not acknowledged)") || !strings.Contains(r.stdout, "topic=work") {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		f.only()
	})
	t.Run("no match", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"GET /v1/consumers": {200, list}})
		r := runCLI(t, f, nil, "consumer", "delete", "nope")
		if r.code != 1 || !strings.Contains(r.stderr, `no consumer named "nope"`) {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("ambiguous", func(t *testing.T) {
		two := `{"consumers":[` + consumerJSON + `,` + strings.ReplaceAll(consumerJSON, `"owner":"did:web:example.com/ann"`, `"owner":"did:x:bo"`) + `]}`
		f := newFakeServer(t, map[string]reply{"GET /v1/consumers": {200, two}})
		r := runCLI(t, f, nil, "consumer", "claim", "work")
		if r.code != 2 || !strings.Contains(r.stderr, "did:web:example.com/ann, did:x:bo): pass --owner") {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	})
	t.Run("list", func(t *testing.T) {
		f := newFakeServer(t, map[string]reply{"GET /v1/consumers": {200, list}})
		r := runCLI(t, f, nil, "consumer", "list", "--owner", "did:x:o")
		if r.code != 0 || !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "did:web:example.com/ann/INBOX") ||
			f.only().Query.Get("owner") != "did:x:o" {
			t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// A record id of another box is not acted on under a consumer's name.
func TestConsumerDoneChecksTheBox(t *testing.T) {
	f := newFakeServer(t, map[string]reply{"GET /v1/records/cyrec:1": {200, recordJSON}})
	r := runCLI(t, f, nil, "consumer", "done", "work", "cyrec:1")
	if r.code != 1 || !strings.Contains(r.stderr, "is in INBOX of did:x:bob, not in consumer work's box") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if len(f.reqs) != 1 {
		t.Fatalf("acked anyway: %+v", f.reqs)
	}
	mine := strings.Replace(recordJSON, `"box_kind":"INBOX"`, `"box_kind":"CONSUMER:work"`, 1)
	f = newFakeServer(t, map[string]reply{"GET /v1/records/cyrec:1": {200, mine}, "POST /v1/records/cyrec:1/delivery": {200, mine}})
	r = runCLI(t, f, nil, "consumer", "fail", "work", "cyrec:1", "--error", "boom", "--retry-after", "5s", "--lease-id", "L-1")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	b := f.reqs[1].Body
	if field(t, b, "result.error_message") != "boom" || field(t, b, "result.retryable") != true ||
		field(t, b, "result.retry_after_ms") != 5000.0 || b["lease_id"] != "L-1" {
		t.Fatalf("fail body %v", b)
	}

	// done --next: checked against the box first, then one request.
	f = newFakeServer(t, map[string]reply{"GET /v1/records/cyrec:1": {200, mine}, "POST /v1/records/cyrec:1/delivery": {200, mine}})
	r = runCLI(t, f, nil, "consumer", "done", "work", "cyrec:1", "--next", "--wait", "1s")
	if r.code != 0 || !strings.Contains(r.stdout, "acked cyrec:1") || !strings.Contains(r.stdout, "no record available in did:x:bob CONSUMER:work") {
		t.Fatalf("done --next: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if b := f.reqs[1].Body; field(t, b, "next.wait_ms") != 1000.0 || field(t, b, "result.ok") != true {
		t.Fatalf("done --next body %v", b)
	}
	f = newFakeServer(t, map[string]reply{"GET /v1/records/cyrec:1": {200, recordJSON}})
	if r := runCLI(t, f, nil, "consumer", "done", "work", "cyrec:1", "--next"); r.code != 1 || len(f.reqs) != 1 {
		t.Fatalf("done --next of another box's record: exit %d, %d requests", r.code, len(f.reqs))
	}
}

func TestParseKeep(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"720h": 720 * time.Hour, "30d": 30 * day, "30D": 30 * day, "1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour,
		"90m": 90 * time.Minute, "1s": time.Second, " 7d ": 7 * day, "off": -1, "Forever": -1, "0d1h": time.Hour,
	} {
		got, err := parseKeep("--x", in)
		if err != nil || got != want {
			t.Errorf("parseKeep(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "0d", "-1h", "-1d", "1d-2h", "d", "5", "soon", "5d5d", "1e3d", "100001d", "1d+1h", "0.1ns"} {
		if got, err := parseKeep("--x", in); err == nil {
			t.Errorf("parseKeep(%q) = %v, want an error", in, got)
		} else if !strings.HasPrefix(err.Error(), "--x") {
			t.Errorf("parseKeep(%q): error %q does not name the flag", in, err)
		}
	}
}

func TestParseRetention(t *testing.T) {
	got, err := parseRetention("--retention", "INBOX=720h, consumer=1d,TUNNEL_OUTBOX=off,,")
	want := map[model.BoxKind]time.Duration{model.Inbox: 720 * time.Hour, model.ConsumerFamily: 24 * time.Hour, model.TunnelOutbox: -1}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := parseRetention("--retention", ""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for in, msg := range map[string]string{
		"INBOX":              `"INBOX" is not FAMILY=DURATION`,
		"INBOX=1d,inbox=2d":  "INBOX is given twice",
		"CONSUMER:work=1d":   `unknown box family "CONSUMER:work"`,
		"OUTBOX=":            "--retention OUTBOX: a duration is required",
		"GROUP_INBOX=-5h":    `--retention GROUP_INBOX "-5h"`,
		"REQUEST_BOX=forevr": `--retention REQUEST_BOX "forevr"`,
	} {
		if _, err := parseRetention("--retention", in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseRetention(%q) = %v, want an error with %q", in, err, msg)
		}
	}
}

// The serve flags, then their environment variables, make the core's
// policy.
func TestRetentionFlagsConfig(t *testing.T) {
	parse := func(env map[string]string, argv ...string) (core.RetentionConfig, error) {
		t.Helper()
		g := &globals{getenv: func(k string) string { return env[k] }}
		cmd := newServeCmd(g)
		if err := cmd.ParseFlags(argv); err != nil {
			t.Fatal(err)
		}
		var rf retentionFlags
		rf.terminal, _ = cmd.Flags().GetString("retention")
		rf.events, _ = cmd.Flags().GetString("retention-events")
		rf.interval, _ = cmd.Flags().GetString("retention-interval")
		rf.disabled, _ = cmd.Flags().GetBool("no-retention")
		return rf.config(cmd, g)
	}
	cfg, err := parse(nil)
	if err != nil || len(cfg.Terminal) != 0 || cfg.Events != 30*24*time.Hour || cfg.Interval != time.Minute || cfg.Disabled {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	cfg, err = parse(nil, "--retention", "INBOX=90d", "--retention-events", "off", "--retention-interval", "30s", "--no-retention")
	if err != nil || cfg.Terminal[model.Inbox] != 90*24*time.Hour || cfg.Events != -1 || cfg.Interval != 30*time.Second || !cfg.Disabled {
		t.Fatalf("flags: %+v %v", cfg, err)
	}
	env := map[string]string{envRetention: "CONSUMER=2h", envRetentionEvents: "7d", envRetentionInterval: "5m", envNoRetention: "true"}
	cfg, err = parse(env)
	if err != nil || cfg.Terminal[model.ConsumerFamily] != 2*time.Hour || cfg.Events != 7*24*time.Hour || cfg.Interval != 5*time.Minute || !cfg.Disabled {
		t.Fatalf("env: %+v %v", cfg, err)
	}
	cfg, err = parse(env, "--retention", "OUTBOX=1d", "--no-retention=false")
	if err != nil || len(cfg.Terminal) != 1 || cfg.Terminal[model.Outbox] != 24*time.Hour || cfg.Disabled {
		t.Fatalf("flags beat env: %+v %v", cfg, err)
	}
	if _, err := parse(map[string]string{envNoRetention: "maybe"}); err == nil || !strings.Contains(err.Error(), envNoRetention) {
		t.Fatalf("bad %s: %v", envNoRetention, err)
	}
	if _, err := parse(map[string]string{envRetentionEvents: "never"}); err == nil || !strings.Contains(err.Error(), envRetentionEvents) {
		t.Fatalf("bad %s: %v", envRetentionEvents, err)
	}
}

func TestRetentionShowAndRun(t *testing.T) {
	f := newFakeServer(t, map[string]reply{
		"GET /v1/admin/retention":      {200, `{"terminal_ms":{"INBOX":2592000000,"CONSUMER":3600000,"TUNNEL_OUTBOX":0},"events_ms":604800000,"interval_ms":60000,"enabled":true}`},
		"POST /v1/admin/retention/run": {200, `{"records":{"CONSUMER":2,"INBOX":1},"messages":1,"events":0}`},
	})
	r := runCLI(t, f, nil, "retention", "show")
	for _, want := range []string{"INBOX", "30d", "CONSUMER", "1h0m0s", "TUNNEL_OUTBOX", "forever", "events kept 7d", "every 1m0s"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("retention show lacks %q: exit %d stdout %q stderr %q", want, r.code, r.stdout, r.stderr)
		}
	}
	if strings.Index(r.stdout, "INBOX") > strings.Index(r.stdout, "CONSUMER") {
		t.Errorf("families out of order:\n%s", r.stdout)
	}
	r = runCLI(t, f, nil, "retention", "run")
	if r.code != 0 || !strings.Contains(r.stdout, "purged 3 records (INBOX 1, CONSUMER 2), 1 message body, 0 events") {
		t.Fatalf("retention run: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// cliServer is a real server (server.Run) on a temporary data directory.
type cliServer struct {
	url, data string
}

func startCLIServer(t *testing.T, ret core.RetentionConfig) *cliServer {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := server.Run(ctx, server.Config{DataDir: dir, Listen: "127.0.0.1:0", Ready: func(a string) { addr <- a },
			Logger: slog.New(slog.DiscardHandler), Core: core.Config{Retention: ret}})
		if err != nil {
			t.Errorf("server: %v", err)
			addr <- ""
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	a := <-addr
	if a == "" {
		t.FailNow()
	}
	return &cliServer{url: "http://" + a, data: dir}
}

// cli runs a command line against s with token (the admin token of the data
// directory when empty).
func (s *cliServer) cli(t *testing.T, token string, argv ...string) result {
	t.Helper()
	return s.cliCtx(context.Background(), token, argv...)
}

func (s *cliServer) cliCtx(ctx context.Context, token string, argv ...string) result {
	full := append([]string{"--server", s.url, "--data", s.data}, argv...)
	if token != "" {
		full = append(full, "--token", token)
	}
	var out, errb bytes.Buffer
	code := run(ctx, full, stdio{in: strings.NewReader(""), out: &out, err: &errb}, func(string) string { return "" })
	return result{code, out.String(), errb.String()}
}

func (s *cliServer) ok(t *testing.T, token string, argv ...string) string {
	t.Helper()
	r := s.cli(t, token, argv...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d stderr %q", argv, r.code, r.stderr)
	}
	return r.stdout
}

func jsonOut[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, s, err)
	}
	return v
}

// The seed-002 workflow end to end against a real server: create, fan-out,
// sync with and without the cursor, claim/done/fail, read, list, ack,
// retention, delete.
func TestConsumerCLIEndToEnd(t *testing.T) {
	s := startCLIServer(t, core.RetentionConfig{Terminal: map[model.BoxKind]time.Duration{model.Inbox: 90 * 24 * time.Hour}})
	alice := strings.TrimSpace(s.ok(t, "", "token", "create", "--did", "did:x:alice"))
	s.ok(t, alice, "consumer", "create", "work", "--source", "did:x:alice/INBOX", "--topic", "work")
	for _, m := range [][2]string{{"work", "w1 ship it"}, {"chat", "c1 lunch?"}, {"work", "w2 review"}} {
		s.ok(t, "", "send", "--from", "did:x:bob", "--to", "did:x:alice", "--topic", m[0], "--text", m[1])
	}
	deadline := time.Now().Add(10 * time.Second)
	for jsonOut[wire.ConsumerInfo](t, s.ok(t, alice, "consumer", "get", "work", "--json")).LastSeq < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no fan-out within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	out := s.ok(t, alice, "consumer", "sync", "work", "--peek")
	if !strings.Contains(out, "w1 ship it") || !strings.Contains(out, "w2 review") || strings.Contains(out, "lunch") ||
		!strings.Contains(out, "cursor stays at seq 0") || !strings.Contains(out, "from did:x:bob  topic work") {
		t.Fatalf("sync --peek:\n%s", out)
	}
	res := jsonOut[wire.SyncResult](t, s.ok(t, alice, "consumer", "sync", "work", "--limit", "1", "--json"))
	if len(res.Items) != 1 || res.LastSeq != 1 || len(res.Items[0].Msg) == 0 {
		t.Fatalf("sync --limit 1 --json: %+v", res)
	}
	// box stream on a consumer's box starts after its cursor (1) unless --after says otherwise.
	streamed := func(argv ...string) []string {
		// Cancelled like Ctrl-C, which ends a stream normally.
		ctx, cancel := context.WithCancel(context.Background())
		defer time.AfterFunc(500*time.Millisecond, cancel).Stop()
		r := s.cliCtx(ctx, alice, append([]string{"box", "stream", "did:x:alice", "consumer:work"}, argv...)...)
		if r.code != 0 {
			t.Fatalf("box stream %v: exit %d stderr %q", argv, r.code, r.stderr)
		}
		return strings.Split(strings.TrimSpace(r.stdout), "\n")
	}
	if lines := streamed(); len(lines) != 1 || !strings.HasPrefix(lines[0], "2\t") {
		t.Fatalf("box stream of consumer:work without --after: %q", lines)
	}
	if lines := streamed("--after", "0"); len(lines) != 2 || !strings.HasPrefix(lines[0], "1\t") {
		t.Fatalf("box stream of consumer:work --after 0: %q", lines)
	}
	if out := s.ok(t, alice, "consumer", "sync", "work"); !strings.Contains(out, "w2 review") || strings.Contains(out, "w1") ||
		!strings.Contains(out, "acknowledged through seq 2") {
		t.Fatalf("sync after the cursor:\n%s", out)
	}
	if out := s.ok(t, alice, "consumer", "sync", "work"); !strings.Contains(out, "nothing new after seq 2") {
		t.Fatalf("sync with nothing new:\n%s", out)
	}

	first := jsonOut[wire.RecordWithMsg](t, s.ok(t, alice, "consumer", "claim", "work", "--lease", "1m", "--json"))
	if first.Record.BoxKind != "CONSUMER:work" || first.Record.State != model.Reading || first.Record.Lease == nil {
		t.Fatalf("claim: %+v", first.Record)
	}
	s.ok(t, alice, "consumer", "done", "work", first.Record.RecordID, "--lease-id", first.Record.Lease.ID)
	out = s.ok(t, alice, "consumer", "claim", "work")
	if !strings.Contains(out, "ack with:  msgcenter consumer done work ") {
		t.Fatalf("claim hint:\n%s", out)
	}
	held := jsonOut[wire.ListResult](t, s.ok(t, alice, "consumer", "list", "work", "--state", "READING", "--json"))
	if len(held.Items) != 1 {
		t.Fatalf("held records: %+v", held)
	}
	id := held.Items[0].Record.RecordID
	s.ok(t, alice, "consumer", "fail", "work", id, "--error", "boom", "--lease-id", held.Items[0].Record.Lease.ID)
	if out := s.ok(t, alice, "consumer", "read", "work", id); !strings.Contains(out, "DEAD") || !strings.Contains(out, "boom") ||
		!strings.Contains(out, "w2 review") {
		t.Fatalf("read:\n%s", out)
	}
	if out := s.ok(t, alice, "consumer", "list"); !strings.Contains(out, "work") || !strings.Contains(out, "topic=work") {
		t.Fatalf("list:\n%s", out)
	}
	if out := s.ok(t, alice, "consumer", "ack", "work", "1"); !strings.Contains(out, "cursor at seq 2 of 2") {
		t.Fatalf("ack never moves back:\n%s", out)
	}
	// The admin token sees everyone's consumers: NAME is found without --owner.
	if ci := jsonOut[wire.ConsumerInfo](t, s.ok(t, "", "consumer", "get", "work", "--json")); ci.Owner != "did:x:alice" || ci.AckedSeq != 2 {
		t.Fatalf("admin get: %+v", ci)
	}
	if r := s.cli(t, alice, "consumer", "read", "other", id); r.code != 1 || !strings.Contains(r.stderr, "not in consumer other's box") {
		t.Fatalf("read under another name: exit %d stderr %q", r.code, r.stderr)
	}

	if out := s.ok(t, "", "retention", "show"); !strings.Contains(out, "90d") || !strings.Contains(out, "30d") {
		t.Fatalf("retention show:\n%s", out)
	}
	if r := s.cli(t, alice, "retention", "run"); r.code != 1 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("retention run as alice: exit %d stderr %q", r.code, r.stderr)
	}
	// The acknowledged record read goes; the dead letter stays, listed
	// and redrivable, until its family's period.
	if out := s.ok(t, "", "retention", "run"); !strings.Contains(out, "purged 1 record (CONSUMER 1)") {
		t.Fatalf("retention run:\n%s", out)
	}
	if out := s.ok(t, alice, "consumer", "read", "work", id); !strings.Contains(out, "DEAD") {
		t.Fatalf("the dead letter after retention:\n%s", out)
	}
	if out := s.ok(t, alice, "consumer", "delete", "work"); !strings.Contains(out, "deleted consumer work of did:x:alice") {
		t.Fatalf("delete:\n%s", out)
	}
	if r := s.cli(t, alice, "consumer", "get", "work"); r.code != 1 {
		t.Fatalf("get after delete: exit %d", r.code)
	}
}
