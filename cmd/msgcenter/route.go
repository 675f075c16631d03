package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func newRouteCmd(g *globals) *cobra.Command {
	cmd := groupCmd("route", "Routes: which tunnel endpoints reach a DID (set, get)")
	cmd.AddCommand(newRouteSetCmd(g), newRouteGetCmd(g))
	return cmd
}

const routeKeys = "tunnel_did, address, platform, chat_id, account_id, mode, priority"

// parseRoute parses "tunnel_did=T,address=A,platform=P,chat_id=C,priority=N".
func parseRoute(spec string) (model.ContactRoute, error) {
	var r model.ContactRoute
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return r, usagef("--route %q: %q is not key=value (keys: %s)", spec, part, routeKeys)
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "tunnel_did", "tunnel":
			r.TunnelDID = v
		case "address":
			r.Address = v
		case "platform":
			r.Platform = v
		case "chat_id":
			r.ChatID = v
		case "account_id":
			r.AccountID = v
		case "mode":
			r.Mode = v
		case "priority":
			n, err := strconv.Atoi(v)
			if err != nil {
				return r, usagef("--route %q: priority %q is not a whole number", spec, v)
			}
			r.Priority = n
		default:
			return r, usagef("--route %q: unknown key %q (keys: %s)", spec, k, routeKeys)
		}
	}
	if r.TunnelDID == "" {
		return r, usagef("--route %q: tunnel_did is required (the tunnel that delivers through this route)", spec)
	}
	return r, nil
}

func newRouteSetCmd(g *globals) *cobra.Command {
	var specs []string
	var clear bool
	cmd := &cobra.Command{
		Use:   "set DID --route tunnel_did=T,address=A,platform=P,chat_id=C,priority=N ... | set DID --clear",
		Short: "Replace the routes through which DID is reached",
		Example: `  msgcenter route set did:x:bob \
      --route tunnel_did=did:tunnel:tg,platform=telegram,chat_id=42,priority=10 \
      --route tunnel_did=did:tunnel:mail,address=bob@example.com`,
		Args: args("DID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			switch {
			case len(specs) == 0 && !clear:
				return usagef("no routes given: pass --route tunnel_did=T,... (repeatable), or --clear to remove them all")
			case len(specs) > 0 && clear:
				return usagef("--clear removes every route; drop it or drop --route")
			}
			routes := []model.ContactRoute{}
			for _, s := range specs {
				r, err := parseRoute(s)
				if err != nil {
					return err
				}
				routes = append(routes, r)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.SetRoutes(cmd.Context(), a[0], routes)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error { return printRoutes(w, res) })
		},
	}
	// StringArray, not StringSlice: one --route value is itself a comma list.
	cmd.Flags().StringArrayVar(&specs, "route", nil, "a route as key=value pairs (keys: "+routeKeys+"); repeatable")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove every route")
	return cmd
}

func newRouteGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get DID",
		Short: "List the routes of DID",
		Args:  args("DID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.GetRoutes(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error { return printRoutes(w, res) })
		},
	}
}

func printRoutes(w io.Writer, r *wire.RoutesResult) error {
	if len(r.Routes) == 0 {
		_, err := fmt.Fprintf(w, "%s has no routes\n", r.DID)
		return err
	}
	tw := newTable(w, "TUNNEL", "PLATFORM", "CHAT_ID", "ADDRESS", "ACCOUNT", "MODE", "PRIORITY")
	for _, rt := range r.Routes {
		row(tw, rt.TunnelDID, rt.Platform, rt.ChatID, rt.Address, rt.AccountID, rt.Mode, rt.Priority)
	}
	return tw.Flush()
}
