package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
)

// Helpers that read path and query parameters with errors naming the
// parameter.

func pathDID(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if err := message.CheckDID(name, v, true); err != nil {
		return "", err
	}
	return v, nil
}

func pathBox(r *http.Request) (string, model.BoxKind, error) {
	owner, err := pathDID(r, "owner")
	if err != nil {
		return "", "", err
	}
	box, err := model.ParseBoxKind(r.PathValue("box"))
	return owner, box, err
}

// queryDID reads an optional DID filter: one that cannot be a DID would
// match nothing, which a caller could not tell from an empty result.
func queryDID(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if err := message.CheckDID(name, v, false); err != nil {
		return "", err
	}
	return v, nil
}

func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, model.Invalid(name, "must be an integer, got "+strconv.Quote(v))
	}
	return n, nil
}

func queryBool(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, model.Invalid(name, "must be true or false, got "+strconv.Quote(v))
	}
	return b, nil
}

func queryLimit(r *http.Request) (int, error) {
	n, err := queryInt(r, "limit")
	if err != nil {
		return 0, err
	}
	if n < 0 || n > 1000 {
		return 0, model.Invalid("limit", "must be between 0 (the default) and 1000")
	}
	return int(n), nil
}

// checkQuery refuses a query parameter the route does not take (access_token
// is gone by now on the routes that take it), or one given twice.
func checkQuery(r *http.Request, allowed []string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q := r.URL.Query()
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // the same answer each time
	for _, name := range names {
		if slices.Contains(allowed, name) {
			// Read once (Query().Get takes the first): a second value
			// would be dropped without a word, as a repeated JSON key is
			// refused for the same reason.
			if len(q[name]) > 1 {
				return model.Invalid(name, "is given more than once; give it once (lists are comma-separated)")
			}
			continue
		}
		if len(allowed) == 0 {
			return model.Invalid(name, "unknown query parameter: this endpoint takes none")
		}
		return model.Invalid(name, "unknown query parameter: this endpoint takes "+strings.Join(allowed, ", "))
	}
	return nil
}
