package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/wire"
)

func newScheduledCmd(g *globals) *cobra.Command {
	cmd := groupCmd("scheduled", "Delayed messages: list pending ones, cancel one, flush them now")
	cmd.AddCommand(newScheduledListCmd(g), newScheduledCancelCmd(g), newScheduledFlushCmd(g))
	return cmd
}

func newScheduledCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a pending delayed message (whoever sent it, or an admin): nothing of it is delivered",
		Long: `Cancel a pending delayed message: nothing of it is delivered. ID is the
scheduled_id "send" printed, or one from "scheduled list" (which lists
what the caller sent; an admin's token, anyone's). The author of a
delayed send, the tunnel of a delayed dispatch, or an admin may cancel
it; one already delivered is not found.`,
		Example: `  msgcenter scheduled cancel 42`,
		Args:    args("ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			id, err := strconv.ParseInt(a[0], 10, 64)
			if err != nil || id <= 0 {
				return usagef("ID %q is not an entry id (a positive integer, from scheduled list)", a[0])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.CancelScheduled(cmd.Context(), id)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "cancelled %d: %s to %s, due %s\n", res.ID, res.MsgID, strings.Join(res.Recipients, ","), fmtRFC3339(res.ScheduledDeliveryTime))
				return err
			})
		},
	}
}

func newScheduledListCmd(g *globals) *cobra.Command {
	var q wire.ScheduledQuery
	cmd := &cobra.Command{
		Use:   "list [--sender DID] [--recipient DID]",
		Short: "List pending delayed messages, soonest first (an agent's or tunnel's token: those it sent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(q.Limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Scheduled(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				fmt.Fprintf(w, "%d pending\n", res.Count)
				if len(res.Items) == 0 {
					return nil
				}
				fmt.Fprintln(w)
				tw := newTable(w, "ID", "OP", "DUE", "SENDER", "MSG_ID", "RECIPIENTS")
				for _, it := range res.Items {
					row(tw, it.ID, it.Op, fmtRFC3339(it.ScheduledDeliveryTime), it.Sender, it.MsgID, strings.Join(it.Recipients, ","))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&q.Sender, "sender", "", "only messages this DID sent (an admin's choice; anyone else lists only its own)")
	cmd.Flags().StringVar(&q.Recipient, "recipient", "", "only messages for this recipient DID")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	return cmd
}

func newScheduledFlushCmd(g *globals) *cobra.Command {
	var req wire.FlushRequest
	cmd := &cobra.Command{
		Use:   "flush [--recipient DID]",
		Short: "Deliver pending delayed messages now instead of at their time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.FlushScheduled(cmd.Context(), &req)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "flushed %s\n", plural(res.Flushed, "message"))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&req.Recipient, "recipient", "", "only messages for this recipient DID")
	return cmd
}
