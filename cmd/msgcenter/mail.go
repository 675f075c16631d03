package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/wire"
)

func newMailCmd(g *globals) *cobra.Command {
	cmd := groupCmd("mail", "Aggregated bursts (dispatch --aggregate): list pending Mails, flush them now")
	cmd.AddCommand(newMailPendingCmd(g), newMailFlushCmd(g))
	return cmd
}

func newMailPendingCmd(g *globals) *cobra.Command {
	var q wire.PendingMailQuery
	cmd := &cobra.Command{
		Use:   "pending [--sender DID]",
		Short: "List Mails waiting for their bursts to end, soonest first (a tunnel's token: its own)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(q.Limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.PendingMail(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				fmt.Fprintf(w, "%d pending\n", len(res.Mail))
				if len(res.Mail) == 0 {
					return nil
				}
				fmt.Fprintln(w)
				tw := newTable(w, "BUCKET", "SENDER", "KEY", "PARTS", "OPEN", "DUE", "RECIPIENTS")
				for _, m := range res.Mail {
					due := fmtMS(m.DueAtMS)
					row(tw, m.BucketID, m.Sender, m.Key, m.Parts, m.Open, due, strings.Join(m.Recipients, ","))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&q.Sender, "sender", "", "only bursts this tunnel DID dispatched (an admin's choice; a tunnel lists only its own)")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	return cmd
}

func newMailFlushCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "flush",
		Short: "Write every pending Mail now instead of when its burst ends (admin)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.FlushMail(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "flushed %s\n", plural(res.Flushed, "Mail"))
				return err
			})
		},
	}
}
