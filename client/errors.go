package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// APIError is a non-2xx answer from the server.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the server's stable error code (wire.CodeNotFound, …). When the
	// body was not a msgcenter error (a proxy's HTML page, say) it is derived
	// from Status so that IsNotFound and friends still work.
	Code string
	// Message is meant for the person who has to fix the request.
	Message string
	// Field names the offending request field, when there is one.
	Field string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "msgcenter: %d %s", e.Status, e.Code)
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Unwrap maps the error code to the sentinel of package model, so that
// errors.Is(err, model.ErrNotFound) works the same on both sides of the wire.
func (e *APIError) Unwrap() error {
	switch e.Code {
	case wire.CodeInvalid:
		return model.ErrInvalid
	case wire.CodeNotFound:
		return model.ErrNotFound
	case wire.CodeConflict:
		return model.ErrConflict
	case wire.CodeInvalidTransition:
		return model.ErrInvalidTransition
	case wire.CodeTooLarge:
		return model.ErrTooLarge
	case wire.CodeUnauthorized:
		return model.ErrUnauthorized
	case wire.CodeForbidden:
		return model.ErrForbidden
	case wire.CodeLeaseLost:
		return model.ErrLeaseLost
	}
	return nil
}

// decodeAPIError turns an error response into an *APIError, falling back to
// the status code and the start of the body when it is not wire.ErrorBody.
func decodeAPIError(status int, body []byte) *APIError {
	var eb wire.ErrorBody
	if err := json.Unmarshal(body, &eb); err == nil && eb.Error.Code != "" {
		return &APIError{Status: status, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
	}
	msg := strings.TrimSpace(string(body))
	switch {
	case msg == "":
		msg = http.StatusText(status)
	case !json.Valid(body):
		// Not msgcenter's answer: a proxy's page, another server's. A
		// whole HTML page says less than where it came from.
		excerpt := strings.Join(strings.Fields(msg), " ")
		if r := []rune(excerpt); len(r) > 80 {
			excerpt = string(r[:80]) + "…"
		}
		msg = fmt.Sprintf("%d %s, with a body that is not msgcenter's JSON (%q): is the URL a msgcenter server, and is nothing in between answering for it?",
			status, http.StatusText(status), excerpt)
	case len(msg) > 512:
		msg = msg[:512] + "…"
	}
	return &APIError{Status: status, Code: codeForStatus(status), Message: msg}
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return wire.CodeInvalid
	case http.StatusUnauthorized:
		return wire.CodeUnauthorized
	case http.StatusForbidden:
		return wire.CodeForbidden
	case http.StatusNotFound:
		return wire.CodeNotFound
	case http.StatusConflict:
		return wire.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return wire.CodeTooLarge
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return wire.CodeUnavailable
	}
	return wire.CodeInternal
}

// ErrorCode returns the server's error code of err, or "" when err is not
// (and does not wrap) an *APIError.
func ErrorCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// IsNotFound reports whether the server answered not_found.
func IsNotFound(err error) bool { return ErrorCode(err) == wire.CodeNotFound }

// IsConflict reports whether the server answered conflict.
func IsConflict(err error) bool { return ErrorCode(err) == wire.CodeConflict }

// IsInvalid reports whether the server rejected the request's arguments.
func IsInvalid(err error) bool { return ErrorCode(err) == wire.CodeInvalid }

// IsInvalidTransition reports whether a state change is not allowed from the
// record's current state.
func IsInvalidTransition(err error) bool { return ErrorCode(err) == wire.CodeInvalidTransition }

// IsUnauthorized reports whether the token was missing or not accepted.
func IsUnauthorized(err error) bool { return ErrorCode(err) == wire.CodeUnauthorized }

// IsForbidden reports whether the token may not act on the resource.
func IsForbidden(err error) bool { return ErrorCode(err) == wire.CodeForbidden }

// IsLeaseLost reports whether the caller's lease expired or was taken over:
// the record is no longer the caller's to ack or fail.
func IsLeaseLost(err error) bool { return ErrorCode(err) == wire.CodeLeaseLost }

// IsTooLarge reports whether the request was over a size limit.
func IsTooLarge(err error) bool { return ErrorCode(err) == wire.CodeTooLarge }

// IsUnavailable reports whether the server (or a proxy in front of it) was
// temporarily unable to answer; such calls are worth retrying.
func IsUnavailable(err error) bool { return ErrorCode(err) == wire.CodeUnavailable }
