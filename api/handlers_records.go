package api

import (
	"net/http"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func (a *API) getRecord(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	withObj, err := queryBool(r, "with_object", true)
	if err != nil {
		return err
	}
	res, err := a.svc.GetRecord(r.Context(), who, r.PathValue("record_id"), withObj)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) setState(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.StateRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.NewState == "" {
		return model.Invalid("new_state", "is required")
	}
	res, err := a.svc.SetState(r.Context(), who, r.PathValue("record_id"), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) reportDelivery(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.DeliveryRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.ReportDelivery(r.Context(), who, r.PathValue("record_id"), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) extendLease(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.LeaseRequest
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	res, err := a.svc.ExtendLease(r.Context(), who, r.PathValue("record_id"), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) redrive(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req struct{}
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	res, err := a.svc.Redrive(r.Context(), who, r.PathValue("record_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
