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
