package webhook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/tunnel"
)

func TestOutcome(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		status    int
		hdr       http.Header
		body      string
		ext       string
		code      string // "" = delivered
		retryable bool
		after     time.Duration
	}{
		{"200 with a string id", 200, nil, `{"id":"abc"}`, "abc", "", false, 0},
		{"201 with a number id", 201, nil, `{"id": 42}`, "42", "", false, 0},
		{"204 no body", 204, nil, ``, "", "", false, 0},
		{"200 not JSON", 200, nil, `ok`, "", "", false, 0},
		{"429 seconds", 429, http.Header{"Retry-After": {"7"}}, `slow down`, "", "http_429", true, 7 * time.Second},
		{"503 date", 503, http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, ``, "", "http_503", true, 90 * time.Second},
		{"503 date passed", 503, http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, ``, "", "http_503", true, 0},
		{"429 garbage", 429, http.Header{"Retry-After": {"soon"}}, ``, "", "http_429", true, 0},
		{"429 huge", 429, http.Header{"Retry-After": {"99999999"}}, ``, "", "http_429", true, 24 * time.Hour},
		{"500", 500, nil, `boom`, "", "http_500", true, 0},
		{"502 with Retry-After", 502, http.Header{"Retry-After": {"3"}}, ``, "", "http_502", true, 3 * time.Second},
		{"an id too long to keep", 200, nil, `{"id":"` + strings.Repeat("x", 300) + `"}`, "", "", false, 0},
		{"408", 408, nil, ``, "", "http_408", true, 0},
		{"302", 302, http.Header{"Location": {"https://elsewhere"}}, ``, "", "http_302", false, 0},
		{"400", 400, nil, `bad`, "", "http_400", false, 0},
		{"410", 410, nil, ``, "", "http_410", false, 0},
	} {
		resp := &http.Response{StatusCode: c.status, Header: c.hdr}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		ext, err := outcome(resp, []byte(c.body), now)
		if c.code == "" {
			if err != nil || ext != c.ext {
				t.Errorf("%s: %q %v, want %q delivered", c.name, ext, err, c.ext)
			}
			continue
		}
		var e *tunnel.Error
		if !errors.As(err, &e) || e.Code != c.code || e.Retryable != c.retryable || e.RetryAfter != c.after {
			t.Errorf("%s: %#v, want code %s retryable %v after %v", c.name, err, c.code, c.retryable, c.after)
		}
	}
}

func TestSnippet(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300) + "\xff"
	s := snippet([]byte(long))
	if !strings.HasSuffix(s, "…") || len([]rune(s)) != 201 || strings.ContainsRune(s, 0xFFFD) {
		t.Fatalf("snippet %q", s)
	}
}
