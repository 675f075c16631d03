package api

import (
	"net/http"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func (a *API) pendingMail(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	sender, err := queryDID(r, "sender")
	if err != nil {
		return err
	}
	res, err := a.svc.PendingMail(r.Context(), who, wire.PendingMailQuery{Sender: sender, Limit: limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) flushMail(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req struct{} // nothing to ask, but a body that asks something is refused
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	res, err := a.svc.FlushMail(r.Context(), who)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
