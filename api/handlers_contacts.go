package api

import (
	"net/http"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func (a *API) setReceipt(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.ReceiptRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.SetReadState(r.Context(), who, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) listReceipts(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	q := wire.ReceiptQuery{MsgID: r.URL.Query().Get("msg_id")}
	var err error
	if q.GroupID, err = queryDID(r, "group_id"); err != nil {
		return err
	}
	if q.Reader, err = queryDID(r, "reader"); err != nil {
		return err
	}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	if q.CursorAtMS, err = queryInt(r, "cursor_at_ms"); err != nil {
		return err
	}
	q.CursorMsgID = r.URL.Query().Get("cursor_msg_id")
	if q.CursorReader, err = queryDID(r, "cursor_reader"); err != nil {
		return err
	}
	res, err := a.svc.ListReceipts(r.Context(), who, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) setSubscribers(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	group, err := pathDID(r, "group")
	if err != nil {
		return err
	}
	var req wire.SubscribersRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.SetSubscribers(r.Context(), who, group, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	group, err := pathDID(r, "group")
	if err != nil {
		return err
	}
	if err := a.svc.DeleteGroup(r.Context(), who, group); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) getSubscribers(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	group, err := pathDID(r, "group")
	if err != nil {
		return err
	}
	res, err := a.svc.Subscribers(r.Context(), who, group)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) listBlocks(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	res, err := a.svc.Blocks(r.Context(), who, r.PathValue("owner"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) block(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	return a.setBlock(w, r, who, true)
}

func (a *API) unblock(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	return a.setBlock(w, r, who, false)
}

func (a *API) setBlock(w http.ResponseWriter, r *http.Request, who model.Identity, on bool) error {
	// Everything is in the path; a body, if any, must be an empty object,
	// as a body every other route would refuse is refused here too.
	if err := a.decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	res, err := a.svc.Block(r.Context(), who, r.PathValue("owner"), r.PathValue("did"), on)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) setRoutes(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	var req wire.RoutesRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.SetRoutes(r.Context(), who, r.PathValue("did"), req.Routes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) getRoutes(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	did, err := pathDID(r, "did")
	if err != nil {
		return err
	}
	res, err := a.svc.Routes(r.Context(), who, did)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// readConversation is POST /v1/owners/{owner}/conversations/read.
func (a *API) readConversation(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, err := pathDID(r, "owner")
	if err != nil {
		return err
	}
	var req wire.ReadConversationRequest
	if err := a.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := a.svc.ReadConversation(r.Context(), who, owner, &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (a *API) conversations(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, err := pathDID(r, "owner")
	if err != nil {
		return err
	}
	q := wire.ConversationQuery{Owner: owner, CursorThreadKey: r.URL.Query().Get("cursor_thread_key")}
	if q.Limit, err = queryLimit(r); err != nil {
		return err
	}
	if q.CursorUpdatedAtMS, err = queryInt(r, "cursor_updated_at_ms"); err != nil {
		return err
	}
	res, err := a.svc.Conversations(r.Context(), who, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
