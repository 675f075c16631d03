package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzRequestBodies sends arbitrary bytes as the body of every endpoint
// that takes one: whatever arrives, the answer is a success or a 4xx with
// the JSON error body, never a 5xx.
func FuzzRequestBodies(f *testing.F) {
	env := newEnv(f) // one server for the whole run: fuzzing is about the decoder, not state
	f.Add(0, []byte(`{"msg":{"from":"did:a","to":["did:b"],"content":{"content":"x"}}}`))
	f.Add(1, []byte(`{"msg":{"from":"did:alice","to":["did:b"]},"delay_ms":5}`))
	f.Add(2, []byte(`{"msg":{"from":"did:alice","to":["did:b"]},"send_ctx":{"all_routes":true}}`))
	f.Add(3, []byte(`{"group_id":"did:g","msg_id":"cymsg:00","reader_did":"did:alice","status":"READED"}`))
	f.Add(4, []byte(`{"routes":[{"tunnel_did":"did:t","address":"a","priority":1}]}`))
	f.Add(5, []byte(`{"subscribers":["did:a","did:b"]}`))
	f.Add(6, []byte(`{"did":"did:x","role":"agent"}`))
	f.Add(7, []byte(`{"result":{"ok":false,"retryable":true,"retry_after_ms":1}}`))
	f.Add(8, []byte(`{"new_state":"READED"}`))
	f.Add(9, []byte(`{"recipient":"did:b"}`))
	f.Add(8, []byte(`{}}`)) // a stray closer after the value once crashed duplicateKey
	f.Add(5, []byte(`{"subscribers":[]}]`))
	f.Fuzz(func(t *testing.T, which int, body []byte) {
		targets := []struct{ method, path, token string }{
			{"POST", "/v1/dispatch", env.admin},
			{"POST", "/v1/post_send", env.alice},
			{"POST", "/v1/read_receipts", env.alice},
			{"PUT", "/v1/routes/did:alice", env.alice},
			{"PUT", "/v1/groups/did:group:f/subscribers", env.admin},
			{"POST", "/v1/tokens", env.admin},
			{"POST", "/v1/records/cyrec:none/delivery", env.alice},
			{"POST", "/v1/records/cyrec:none/state", env.alice},
			{"POST", "/v1/scheduled/flush", env.admin},
		}
		if which < 0 {
			which = -which
		}
		tg := targets[which%len(targets)]
		req := httptest.NewRequest(tg.method, tg.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tg.token)
		rec := httptest.NewRecorder()
		env.api.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s with %q: %d %s", tg.method, tg.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && !bytes.Contains(rec.Body.Bytes(), []byte(`"error":{"code":`)) {
			t.Fatalf("%s %s: %d without a JSON error body: %s", tg.method, tg.path, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK && rec.Code != http.StatusNoContent && rec.Code < 400 {
			t.Fatalf("%s %s: unexpected status %d", tg.method, tg.path, rec.Code)
		}
	})
}
