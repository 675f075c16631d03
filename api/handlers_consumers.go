package api

import (
	"net/http"
	"net/url"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Durable consumers and retention. A consumer's records live in its own box
// ("consumer:NAME" in /v1/boxes/{owner}/{box}/…); these routes manage the
// consumer itself and its cursor.

// pathConsumer reads {owner} and {name}.
func pathConsumer(r *http.Request) (string, string, error) {
	owner, err := pathDID(r, "owner")
	if err != nil {
		return "", "", err
	}
	name := r.PathValue("name")
	if err := model.ValidConsumerName(name); err != nil {
		return "", "", err
	}
	return owner, name, nil
}

func (a *API) createConsumer(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.ConsumerRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.CreateConsumer(r.Context(), who, &req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/consumers/"+url.PathEscape(res.Owner)+"/"+url.PathEscape(res.Name))
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (a *API) listConsumers(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, err := queryDID(r, "owner")
	if err != nil {
		return err
	}
	res, err := a.svc.ListConsumers(r.Context(), who, owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) getConsumer(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, name, err := pathConsumer(r)
	if err != nil {
		return err
	}
	res, err := a.svc.GetConsumer(r.Context(), who, owner, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) deleteConsumer(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, name, err := pathConsumer(r)
	if err != nil {
		return err
	}
	if err := a.svc.DeleteConsumer(r.Context(), who, owner, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) ackConsumer(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, name, err := pathConsumer(r)
	if err != nil {
		return err
	}
	// wire.AckRequest, with seq required: an ack of nothing is a mistake.
	var req struct {
		Seq *int64 `json:"seq"`
	}
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Seq == nil {
		return model.Invalid("seq", "is required: the last seq of the consumer's box to acknowledge")
	}
	res, err := a.svc.AckConsumer(r.Context(), who, owner, name, *req.Seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) retentionPolicy(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	res, err := a.svc.RetentionPolicy(who)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) runRetention(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req struct{}
	if err := a.decode(w, r, &req, true); err != nil {
		return err
	}
	res, err := a.svc.RunRetention(r.Context(), who)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
