package main

import (
	"strings"
	"testing"
)

func TestPresence(t *testing.T) {
	const path = "/v1/owners/did:web:example.com%2Fbob/presence"
	f := newFakeServer(t, map[string]reply{"GET " + path: {200, `{"owner":"did:web:example.com/bob","online":true,"streams":2}`}})
	r := runCLI(t, f, nil, "presence", "did:web:example.com/bob")
	if r.code != 0 || !strings.Contains(r.stdout, "did:web:example.com/bob is online (2 open streams)") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, f, nil, "presence")
	if r.code != 2 {
		t.Fatalf("missing OWNER: exit %d, want 2 (usage)", r.code)
	}
}
