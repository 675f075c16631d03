package core

import (
	"context"
	"fmt"

	"github.com/msgcenter/msgcenter/model"
)

// The access rules of DESIGN.md: an identity reads and works only its own
// boxes (and reads the GROUP_INBOX of groups it subscribes to); admins act
// for everyone.

func isAdmin(who model.Identity) bool { return who.Role == model.RoleAdmin }

func requireAdmin(who model.Identity, what string) error {
	if isAdmin(who) {
		return nil
	}
	return model.Forbidden(what + " needs an admin token")
}

// canAct: may who change records in owner's box?
func canAct(who model.Identity, owner string) error {
	if acts(who, owner) {
		return nil
	}
	return model.Forbidden(fmt.Sprintf("%s may not act on boxes of %s", who.DID, owner))
}

// acts is canAct for callers that only need the answer: building the
// refusal was most of a group member's read check, made once per member
// for every message a group's streams push.
func acts(who model.Identity, owner string) bool { return isAdmin(who) || who.DID == owner }

// CanRead answers nil if who may read owner's box, as Sync would check it:
// a caller that shares one read of a box among several readers (the API's
// streams) asks it for each of them.
func (s *Service) CanRead(ctx context.Context, who model.Identity, owner string, box model.BoxKind) error {
	return s.canRead(ctx, who, owner, box)
}

// canRead: may who read owner's box?
func (s *Service) canRead(ctx context.Context, who model.Identity, owner string, box model.BoxKind) error {
	if acts(who, owner) {
		return nil
	}
	if box == model.GroupInbox {
		ok, err := s.st.IsSubscriber(ctx, owner, who.DID)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return model.Forbidden(fmt.Sprintf("%s may not read boxes of %s", who.DID, owner))
}
