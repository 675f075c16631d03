package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// statusOf maps the model's sentinel errors to HTTP: the one place where
// that happens.
func statusOf(err error) (int, string) {
	switch {
	case errors.Is(err, model.ErrInvalid):
		return http.StatusBadRequest, wire.CodeInvalid
	case errors.Is(err, model.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, wire.CodeTooLarge
	case errors.Is(err, model.ErrUnauthorized):
		return http.StatusUnauthorized, wire.CodeUnauthorized
	case errors.Is(err, model.ErrForbidden):
		return http.StatusForbidden, wire.CodeForbidden
	case errors.Is(err, model.ErrNotFound):
		return http.StatusNotFound, wire.CodeNotFound
	case errors.Is(err, model.ErrInvalidTransition):
		return http.StatusConflict, wire.CodeInvalidTransition
	case errors.Is(err, model.ErrLeaseLost):
		return http.StatusConflict, wire.CodeLeaseLost
	case errors.Is(err, model.ErrConflict):
		return http.StatusConflict, wire.CodeConflict
	case errors.Is(err, model.ErrTooMany):
		return http.StatusTooManyRequests, wire.CodeTooMany
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, model.ErrUnavailable):
		return http.StatusServiceUnavailable, wire.CodeUnavailable
	}
	return http.StatusInternalServerError, wire.CodeInternal
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := statusOf(err)
	if errors.Is(err, model.ErrUnavailable) {
		// The database is away (restarting, failing over): a client that
		// waits a moment and asks again is answered.
		a.log.Warn("request failed: the store is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, a.errorBody(r, err))
}

// errorBody is the JSON body for err; an internal error is logged (method
// and path only: a stream's query may have carried a token) and answered
// without details.
func (a *API) errorBody(r *http.Request, err error) wire.ErrorBody {
	status, code := statusOf(err)
	body := wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: err.Error()}}
	if errors.Is(err, model.ErrUnavailable) {
		body.Error.Message = "the database cannot be reached right now; try again"
	}
	var me *model.Error
	if errors.As(err, &me) {
		body.Error.Message, body.Error.Field = me.Message, me.Field
	}
	if status == http.StatusInternalServerError {
		// Internal details stay in the log, not in the response.
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		body.Error.Message = "internal error"
	}
	return body
}

// writeJSON answers with v. The body is encoded before anything is sent,
// so a value that cannot be encoded is a 500, not a 200 cut short, and the
// answer goes out with its length.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = encodeJSON(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeInternal, Message: "cannot encode the response"}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// encodeJSON is v as one line of JSON ending in a newline (wire.Append).
func encodeJSON(v any) ([]byte, error) {
	b, err := wire.Append(make([]byte, 0, 1024), v)
	return append(b, '\n'), err
}

// decode reads a JSON body strictly: unknown fields, wrong types, trailing
// data and oversize bodies are errors naming what to fix. An empty body
// decodes as {} when optional is set.
func (a *API) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	_, err := a.decodeBody(w, r, v, optional)
	return err
}

// decodeBody is decode that also returns the body it read, for a handler
// that must tell a field left out from one given its zero value.
func (a *API) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &model.Error{Kind: model.ErrTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", a.maxBody)}
		}
		return nil, model.Invalid("", "cannot read request body: "+err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return body, nil
		}
		return nil, model.Invalid("", "request body is required (JSON object)")
	}
	return body, checkBody(body, v)
}

// checkBody decodes body into v strictly (unknown fields, trailing data,
// text, repeated keys).
func checkBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		isType := errors.As(err, &te)
		err = jsonError(err)
		var me *model.Error
		switch {
		case !errors.As(err, &me):
		case me.Message == "unknown field":
			if path := unknownFieldPath(body, reflect.TypeOf(v), me.Field); path != "" {
				me.Field = path
			}
		case isType:
			// encoding/json names a field inside an array without its
			// index (routes.priority); the offset says which element.
			if path := pathAt(body, te.Offset); path != "" && withoutIndexes(path) == me.Field {
				me.Field = path
			}
		}
		return err
	}
	// Not dec.More(): it answers false for a stray '}' or ']', which then
	// reached duplicateKey as if the body were one JSON value.
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0 {
		return model.Invalid("", "unexpected data after the JSON object")
	}
	if err := checkText(body); err != nil {
		return err
	}
	dup, twin := duplicateKey(body)
	if dup != "" {
		return model.Invalid(dup, "is given more than once in its object; give each key once")
	}
	if twin != "" && caseTwinInStruct(reflect.TypeOf(v), twin) {
		return model.Invalid(twin, "is given twice, in names that differ only in letter case (which JSON fields are matched without); give it once")
	}
	return nil
}

// jsonError turns encoding/json's errors into ones that name the field.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return model.Invalid("", fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se))
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return model.Invalid(field, fmt.Sprintf("wrong type: got JSON %s, want %s", te.Value, goTypeName(te.Type.String())))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return model.Invalid(name, "unknown field")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return model.Invalid("", "malformed JSON: unexpected end of input")
	}
	return model.Invalid("", "malformed JSON: "+err.Error())
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "array"
	case strings.Contains(t, "int"):
		return "integer"
	case strings.Contains(t, "float"):
		return "number"
	case t == "string", strings.HasSuffix(t, "State"), strings.HasSuffix(t, "Role"), strings.HasSuffix(t, "Status"):
		return "string"
	case t == "bool":
		return "boolean"
	}
	return "object"
}
