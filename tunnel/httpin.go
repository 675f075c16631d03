package tunnel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// The pieces every connector that takes HTTP posts needs (tunnel/webhook,
// tunnel/slack): a bounded body, JSON errors in msgcenter's shape, and the
// line between a refusal the poster must fix and trouble it should retry.

// DefaultMaxBody bounds an inbound post.
const DefaultMaxBody = 1 << 20

// ReadPost reads a POST's body, at most limit bytes (DefaultMaxBody when
// 0). On false it has answered the request (405, 413 or 400).
func ReadPost(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		WriteError(w, http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "", "post here")
		return nil, false
	}
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			WriteError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, "", fmt.Sprintf("a post may be at most %d bytes", limit))
			return nil, false
		}
		WriteError(w, http.StatusBadRequest, wire.CodeInvalid, "", "could not read the body: "+err.Error())
		return nil, false
	}
	return body, true
}

// WriteError answers with msgcenter's JSON error body.
func WriteError(w http.ResponseWriter, status int, code, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg, Field: field}})
}

// Refusal says whether err, from Inbound.Dispatch, is msgcenter refusing
// the message itself (400, 413, 422: the poster must fix it, retrying
// changes nothing; 409: its id was used for another message, usually the
// same message seen twice with different trimmings; 403 naming a field of
// the message: its author is one a tunnel may not write as), and if so
// with which status and field. Anything else (msgcenter unreachable, its
// token refused, a proxy's 404 or 408 while it restarts) is the tunnel's
// own trouble: the message is not stored and the poster should try again.
func Refusal(err error) (status int, code, field, msg string, ok bool) {
	var api *client.APIError
	var fe *model.Error
	switch {
	case errors.As(err, &api) && (api.Status == http.StatusBadRequest || api.Status == http.StatusConflict ||
		api.Status == http.StatusRequestEntityTooLarge || api.Status == http.StatusUnprocessableEntity ||
		(api.Status == http.StatusForbidden && strings.HasPrefix(api.Field, "msg."))):
		return api.Status, api.Code, api.Field, api.Message, true
	case errors.As(err, &fe) && errors.Is(err, model.ErrInvalid):
		return http.StatusBadRequest, wire.CodeInvalid, fe.Field, fe.Message, true
	}
	return 0, "", "", "", false
}
