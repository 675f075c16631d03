package core

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Bounds on the platform-side parts of a route (an address, a chat id, …):
// they are stored on every record that goes through the route, so one
// request must not be able to make them arbitrarily large.
const (
	maxRouteText = 512
	maxExtIDs    = 16
)

// checkRouteText checks one platform-side value of a route: valid UTF-8,
// no control characters, at most maxRouteText bytes.
func checkRouteText(field, v string) error {
	if len(v) > maxRouteText {
		return model.Invalid(field, fmt.Sprintf("is %d bytes, at most %d allowed", len(v), maxRouteText))
	}
	if !utf8.ValidString(v) {
		return model.Invalid(field, "is not valid UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return model.Invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// checkContactRoute checks one of a DID's routes; prefix names it
// ("routes[2]").
func checkContactRoute(prefix string, r *model.ContactRoute) error {
	if err := message.CheckDID(prefix+".tunnel_did", r.TunnelDID, true); err != nil {
		return err
	}
	if r.Address == "" && r.ChatID == "" {
		return model.Invalid(prefix+".address", "give an address or a chat_id")
	}
	return checkRouteTexts(prefix, r.Address, r.Platform, r.ChatID, r.AccountID, r.Mode)
}

// checkRouteTexts checks the platform-side values a route and an ingress
// context share, each named under prefix.
func checkRouteTexts(prefix, address, platform, chatID, accountID, mode string) error {
	for _, f := range []struct{ name, v string }{{"address", address}, {"platform", platform},
		{"chat_id", chatID}, {"account_id", accountID}, {"mode", mode}} {
		if err := checkRouteText(prefix+"."+f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// maxIdemKey bounds an idempotency key: it is stored with every keyed send
// for the keys' retention period, and echoed in conflicts.
const maxIdemKey = 256

// checkIdemKey checks a dispatch's or post_send's idempotency_key.
func checkIdemKey(key string) error {
	if len(key) > maxIdemKey {
		return model.Invalid("idempotency_key", fmt.Sprintf("is %d bytes, at most %d allowed", len(key), maxIdemKey))
	}
	return checkRouteText("idempotency_key", key)
}

// checkSendCtx checks a post_send's send_ctx: its mode is stored as the
// route of every TUNNEL_OUTBOX record the send makes, as an ingress
// context's is.
func checkSendCtx(sc *wire.SendCtx) error {
	if sc == nil {
		return nil
	}
	if err := message.CheckDID("send_ctx.tunnel_did", sc.TunnelDID, false); err != nil {
		return err
	}
	return checkRouteText("send_ctx.mode", sc.Mode)
}

// checkIngress checks a dispatch's ingress_ctx, which is stored as the
// route of every record the dispatch makes. A tunnel speaks only for
// itself: it may leave tunnel_did out, or name itself.
func checkIngress(who model.Identity, r *model.Route) error {
	if r == nil {
		return nil
	}
	if err := message.CheckDID("ingress_ctx.tunnel_did", r.TunnelDID, false); err != nil {
		return err
	}
	if who.Role == model.RoleTunnel && r.TunnelDID != "" && r.TunnelDID != who.DID {
		return model.Forbidden(fmt.Sprintf("%s may dispatch only as itself, not with ingress_ctx.tunnel_did %s", who.DID, r.TunnelDID))
	}
	if err := message.CheckDID("ingress_ctx.target_did", r.TargetDID, false); err != nil {
		return err
	}
	if err := checkRouteTexts("ingress_ctx", r.Address, r.Platform, r.ChatID, r.AccountID, r.Mode); err != nil {
		return err
	}
	if len(r.ExtIDs) > maxExtIDs {
		return model.Invalid("ingress_ctx.ext_ids", fmt.Sprintf("at most %d ids", maxExtIDs))
	}
	for k, v := range r.ExtIDs {
		if k == "" {
			return model.Invalid("ingress_ctx.ext_ids", "a key must not be empty")
		}
		if err := checkRouteText("ingress_ctx.ext_ids", k); err != nil {
			return err
		}
		if err := checkRouteText("ingress_ctx.ext_ids."+k, v); err != nil {
			return err
		}
	}
	return nil
}
