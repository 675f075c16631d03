// Package webhook is a tunnel for any system that speaks HTTP. Inbound, it
// takes signed JSON posts (Handler) and dispatches them as messages;
// outbound, it delivers each message as a signed JSON post to the URL its
// route names (Sender), with the server's retries and dead letters behind
// it.
//
// Both directions sign the same way, so one shared secret serves both:
//
//	X-Msgcenter-Timestamp: <unix seconds>
//	X-Msgcenter-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
// A receiver checks the signature over the exact bytes it got and refuses
// a timestamp more than five minutes off, which bounds replays.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed request.
const (
	HeaderTimestamp = "X-Msgcenter-Timestamp"
	HeaderSignature = "X-Msgcenter-Signature"
)

// MaxSkew is how far a signed request's timestamp may be from the
// receiver's clock.
const MaxSkew = 5 * time.Minute

// MinSecretBytes is the shortest secret accepted: a shorter one is
// guessable.
const MinSecretBytes = 16

// Sign returns the signature header's value for body sent at ts.
func Sign(secret []byte, ts time.Time, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), body))
}

// SignRequest sets the timestamp and signature headers of r for body.
func SignRequest(r *http.Request, secret []byte, now time.Time, body []byte) {
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	r.Header.Set(HeaderSignature, Sign(secret, now, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// ErrSignature is a request whose signature does not check out.
var ErrSignature = errors.New("webhook: bad signature")

// Verify checks the headers of a request that carried body, received at
// now. The signature header may list several comma-separated v1= values
// (a sender rotating its secret signs with both).
func Verify(secret []byte, h http.Header, body []byte, now time.Time) error {
	if len(secret) < MinSecretBytes {
		return fmt.Errorf("%w: the receiver's secret is shorter than %d bytes; it takes nothing", ErrSignature, MinSecretBytes)
	}
	ts := h.Get(HeaderTimestamp)
	if ts == "" {
		return fmt.Errorf("%w: %s header missing", ErrSignature, HeaderTimestamp)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not unix seconds", ErrSignature, HeaderTimestamp)
	}
	if sec > 1e11 || sec < -1e11 {
		return fmt.Errorf("%w: %s is %d: send unix seconds (this looks like milliseconds or less)", ErrSignature, HeaderTimestamp, sec)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w: %s is %v away from this host's clock (at most %v)", ErrSignature, HeaderTimestamp, d.Round(time.Second), MaxSkew)
	}
	sigs := h.Values(HeaderSignature)
	if len(sigs) == 0 {
		return fmt.Errorf("%w: %s header missing", ErrSignature, HeaderSignature)
	}
	want := mac(secret, ts, body)
	for _, part := range strings.Split(strings.Join(sigs, ","), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue
		}
		got, err := hex.DecodeString(v)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches the body", ErrSignature)
}
