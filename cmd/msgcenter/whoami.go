package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newWhoAmICmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Print whom the token in use speaks for: its DID and role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s (%s) at %s\n", res.DID, res.Role, g.Server)
				return err
			})
		},
	}
}
