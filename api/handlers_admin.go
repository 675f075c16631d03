package api

import (
	"net/http"
	"strconv"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func (a *API) events(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var q wire.EventQuery
	var err error
	if q.Owner, err = queryDID(r, "owner"); err != nil {
		return err
	}
	if q.After, err = queryInt(r, "after"); err != nil {
		return err
	}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	res, err := a.svc.Events(r.Context(), who, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) scheduled(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	recipient, err := queryDID(r, "recipient")
	if err != nil {
		return err
	}
	sender, err := queryDID(r, "sender")
	if err != nil {
		return err
	}
	res, err := a.svc.Scheduled(r.Context(), who, wire.ScheduledQuery{Sender: sender, Recipient: recipient, Limit: limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) cancelScheduled(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return model.Invalid("id", "must be a positive integer, got "+strconv.Quote(v))
	}
	res, err := a.svc.CancelScheduled(r.Context(), who, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) flushScheduled(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.FlushRequest
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	res, err := a.svc.FlushScheduled(r.Context(), who, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var q wire.TokenQuery
	var err error
	if q.DID, err = queryDID(r, "did"); err != nil {
		return err
	}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	res, err := a.svc.ListTokens(r.Context(), who, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	if _, err := a.svc.RevokeToken(r.Context(), who, r.PathValue("token_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.TokenRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.CreateToken(r.Context(), who, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
