package tunnel

import "testing"

// A sender's DID must not change from one release to the next (its routes,
// contacts and history stay with the old one): what SenderDID escapes is
// fixed; the mail tunnel keeps '@' in its own DIDs (email.SenderDID).
func TestSenderDIDIsStable(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"alice@example.com": "did:webhook:alice%40example.com",
		"+15551234567":      "did:webhook:%2B15551234567",
	} {
		if got := SenderDID("webhook", id); got != want {
			t.Errorf("SenderDID(webhook, %q) = %s, want %s", id, got, want)
		}
	}
}
