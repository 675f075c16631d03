package tunnel_test

import (
	"net/http"
	"testing"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/tunnel"
)

// Refusal tells a message msgcenter will never take (the poster must not
// retry it, a poller must move past it) from the tunnel's own trouble.
func TestRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"a bad field", &client.APIError{Status: http.StatusBadRequest, Code: "invalid_argument", Field: "msg.to[0]"}, true},
		{"an author the tunnel may not write as", &client.APIError{Status: http.StatusForbidden, Code: "forbidden", Field: "msg.from"}, true},
		{"the tunnel's token lacks the right", &client.APIError{Status: http.StatusForbidden, Code: "forbidden"}, false},
		{"msgcenter restarting", &client.APIError{Status: http.StatusServiceUnavailable, Code: "unavailable"}, false},
	} {
		if _, _, _, _, got := tunnel.Refusal(tc.err); got != tc.refused {
			t.Errorf("%s: refused %v, want %v", tc.name, got, tc.refused)
		}
	}
}
