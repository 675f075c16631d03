package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/msgcenter/msgcenter/core"
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
	// Shutdown ends a next's long poll, as it ends get_next's.
	ctx, cancel := a.untilClosing(r.Context())
	defer cancel()
	res, err := a.svc.SetState(ctx, who, r.PathValue("record_id"), &req)
	return a.writeStateResult(w, r, res, err)
}

func (a *API) reportDelivery(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.DeliveryRequest
	body, err := a.decodeBody(w, r, &req, false)
	if err != nil {
		return err
	}
	// ok must be given: read as false, a report that left it out (a sender
	// that delivered and said only its external id) would put the record in
	// DEAD, and a redrive would deliver it twice.
	var given struct {
		Result *struct {
			OK *bool `json:"ok"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &given); err != nil {
		return jsonError(err)
	}
	if given.Result != nil && given.Result.OK == nil {
		return model.Invalid("result.ok", "is required: true for a delivery, false for a failure")
	}
	ctx, cancel := a.untilClosing(r.Context())
	defer cancel()
	res, err := a.svc.ReportDelivery(ctx, who, r.PathValue("record_id"), &req)
	return a.writeStateResult(w, r, res, err)
}

// writeStateResult answers a state change or a delivery report. A change
// made whose next claim failed is a 200 all the same, with the claim's
// error in next_error: the client must not take the change for failed.
func (a *API) writeStateResult(w http.ResponseWriter, r *http.Request, res *wire.StateResult, err error) error {
	var ne *core.NextError
	if errors.As(err, &ne) && res != nil {
		detail := a.errorBody(r, ne.Err).Error
		res.NextError, err = &detail, nil
	}
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
