package core

import (
	"context"
	"fmt"
	"strings"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// deliveryNotice makes u, a change of rec, tell the author of rec's message
// how its delivery through a tunnel went, when the change ends the
// delivery (SENT, DEAD) or reopens a dead one. The notice is an event in
// the author's own log, written with the change: an agent that sent to a
// person outside learns that it failed without polling the tunnel's
// record, and an agent that did not hear of it can be sure nothing ended.
func (s *Service) deliveryNotice(ctx context.Context, rec model.Record, u *store.Update) error {
	if rec.BoxKind != model.TunnelOutbox || u.From == u.To {
		return nil
	}
	var typ, what string
	switch {
	case u.To == model.Sent:
		typ, what = model.EventDeliverySent, "sent"
		if id := u.Delivery.ExternalMsgID; id != "" {
			what += fmt.Sprintf(" (external id %s)", id)
		}
	case u.To == model.Dead:
		typ, what = model.EventDeliveryDead, "dead"
		if d := strings.TrimSuffix(u.EventDetail, "; dead"); d != "" {
			what += ": " + d
		}
	case u.From == model.Dead && u.To == model.ClaimableState(rec.BoxKind):
		typ, what = model.EventDeliveryRedriven, "redriven: it will be tried again"
	default:
		return nil
	}
	author, err := s.author(ctx, rec.MsgID)
	if err != nil || author == "" || author == rec.Owner {
		return err
	}
	detail := what
	if r := rec.Route; r != nil && r.TargetDID != "" {
		detail = fmt.Sprintf("to %s via %s: %s", r.TargetDID, rec.Owner, what)
	}
	u.Notice = &store.Notice{Owner: author, Type: typ, Detail: detail}
	return nil
}
