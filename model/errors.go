package model

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every layer wraps one of these so the HTTP layer can map
// them to status codes in one place.
var (
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	ErrInvalidTransition = errors.New("invalid state transition")
	ErrInvalid           = errors.New("invalid input")
	ErrTooLarge          = errors.New("too large")
	ErrUnauthorized      = errors.New("unauthorized")
	ErrForbidden         = errors.New("forbidden")
	ErrLeaseLost         = errors.New("lease lost")
	// ErrUnavailable: the store could not be reached (a database that
	// restarts, a connection it closed); the same request may work in a
	// moment.
	ErrUnavailable = errors.New("store unavailable")
	// ErrTooMany: the caller holds as much open at once as it may (an
	// agent's streams); it may ask again once it closed some.
	ErrTooMany = errors.New("too many")
)

// Error carries a sentinel kind, the offending field (if any) and a message
// meant for the person who has to fix the request.
type Error struct {
	Kind    error
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// Unwrap lets errors.Is match the sentinel kind.
func (e *Error) Unwrap() error { return e.Kind }

// Invalid builds an ErrInvalid error for a field.
func Invalid(field, msg string) *Error { return &Error{Kind: ErrInvalid, Field: field, Message: msg} }

// NotFound builds an ErrNotFound error.
func NotFound(what string) *Error {
	return &Error{Kind: ErrNotFound, Message: what + " not found"}
}

// Conflict builds an ErrConflict error.
func Conflict(field, msg string) *Error { return &Error{Kind: ErrConflict, Field: field, Message: msg} }

// Forbidden builds an ErrForbidden error.
func Forbidden(msg string) *Error { return &Error{Kind: ErrForbidden, Message: msg} }
