package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newPresenceCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "presence OWNER",
		Short: "Say whether an owner has open streams (online) on the node answering",
		Long: `Say whether OWNER holds at least one open box or event stream on the node
that answers, and how many: the online/offline signal for deciding between a
push and waiting for the next sync. With several nodes, ask each node.`,
		Example: "  msgcenter presence did:x:bob",
		Args:    args("OWNER"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Presence(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				state := "offline"
				if res.Online {
					state = "online"
				}
				_, err := fmt.Fprintf(w, "%s is %s (%d open streams)\n", res.Owner, state, res.Streams)
				return err
			})
		},
	}
}
