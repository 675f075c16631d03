package api

import (
	"net/http"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func (a *API) dispatch(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.DispatchRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.Dispatch(r.Context(), who, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) postSend(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.PostSendRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.PostSend(r.Context(), who, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) getMessage(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	body, err := a.svc.GetMessage(r.Context(), who, r.PathValue("msg_id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}
