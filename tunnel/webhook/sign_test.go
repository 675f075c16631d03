package webhook

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"1"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := Sign(key, now, body)
	h := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
		at   time.Time
		ok   bool
	}{
		{"good", h(HeaderTimestamp, ts, HeaderSignature, sig), body, now, true},
		{"clock within the skew", h(HeaderTimestamp, ts, HeaderSignature, sig), body, now.Add(MaxSkew), true},
		{"rotating secrets", h(HeaderTimestamp, ts, HeaderSignature, "v1=00ff, "+sig), body, now, true},
		{"body changed", h(HeaderTimestamp, ts, HeaderSignature, sig), []byte(`{"id":"2"}`), now, false},
		{"timestamp changed", h(HeaderTimestamp, strconv.FormatInt(now.Unix()+1, 10), HeaderSignature, sig), body, now, false},
		{"too old", h(HeaderTimestamp, ts, HeaderSignature, sig), body, now.Add(MaxSkew + time.Second), false},
		{"from the future", h(HeaderTimestamp, ts, HeaderSignature, sig), body, now.Add(-MaxSkew - time.Second), false},
		{"no timestamp", h(HeaderSignature, sig), body, now, false},
		{"timestamp not a number", h(HeaderTimestamp, "soon", HeaderSignature, sig), body, now, false},
		{"no signature", h(HeaderTimestamp, ts), body, now, false},
		{"another scheme", h(HeaderTimestamp, ts, HeaderSignature, "v0="+sig[3:]), body, now, false},
		{"not hex", h(HeaderTimestamp, ts, HeaderSignature, "v1=zz"), body, now, false},
	} {
		err := Verify(key, c.h, c.body, c.at)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrSignature)) {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if Verify([]byte("another-secret-of-16"), h(HeaderTimestamp, ts, HeaderSignature, sig), body, now) == nil {
		t.Error("another secret verified")
	}
	if Verify(nil, h(HeaderTimestamp, ts, HeaderSignature, Sign(nil, now, body)), body, now) == nil {
		t.Error("an empty secret verified a post signed with it")
	}
	two := h(HeaderTimestamp, ts)
	two.Add(HeaderSignature, "v1=00")
	two.Add(HeaderSignature, sig)
	if err := Verify(key, two, body, now); err != nil {
		t.Errorf("a signature in a second header line: %v", err)
	}
}

func TestCheckSecret(t *testing.T) {
	t.Parallel()
	if CheckSecret([]byte("  short   ")) == nil || CheckSecret([]byte("0123456789abcde ")) == nil {
		t.Error("a short secret passed")
	}
	if err := CheckSecret([]byte("0123456789abcdef")); err != nil {
		t.Error(err)
	}
}
