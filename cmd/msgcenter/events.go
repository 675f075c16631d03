package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/wire"
)

func newEventsCmd(g *globals) *cobra.Command {
	var q wire.EventQuery
	cmd := &cobra.Command{
		Use:   "events [--after ID] [--owner DID] [--limit N]",
		Short: "Read the event log, one page at a time",
		Example: `  msgcenter events --owner did:x:bob
  msgcenter events --after 1200 --limit 500`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.After < 0 {
				return usagef("--after %d: must not be negative", q.After)
			}
			if err := checkLimit(q.Limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Events(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if len(res.Items) == 0 {
					fmt.Fprintln(w, "no events")
				} else {
					tw := newTable(w, "ID", "AT", "TYPE", "OWNER", "BOX", "RECORD_OR_MSG", "STATE", "DETAIL")
					for _, e := range res.Items {
						state := ""
						if e.FromState != "" || e.ToState != "" {
							state = string(e.FromState) + "→" + string(e.ToState)
						}
						about := e.RecordID
						if about == "" {
							about = e.MsgID // a Mail written, a receipt, a delayed message
						}
						row(tw, e.EventID, fmtMS(e.AtMS), e.Type, e.Owner, e.BoxKind, about, state, e.Detail)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				_, err := fmt.Fprintf(w, "\nnext page: --after %d\n", res.NextAfter)
				return err
			})
		},
	}
	fs := cmd.Flags()
	fs.Int64Var(&q.After, "after", 0, "only events with id greater than this")
	fs.StringVar(&q.Owner, "owner", "", "only events of this owner")
	fs.IntVar(&q.Limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	return cmd
}
