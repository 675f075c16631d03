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
	cmd := groupCmd("token", "API tokens: create, list, revoke")
	cmd.AddCommand(newTokenCreateCmd(g), newTokenListCmd(g), newTokenRevokeCmd(g))
	return cmd
}

func newTokenListCmd(g *globals) *cobra.Command {
	var did string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--did DID]",
		Short: "List tokens, oldest first (an admin sees every DID's, anyone else its own)",
		Long: `List stored tokens by id, DID, role and creation time. The server keeps
only a hash of each token, so the list shows ids, never tokens; give an id
to "token revoke".`,
		Example: "  msgcenter token list --did did:x:bob",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.ListTokens(cmd.Context(), wire.TokenQuery{DID: did, Limit: limit})
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if len(res.Items) == 0 {
					_, err := fmt.Fprintln(w, "no tokens")
					return err
				}
				tw := newTable(w, "TOKEN_ID", "DID", "ROLE", "CREATED")
				for _, t := range res.Items {
					row(tw, t.TokenID, t.DID, t.Role, fmtMS(t.CreatedAtMS))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&did, "did", "", "only the tokens of this DID")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	return cmd
}

func newTokenRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke a token: requests that present it are refused from then on",
		Long: `Revoke a token by the id "token list" (or "token create --json") shows. An
admin revokes any token, anyone else only its own. With several nodes on
PostgreSQL, the others may accept the token for up to 5 seconds more. The
admin token file's token is registered again when the server starts: to
replace it, delete the file and restart.`,
		Example: "  msgcenter token revoke 3f9a0c1d2e4b5a69",
		Args:    args("TOKEN_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), a[0]); err != nil {
				return err
			}
			return g.emit(cmd, map[string]any{"revoked": a[0]}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "revoked %s\n", a[0])
				return err
			})
		},
	}
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
				fmt.Fprintf(cmd.ErrOrStderr(), "%s token %s for %s (shown once; store it now):\n", res.Role, res.TokenID, res.DID)
				_, err := fmt.Fprintln(w, res.Token)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&did, "did", "", "the DID the token acts as (required)")
	cmd.Flags().StringVar(&role, "role", string(model.RoleAgent), "agent, tunnel or admin")
	return cmd
}
