package main

import (
	"io"

	"github.com/spf13/cobra"
)

func newMessageCmd(g *globals) *cobra.Command {
	cmd := groupCmd("message", "Messages: get one by id")
	cmd.AddCommand(&cobra.Command{
		Use:   "get MSG_ID",
		Short: "Show a message (with --json: exactly the stored JSON)",
		Args:  args("MSG_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			raw, err := c.GetMessage(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return g.emit(cmd, raw, func(w io.Writer) error { return printMessage(w, raw) })
		},
	})
	return cmd
}
