package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func newTokenCmd(g *globals) *cobra.Command {
	cmd := groupCmd("token", "API tokens: create")
	cmd.AddCommand(newTokenCreateCmd(g))
	return cmd
}

func newTokenCreateCmd(g *globals) *cobra.Command {
	var did, role string
	cmd := &cobra.Command{
		Use:   "create --did DID [--role agent|tunnel|admin]",
		Short: "Create an API token for a DID (needs an admin token)",
		Long: `Create an API token bound to a DID. The token is printed once (the server
keeps only a hash), alone on stdout so that a script can capture it:

  TOKEN=$(msgcenter token create --did did:x:bob)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if did == "" {
				return usagef("--did is required: the DID the token acts as, e.g. --did did:x:bob")
			}
			r := model.Role(strings.ToLower(strings.TrimSpace(role)))
			if !model.ValidRole(r) {
				return usagef("--role %q: want agent, tunnel or admin", role)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.CreateToken(cmd.Context(), &wire.TokenRequest{DID: did, Role: r})
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				// The note goes to stderr so stdout is the token alone.
				fmt.Fprintf(cmd.ErrOrStderr(), "%s token for %s (shown once; store it now):\n", res.Role, res.DID)
				_, err := fmt.Fprintln(w, res.Token)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&did, "did", "", "the DID the token acts as (required)")
	cmd.Flags().StringVar(&role, "role", string(model.RoleAgent), "agent, tunnel or admin")
	return cmd
}
