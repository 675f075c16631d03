package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func (a *API) next(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, box, err := pathBox(r)
	if err != nil {
		return err
	}
	var req wire.NextRequest
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	ctx, cancel := a.untilClosing(r.Context())
	defer cancel()
	res, err := a.svc.Next(ctx, who, owner, box, &req)
	if errors.Is(err, context.Canceled) {
		// Shutdown or a gone client ended the long poll: nothing was taken.
		res, err = nil, nil
	}
	if err != nil {
		return err
	}
	if res == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) listRecords(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, box, err := pathBox(r)
	if err != nil {
		return err
	}
	q := wire.ListQuery{Owner: owner, Box: box, Tag: r.URL.Query().Get("tag"), Desc: true,
		CursorRecordID: r.URL.Query().Get("cursor_record_id")}
	if q.States, err = model.ParseStates("state", r.URL.Query().Get("state")); err != nil {
		return err
	}
	switch r.URL.Query().Get("order") {
	case "", "desc":
	case "asc":
		q.Desc = false
	default:
		return model.Invalid("order", "must be asc or desc")
	}
	if q.CursorSortKey, err = queryInt(r, "cursor_sort_key"); err != nil {
		return err
	}
	// A cursor is a position in (sort_key, record_id) order, and the
	// store reads no cursor without its record id: a sort key alone would
	// page from the start again, forever. (A record id alone is sort key
	// 0, which a page's next cursor leaves out.)
	if r.URL.Query().Get("cursor_sort_key") != "" && q.CursorRecordID == "" {
		return model.Invalid("cursor_record_id", "is required with cursor_sort_key: pass both from the last page's next_cursor_sort_key and next_cursor_record_id")
	}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	if q.WithObject, err = queryBool(r, "with_object", true); err != nil {
		return err
	}
	res, err := a.svc.ListRecords(r.Context(), who, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) sync(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, box, err := pathBox(r)
	if err != nil {
		return err
	}
	q := wire.SyncQuery{Owner: owner, Box: box, ThreadKey: r.URL.Query().Get("thread_key")}
	if q.AfterSeq, err = queryInt(r, "after_seq"); err != nil {
		return err
	}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	if q.WithObject, err = queryBool(r, "with_object", true); err != nil {
		return err
	}
	res, err := a.svc.Sync(r.Context(), who, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) redriveBox(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, box, err := pathBox(r)
	if err != nil {
		return err
	}
	var req wire.RedriveRequest
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	res, err := a.svc.RedriveBox(r.Context(), who, owner, box, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
