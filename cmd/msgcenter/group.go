package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func newGroupCmd(g *globals) *cobra.Command {
	cmd := groupCmd("group", "Group subscribers: set, get, delete")
	cmd.AddCommand(newGroupSetCmd(g), newGroupGetCmd(g), newGroupDeleteCmd(g))
	return cmd
}

func newGroupDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP",
		Short: "Make a group a plain DID again (its subscribers and delivery go; its GROUP_INBOX stays until retention)",
		Args:  args("GROUP"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteGroup(cmd.Context(), a[0]); err != nil {
				return err
			}
			return g.emit(cmd, map[string]string{"deleted": a[0]}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s is no longer a group\n", a[0])
				return err
			})
		},
	}
}

func newGroupSetCmd(g *globals) *cobra.Command {
	var clear bool
	var delivery string
	cmd := &cobra.Command{
		Use:   "set GROUP DID... | set GROUP --clear",
		Short: "Replace a group's subscribers",
		Example: "  msgcenter group set did:g:team did:x:alice did:x:bob\n" +
			"  msgcenter group set did:g:town did:x:alice did:x:bob --delivery group",
		Args: func(cmd *cobra.Command, a []string) error {
			switch {
			case len(a) == 0:
				return usagef("missing GROUP and subscriber DIDs (usage: %s)", cmd.UseLine())
			case len(a) == 1 && !clear:
				return usagef("no subscribers given: list the DIDs after GROUP, or pass --clear to remove them all")
			case len(a) > 1 && clear:
				return usagef("--clear removes every subscriber; drop it or drop the DIDs")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			// The call replaces the list, so the positional DIDs are the
			// complete new membership, not additions.
			res, err := c.SetGroup(cmd.Context(), a[0], &wire.SubscribersRequest{
				Subscribers: splitList(a[1:]), Delivery: model.GroupDelivery(delivery)})
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error { return printSubscribers(w, res) })
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove every subscriber")
	cmd.Flags().StringVar(&delivery, "delivery", "", `how messages reach subscribers: "members" (a record in each INBOX) or "group" (once, in the group's GROUP_INBOX, which members read); unset keeps the current one (the subscribers are always given: list them all to change only the delivery)`)
	return cmd
}

func newGroupGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get GROUP",
		Short: "List a group's subscribers",
		Args:  args("GROUP"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.GetSubscribers(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error { return printSubscribers(w, res) })
		},
	}
}

func printSubscribers(w io.Writer, r *wire.SubscribersResult) error {
	fmt.Fprintf(w, "%s: %s, delivery %s\n", r.Group, plural(len(r.Subscribers), "subscriber"), r.Delivery)
	for _, s := range r.Subscribers {
		fmt.Fprintln(w, s)
	}
	return nil
}
