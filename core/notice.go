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
// delivery or reopens it. The notice is an event in the author's own log,
// written with the change: an agent that sent to a person outside learns
// that it failed without polling the tunnel's record, and an agent that
// did not hear of it can be sure nothing ended.
//
// A delivery is live while WAIT or SENDING. Leaving that for SENT is
// delivery.sent; for any other state (DEAD, a FAILED that stays put, or
// ARCHIVED or DELETED by hand) it is delivery.dead: it will not arrive.
// Coming back to WAIT from one of those is delivery.redriven.
func (s *Service) deliveryNotice(ctx context.Context, rec model.Record, u *store.Update) error {
	if rec.BoxKind != model.TunnelOutbox || u.From == u.To {
		return nil
	}
	live := func(st model.State) bool { return st == model.Wait || st == model.Sending }
	var typ, what string
	switch {
	case live(u.From) && u.To == model.Sent:
		typ, what = model.EventDeliverySent, "sent"
		if id := u.Delivery.ExternalMsgID; id != "" {
			what += fmt.Sprintf(" (external id %s)", id)
		}
	case live(u.From) && !live(u.To):
		typ, what = model.EventDeliveryDead, strings.ToLower(string(u.To))
		if u.To == model.Failed {
			what += " (it stays so until someone moves it back to WAIT)"
		}
		if d := strings.TrimSuffix(u.EventDetail, "; dead"); d != "" {
			what += ": " + d
		}
	case !live(u.From) && live(u.To):
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
