package main

// How the CLI reports mistakes: usage errors, the API's refusals (as text
// and as JSON) and network trouble, each with a hint that says what to fix.

import (
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/wire"
)

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
