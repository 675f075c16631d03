package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// seen is one request as the fake server received it.
type seen struct {
	Method  string
	RawPath string // escaped path, exactly as sent on the wire
	Query   url.Values
	Body    string
	Auth    string
	CType   string
}

// fake answers every request with status and body and records it.
type fake struct {
	t      *testing.T
	srv    *httptest.Server
	status int
	body   string
	got    []seen
}

func newFake(t *testing.T, status int, body string) (*fake, *Client) {
	t.Helper()
	f := &fake{t: t, status: status, body: body}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.got = append(f.got, seen{
			Method: r.Method, RawPath: r.URL.EscapedPath(), Query: r.URL.Query(),
			Body: string(b), Auth: r.Header.Get("Authorization"), CType: r.Header.Get("Content-Type"),
		})
		if f.status != http.StatusNoContent {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(f.status)
		if f.status != http.StatusNoContent {
			io.WriteString(w, f.body)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f, New(f.srv.URL+"/", "tok-1")
}

func (f *fake) last() seen {
	f.t.Helper()
	if len(f.got) != 1 {
		f.t.Fatalf("server saw %d requests, want 1", len(f.got))
	}
	return f.got[0]
}

// jsonEq fails unless got and want are the same JSON value.
func jsonEq(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("body = %s\nwant   %s", got, want)
	}
}

func i64(v int64) *int64 { return &v }
func bptr(v bool) *bool  { return &v }

func TestPostSendRequestAndResult(t *testing.T) {
	f, c := newFake(t, 200, `{"ok":true,"msg_id":"cymsg:ab","deliveries":[{"tunnel_did":"did:t:tg","record_id":"cyrec:1","target_did":"did:x:bob","priority":2}],"scheduled_delivery_time":"2030-01-01T00:00:00Z"}`)
	res, err := c.PostSend(context.Background(), &wire.PostSendRequest{
		Msg:            &message.Message{From: "did:x:alice", To: []string{"did:x:bob"}, Content: message.Content{Content: "hi"}},
		SendCtx:        &wire.SendCtx{TunnelDID: "did:t:tg"},
		IdempotencyKey: "k1",
		DelayMS:        i64(10000),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "POST" || r.RawPath != "/v1/post_send" {
		t.Fatalf("got %s %s", r.Method, r.RawPath)
	}
	if r.Auth != "Bearer tok-1" || r.CType != "application/json" {
		t.Fatalf("auth %q content-type %q", r.Auth, r.CType)
	}
	jsonEq(t, r.Body, `{"msg":{"from":"did:x:alice","to":["did:x:bob"],"content":{"content":"hi"}},"send_ctx":{"tunnel_did":"did:t:tg"},"idempotency_key":"k1","delay_ms":10000}`)
	if res.MsgID != "cymsg:ab" || len(res.Deliveries) != 1 || res.Deliveries[0].Priority != 2 || res.ScheduledDeliveryTime == "" {
		t.Fatalf("result %+v", res)
	}
}

// A request's JSON keeps <, > and & as they are (a message of HTML would
// otherwise grow sixfold on the wire, over the server's body limit),
// also inside a message's own JSON encoding.
func TestRequestsAreNotHTMLEscaped(t *testing.T) {
	f, c := newFake(t, 200, `{"ok":true,"msg_id":"cymsg:ab"}`)
	html := "<tr><td>a & b</td></tr>"
	_, err := c.PostSend(context.Background(), &wire.PostSendRequest{
		Msg: &message.Message{From: "did:x:alice", To: []string{"did:x:bob"}, Content: message.Content{Content: html, Format: "text/html"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := f.last().Body; !strings.Contains(b, html) || strings.Contains(b, `\u003c`) {
		t.Fatalf("body %s; want the HTML as it is", b)
	}
}

func TestPathSegmentsAreEscaped(t *testing.T) {
	const owner = "did:web:example.com/users/al ice"
	cases := []struct {
		name string
		call func(c *Client) error
		want string
	}{
		{"next", func(c *Client) error { _, err := c.Next(context.Background(), owner, model.Inbox, nil); return err },
			"/v1/boxes/did:web:example.com%2Fusers%2Fal%20ice/INBOX/next"},
		{"record", func(c *Client) error { _, err := c.GetRecord(context.Background(), "cyrec:a/b", true); return err },
			"/v1/records/cyrec:a%2Fb"},
		{"block", func(c *Client) error { _, err := c.Block(context.Background(), owner, "did:x:b?c"); return err },
			"/v1/contacts/did:web:example.com%2Fusers%2Fal%20ice/blocks/did:x:b%3Fc"},
		{"routes", func(c *Client) error { _, err := c.GetRoutes(context.Background(), "did:x:a/b"); return err },
			"/v1/routes/did:x:a%2Fb"},
		{"group", func(c *Client) error { _, err := c.GetSubscribers(context.Background(), "did:g:a/b"); return err },
			"/v1/groups/did:g:a%2Fb/subscribers"},
		{"conversations", func(c *Client) error {
			_, err := c.Conversations(context.Background(), wire.ConversationQuery{Owner: "did:x:%"})
			return err
		},
			"/v1/owners/did:x:%25/conversations"},
		{"message", func(c *Client) error { _, err := c.GetMessage(context.Background(), "cymsg:ab#x"); return err },
			"/v1/messages/cymsg:ab%23x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, 200, `{}`)
			if err := tc.call(c); err != nil {
				t.Fatal(err)
			}
			if got := f.last().RawPath; got != tc.want {
				t.Fatalf("path %s, want %s", got, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	t.Run("204 means nothing", func(t *testing.T) {
		f, c := newFake(t, http.StatusNoContent, "")
		got, err := c.Next(context.Background(), "did:x:a", model.TunnelOutbox, &wire.NextRequest{
			StateFilter: []model.State{model.Wait}, LockOnTake: bptr(false), LeaseMS: 30000, WaitMS: 10000,
		})
		if err != nil || got != nil {
			t.Fatalf("got %v, %v; want nil, nil", got, err)
		}
		r := f.last()
		if r.Method != "POST" || r.RawPath != "/v1/boxes/did:x:a/TUNNEL_OUTBOX/next" {
			t.Fatalf("got %s %s", r.Method, r.RawPath)
		}
		jsonEq(t, r.Body, `{"state_filter":["WAIT"],"lock_on_take":false,"lease_ms":30000,"wait_ms":10000}`)
	})
	t.Run("200 carries the record", func(t *testing.T) {
		_, c := newFake(t, 200, `{"record":{"record_id":"cyrec:1","state":"READING","lease":{"lease_id":"L1","expires_at_ms":5}},"msg":{"from":"did:x:b","content":{"content":"yo"}}}`)
		got, err := c.Next(context.Background(), "did:x:a", model.Inbox, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Record.RecordID != "cyrec:1" || got.Record.Lease == nil || got.Record.Lease.ID != "L1" {
			t.Fatalf("record %+v", got.Record)
		}
		m, err := DecodeMessage(got.Msg)
		if err != nil || m.Content.Content != "yo" {
			t.Fatalf("msg %+v, %v", m, err)
		}
	})
}

func TestListQuery(t *testing.T) {
	f, c := newFake(t, 200, `{"items":[{"record":{"record_id":"r1"}}],"next_cursor_sort_key":7,"next_cursor_record_id":"r1"}`)
	res, err := c.List(context.Background(), wire.ListQuery{
		Owner: "did:x:a", Box: model.Inbox, States: []model.State{model.Unread, model.Reading},
		Tag: "t1", CursorSortKey: 9, CursorRecordID: "r0", Limit: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.Method != "GET" || r.RawPath != "/v1/boxes/did:x:a/INBOX/records" || r.Body != "" {
		t.Fatalf("got %s %s body %q", r.Method, r.RawPath, r.Body)
	}
	want := url.Values{"state": {"UNREAD,READING"}, "tag": {"t1"}, "order": {"asc"},
		"cursor_sort_key": {"9"}, "cursor_record_id": {"r0"}, "limit": {"5"}, "with_object": {"false"}}
	if !reflect.DeepEqual(r.Query, want) {
		t.Fatalf("query %v\nwant  %v", r.Query, want)
	}
	if len(res.Items) != 1 || res.NextCursorSortKey != 7 || res.NextCursorRecordID != "r1" {
		t.Fatalf("result %+v", res)
	}

	f, c = newFake(t, 200, `{"items":[]}`)
	if _, err := c.List(context.Background(), wire.ListQuery{Owner: "o", Box: model.Outbox, Desc: true, WithObject: true}); err != nil {
		t.Fatal(err)
	}
	want = url.Values{"order": {"desc"}, "with_object": {"true"}}
	if q := f.last().Query; !reflect.DeepEqual(q, want) {
		t.Fatalf("query %v, want %v", q, want)
	}
}

func TestSyncQuery(t *testing.T) {
	f, c := newFake(t, 200, `{"items":[],"last_seq":42}`)
	res, err := c.Sync(context.Background(), wire.SyncQuery{Owner: "o", Box: model.GroupInbox, AfterSeq: 40, Limit: 2, ThreadKey: "th", WithObject: true})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last()
	want := url.Values{"after_seq": {"40"}, "limit": {"2"}, "thread_key": {"th"}, "with_object": {"true"}}
	if r.RawPath != "/v1/boxes/o/GROUP_INBOX/sync" || !reflect.DeepEqual(r.Query, want) {
		t.Fatalf("got %s ? %v", r.RawPath, r.Query)
	}
	if res.LastSeq != 42 {
		t.Fatalf("last_seq %d", res.LastSeq)
	}
}

func TestRecordActions(t *testing.T) {
	rec := `{"record":{"record_id":"r1","state":"WAIT"}}`
	cases := []struct {
		name             string
		call             func(c *Client) (*wire.RecordWithMsg, error)
		method, path, bd string
	}{
		{"state", func(c *Client) (*wire.RecordWithMsg, error) {
			r, err := c.SetState(context.Background(), "r1", &wire.StateRequest{NewState: model.Archived, Reason: "done", LeaseID: "L"})
			if err != nil {
				return nil, err
			}
			return &r.RecordWithMsg, nil
		}, "POST", "/v1/records/r1/state", `{"new_state":"ARCHIVED","reason":"done","lease_id":"L"}`},
		{"ack", func(c *Client) (*wire.RecordWithMsg, error) {
			return c.Ack(context.Background(), "r1", "L", "ext-9")
		}, "POST", "/v1/records/r1/delivery", `{"result":{"ok":true,"external_msg_id":"ext-9"},"lease_id":"L"}`},
		{"fail", func(c *Client) (*wire.RecordWithMsg, error) {
			return c.Fail(context.Background(), "r1", "", wire.DeliveryResult{OK: true, ErrorCode: "rate", Retryable: true, RetryAfterMS: 5000})
		}, "POST", "/v1/records/r1/delivery", `{"result":{"ok":false,"error_code":"rate","retryable":true,"retry_after_ms":5000}}`},
		{"lease", func(c *Client) (*wire.RecordWithMsg, error) {
			return c.ExtendLease(context.Background(), "r1", &wire.LeaseRequest{LeaseMS: 60000})
		}, "POST", "/v1/records/r1/lease", `{"lease_ms":60000}`},
		{"redrive", func(c *Client) (*wire.RecordWithMsg, error) {
			return c.RedriveRecord(context.Background(), "r1")
		}, "POST", "/v1/records/r1/redrive", `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, 200, rec)
			got, err := tc.call(c)
			if err != nil {
				t.Fatal(err)
			}
			r := f.last()
			if r.Method != tc.method || r.RawPath != tc.path {
				t.Fatalf("got %s %s", r.Method, r.RawPath)
			}
			jsonEq(t, r.Body, tc.bd)
			if got.Record.State != model.Wait {
				t.Fatalf("record %+v", got.Record)
			}
		})
	}
}

func TestGetRecordAndMessage(t *testing.T) {
	f, c := newFake(t, 200, `{"record":{"record_id":"r1"}}`)
	if _, err := c.GetRecord(context.Background(), "r1", false); err != nil {
		t.Fatal(err)
	}
	if q := f.last().Query.Get("with_object"); q != "false" {
		t.Fatalf("with_object=%q", q)
	}

	const body = `{"from":"did:x:a","to":["did:x:b"],"content":{"content":"hi","machine":{"n":1.50}},"future_field":1}`
	_, c = newFake(t, 200, body)
	raw, err := c.GetMessage(context.Background(), "cymsg:1")
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != body {
		t.Fatalf("raw message changed: %s", raw)
	}
	m, err := c.GetMessageObject(context.Background(), "cymsg:1")
	if err != nil {
		t.Fatal(err)
	}
	if m.From != "did:x:a" || string(m.Content.Machine) != `{"n":1.50}` {
		t.Fatalf("message %+v", m)
	}
	if _, err := DecodeMessage(nil); err == nil {
		t.Fatal("DecodeMessage(nil) should fail")
	}
}

func TestContactsAndAdmin(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name         string
		call         func(c *Client) error
		method, path string
		query        url.Values
		body         string // "" means no body
	}{
		{"receipt set", func(c *Client) error {
			_, err := c.SetReceipt(ctx, &wire.ReceiptRequest{GroupID: "g", MsgID: "m", ReaderDID: "r", Status: model.ReceiptReaded})
			return err
		}, "POST", "/v1/read_receipts", url.Values{}, `{"group_id":"g","msg_id":"m","reader_did":"r","status":"READED"}`},
		{"receipt list", func(c *Client) error {
			_, err := c.ListReceipts(ctx, wire.ReceiptQuery{MsgID: "m", Reader: "r", Limit: 3})
			return err
		}, "GET", "/v1/read_receipts", url.Values{"msg_id": {"m"}, "reader": {"r"}, "limit": {"3"}}, ""},
		{"subscribers set empty", func(c *Client) error { _, err := c.SetSubscribers(ctx, "g", nil); return err },
			"PUT", "/v1/groups/g/subscribers", url.Values{}, `{"subscribers":[]}`},
		{"subscribers set", func(c *Client) error { _, err := c.SetSubscribers(ctx, "g", []string{"a", "b"}); return err },
			"PUT", "/v1/groups/g/subscribers", url.Values{}, `{"subscribers":["a","b"]}`},
		{"unblock", func(c *Client) error { _, err := c.Unblock(ctx, "o", "d"); return err },
			"DELETE", "/v1/contacts/o/blocks/d", url.Values{}, ""},
		{"block", func(c *Client) error { _, err := c.Block(ctx, "o", "d"); return err },
			"PUT", "/v1/contacts/o/blocks/d", url.Values{}, ""},
		{"routes set", func(c *Client) error {
			_, err := c.SetRoutes(ctx, "d", []model.ContactRoute{{TunnelDID: "t", ChatID: "42", Priority: 1}})
			return err
		}, "PUT", "/v1/routes/d", url.Values{}, `{"routes":[{"tunnel_did":"t","chat_id":"42","priority":1}]}`},
		{"conversations", func(c *Client) error {
			_, err := c.Conversations(ctx, wire.ConversationQuery{Owner: "o", Limit: 20})
			return err
		},
			"GET", "/v1/owners/o/conversations", url.Values{"limit": {"20"}}, ""},
		{"events", func(c *Client) error {
			_, err := c.Events(ctx, wire.EventQuery{After: 5, Owner: "o", Limit: 10})
			return err
		},
			"GET", "/v1/events", url.Values{"after": {"5"}, "owner": {"o"}, "limit": {"10"}}, ""},
		{"scheduled", func(c *Client) error {
			_, err := c.Scheduled(ctx, wire.ScheduledQuery{Sender: "did:x:a", Recipient: "did:x:b", Limit: 5})
			return err
		},
			"GET", "/v1/scheduled", url.Values{"sender": {"did:x:a"}, "recipient": {"did:x:b"}, "limit": {"5"}}, ""},
		{"flush", func(c *Client) error { _, err := c.FlushScheduled(ctx, nil); return err },
			"POST", "/v1/scheduled/flush", url.Values{}, `{}`},
		{"cancel scheduled", func(c *Client) error { _, err := c.CancelScheduled(ctx, 7); return err },
			"DELETE", "/v1/scheduled/7", url.Values{}, ""},
		{"token", func(c *Client) error {
			_, err := c.CreateToken(ctx, &wire.TokenRequest{DID: "did:x:a", Role: model.RoleAgent})
			return err
		}, "POST", "/v1/tokens", url.Values{}, `{"did":"did:x:a","role":"agent"}`},
		{"box redrive", func(c *Client) error {
			_, err := c.RedriveBox(ctx, "t", model.TunnelOutbox, &wire.RedriveRequest{Limit: 50})
			return err
		}, "POST", "/v1/boxes/t/TUNNEL_OUTBOX/redrive", url.Values{}, `{"limit":50}`},
		{"dispatch", func(c *Client) error {
			_, err := c.Dispatch(ctx, &wire.DispatchRequest{Msg: &message.Message{From: "a"}, IngressCtx: &model.Route{Platform: "tg"}})
			return err
		}, "POST", "/v1/dispatch", url.Values{}, `{"msg":{"from":"a","content":{}},"ingress_ctx":{"platform":"tg"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, 200, `{}`)
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
			if r.Auth != "Bearer tok-1" {
				t.Fatalf("auth %q", r.Auth)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	f, c := newFake(t, 200, `{"status":"ok"}`)
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.RawPath != "/healthz" || r.Auth != "" {
		t.Fatalf("path %s auth %q (health must not send the token)", r.RawPath, r.Auth)
	}
	_, c = newFake(t, 200, `{"status":"starting"}`)
	if err := c.Health(context.Background()); err == nil {
		t.Fatal("non-ok status should be an error")
	}
}

func TestAPIError(t *testing.T) {
	f, c := newFake(t, 400, `{"error":{"code":"invalid_argument","message":"is required","field":"msg.from"}}`)
	_, err := c.PostSend(context.Background(), &wire.PostSendRequest{Msg: &message.Message{}})
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err %T %v, want *APIError", err, err)
	}
	if ae.Status != 400 || ae.Code != wire.CodeInvalid || ae.Field != "msg.from" || ae.Message != "is required" {
		t.Fatalf("APIError %+v", ae)
	}
	if got, want := ae.Error(), "msgcenter: 400 invalid_argument: msg.from: is required"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !IsInvalid(err) || IsNotFound(err) || !errors.Is(err, model.ErrInvalid) {
		t.Fatal("helpers disagree with the code")
	}
	if len(f.got) != 1 {
		t.Fatalf("%d requests", len(f.got))
	}

	cases := []struct {
		status int
		body   string
		is     func(error) bool
		sent   error
	}{
		{404, `{"error":{"code":"not_found","message":"record not found"}}`, IsNotFound, model.ErrNotFound},
		{409, `{"error":{"code":"invalid_transition","message":"x"}}`, IsInvalidTransition, model.ErrInvalidTransition},
		{409, `{"error":{"code":"lease_lost","message":"x"}}`, IsLeaseLost, model.ErrLeaseLost},
		{401, `{"error":{"code":"unauthorized","message":"x"}}`, IsUnauthorized, model.ErrUnauthorized},
		{403, `{"error":{"code":"forbidden","message":"x"}}`, IsForbidden, model.ErrForbidden},
		// Not a msgcenter body (a proxy page): the code comes from the status.
		{404, `<html>nope</html>`, IsNotFound, model.ErrNotFound},
		{502, ``, IsUnavailable, nil},
	}
	for _, tc := range cases {
		_, c := newFake(t, tc.status, tc.body)
		_, err := c.GetRecord(context.Background(), "r", false)
		if !tc.is(err) {
			t.Errorf("%d %s: helper false for %v", tc.status, tc.body, err)
		}
		if tc.sent != nil && !errors.Is(err, tc.sent) {
			t.Errorf("%d %s: errors.Is(%v) false", tc.status, tc.body, tc.sent)
		}
	}
	_, c = newFake(t, 502, ``)
	_, err = c.GetRecord(context.Background(), "r", false)
	if !strings.Contains(err.Error(), "Bad Gateway") {
		t.Errorf("empty error body should fall back to the status text: %v", err)
	}
	// Another server's page is named for what it is, cut short, not
	// printed whole.
	page := "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head><body>" + strings.Repeat("<p>Error code: 501</p>", 50) + "</body></html>"
	_, c = newFake(t, 501, page)
	_, err = c.GetRecord(context.Background(), "r", false)
	if msg := err.Error(); !strings.Contains(msg, "501 Not Implemented") || !strings.Contains(msg, "is the URL a msgcenter server") ||
		strings.Contains(msg, "\n") || len(msg) > 400 {
		t.Errorf("another server's HTML page: %q", msg)
	}
	if ErrorCode(errors.New("plain")) != "" {
		t.Error("ErrorCode of a plain error should be empty")
	}
}

func TestBaseURLPrefixAndNoToken(t *testing.T) {
	f, _ := newFake(t, 200, `{"items":[]}`)
	c := New(f.srv.URL+"/prefix/", "")
	if _, err := c.Events(context.Background(), wire.EventQuery{}); err != nil {
		t.Fatal(err)
	}
	r := f.last()
	if r.RawPath != "/prefix/v1/events" || r.Auth != "" || len(r.Query) != 0 {
		t.Fatalf("got %s ? %v auth %q", r.RawPath, r.Query, r.Auth)
	}
}

func TestEmptySuccessBodyIsAnError(t *testing.T) {
	_, c := newFake(t, 200, ``)
	if _, err := c.GetRecord(context.Background(), "r", false); err == nil || !strings.Contains(err.Error(), "empty response") {
		t.Fatalf("err = %v", err)
	}
}

func TestWithHTTPClient(t *testing.T) {
	f, _ := newFake(t, 200, `{"status":"ok"}`)
	var used bool
	h := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	c := New(f.srv.URL, "t", WithHTTPClient(h), WithUserAgent("ua-test"))
	if err := c.Health(context.Background()); err != nil || !used {
		t.Fatalf("err %v, custom client used %v", err, used)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
