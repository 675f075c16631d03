package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func TestConsumerCalls(t *testing.T) {
	ctx := context.Background()
	const owner = "did:web:example.com/ann"
	cases := []struct {
		name         string
		status       int
		call         func(c *Client) error
		method, path string
		query        url.Values
		body         string // "" means no body
	}{
		{"create", 201, func(c *Client) error {
			res, err := c.CreateConsumer(ctx, &wire.ConsumerRequest{Name: "work", SourceOwner: owner, SourceBox: "INBOX",
				Filter: model.ConsumerFilter{Topic: []string{"t"}}, Start: wire.StartNow})
			if err == nil && (res.Name != "work" || res.Box != "CONSUMER:work") {
				t.Errorf("decoded %+v", res)
			}
			return err
		}, "POST", "/v1/consumers", url.Values{}, `{"name":"work","source_owner":"did:web:example.com/ann","source_box":"INBOX","filter":{"topic":["t"]},"start":"now"}`},
		{"list mine", 200, func(c *Client) error { _, err := c.ListConsumers(ctx, ""); return err },
			"GET", "/v1/consumers", url.Values{}, ""},
		{"list owner", 200, func(c *Client) error { _, err := c.ListConsumers(ctx, owner); return err },
			"GET", "/v1/consumers", url.Values{"owner": {owner}}, ""},
		{"get", 200, func(c *Client) error { _, err := c.GetConsumer(ctx, owner, "work"); return err },
			"GET", "/v1/consumers/did:web:example.com%2Fann/work", url.Values{}, ""},
		{"delete", 204, func(c *Client) error { return c.DeleteConsumer(ctx, owner, "work") },
			"DELETE", "/v1/consumers/did:web:example.com%2Fann/work", url.Values{}, ""},
		{"ack", 200, func(c *Client) error { _, err := c.AckConsumer(ctx, owner, "work", 0); return err },
			"POST", "/v1/consumers/did:web:example.com%2Fann/work/ack", url.Values{}, `{"seq":0}`},
		{"retention policy", 200, func(c *Client) error { _, err := c.RetentionPolicy(ctx); return err },
			"GET", "/v1/admin/retention", url.Values{}, ""},
		{"retention run", 200, func(c *Client) error { _, err := c.RunRetention(ctx); return err },
			"POST", "/v1/admin/retention/run", url.Values{}, `{}`},
		{"claim in a consumer's box", 204, func(c *Client) error {
			_, err := c.Next(ctx, owner, model.ConsumerBox("work"), nil)
			return err
		}, "POST", "/v1/boxes/did:web:example.com%2Fann/CONSUMER:work/next", url.Values{}, `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, tc.status, `{"name":"work","box":"CONSUMER:work"}`)
			if err := tc.call(c); err != nil {
				t.Fatal(err)
			}
			r := f.last()
			if r.Method != tc.method || r.RawPath != tc.path || !reflect.DeepEqual(r.Query, tc.query) {
				t.Fatalf("got %s %s ? %v", r.Method, r.RawPath, r.Query)
			}
			if tc.body == "" {
				if r.Body != "" {
					t.Fatalf("unexpected body %q", r.Body)
				}
			} else {
				jsonEq(t, r.Body, tc.body)
			}
		})
	}
}

// StreamConsumer sends no cursor on its first connection, so the server
// starts after the consumer's; StreamBox with a cursor sends it.
func TestStreamConsumerSendsNoCursor(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("id: 4\ndata: {\"seq\":4,\"record\":{\"seq\":4}}\n\n"))
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	stop := errors.New("stop")
	var seqs []int64
	err := c.StreamConsumer(context.Background(), "did:x:a", "feed", func(f wire.StreamFrame) error {
		seqs = append(seqs, f.Seq)
		return stop
	})
	if !errors.Is(err, stop) || !reflect.DeepEqual(seqs, []int64{4}) {
		t.Fatalf("StreamConsumer: %v %v", seqs, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].URL.EscapedPath() != "/v1/boxes/did:x:a/CONSUMER:feed/stream" ||
		got[0].URL.RawQuery != "" || got[0].Header.Get("Last-Event-ID") != "" {
		t.Fatalf("request %s ? %q Last-Event-ID %q", got[0].URL.EscapedPath(), got[0].URL.RawQuery, got[0].Header.Get("Last-Event-ID"))
	}
	mu.Unlock()
	_ = c.StreamBox(context.Background(), "did:x:a", model.Inbox, 0, func(wire.StreamFrame) error { return stop })
	mu.Lock()
	// The cursor is the parameter alone: a header would win over it.
	if r := got[1]; r.URL.RawQuery != "after_seq=0" || r.Header.Get("Last-Event-ID") != "" {
		t.Fatalf("StreamBox from 0: ? %q Last-Event-ID %q", r.URL.RawQuery, r.Header.Get("Last-Event-ID"))
	}
}
