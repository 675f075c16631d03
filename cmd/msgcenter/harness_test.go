package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
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
