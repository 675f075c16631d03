package server

import (
	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/model"
)

func adminIdentity() model.Identity { return model.Identity{DID: core.AdminDID, Role: model.RoleAdmin} }
