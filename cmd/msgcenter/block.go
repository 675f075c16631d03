package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/wire"
)

func newBlockCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "block OWNER DID",
		Short:   "Make OWNER refuse messages from DID",
		Example: "  msgcenter block did:x:bob did:x:spammer",
		Args:    args("OWNER", "DID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runBlock(g, cmd, a, (*client.Client).Block)
		},
	}
}

func newUnblockCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unblock OWNER DID",
		Short: "Let OWNER receive messages from DID again",
		Args:  args("OWNER", "DID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runBlock(g, cmd, a, (*client.Client).Unblock)
		},
	}
}

type blockFunc func(c *client.Client, ctx context.Context, owner, did string) (*wire.BlockResult, error)

func runBlock(g *globals, cmd *cobra.Command, a []string, call blockFunc) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := call(c, cmd.Context(), a[0], a[1])
	if err != nil {
		return err
	}
	return g.emit(cmd, res, func(w io.Writer) error {
		if res.Blocked {
			_, err := fmt.Fprintf(w, "%s blocks %s\n", res.Owner, res.DID)
			return err
		}
		_, err := fmt.Fprintf(w, "%s does not block %s\n", res.Owner, res.DID)
		return err
	})
}

func newBlocksCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "blocks OWNER",
		Short:   "List whom OWNER blocks",
		Example: "  msgcenter blocks did:x:bob",
		Args:    args("OWNER"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Blocks(cmd.Context(), a[0], limit)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if len(res.Items) == 0 {
					_, err := fmt.Fprintf(w, "%s blocks no one\n", a[0])
					return err
				}
				tw := newTable(w, "BLOCKED", "SINCE")
				for _, b := range res.Items {
					row(tw, b.DID, fmtMS(b.AtMS))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	return cmd
}
