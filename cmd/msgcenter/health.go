package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
)

func newHealthCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Check that the server is up (needs no token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// No token: health must work before any token exists, e.g. in a
			// readiness probe or while waiting for serve to start.
			if err := client.New(g.Server, "").Health(cmd.Context()); err != nil {
				return err
			}
			res := map[string]string{"status": "ok"}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "ok %s\n", g.Server)
				return err
			})
		},
	}
}
