package main

import (
	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/wire"
)

// The dead-letter queue is not a separate store: it is every record of a
// box in state DEAD. These commands are shortcuts over box list/redrive and
// record redrive, named the way SQS and JetStream users look for them.
func newDLQCmd(g *globals) *cobra.Command {
	cmd := groupCmd("dlq", "Dead letters: list a box's DEAD records and redrive them")
	cmd.AddCommand(newDLQListCmd(g), newDLQRedriveCmd(g))
	return cmd
}

func newDLQListCmd(g *globals) *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:     "list OWNER BOX",
		Short:   "List a box's DEAD records",
		Example: "  msgcenter dlq list did:tunnel:tg TUNNEL_OUTBOX --with-object=false",
		Args:    args("OWNER", "BOX"),
		RunE: func(cmd *cobra.Command, a []string) error {
			q, err := f.query(a[0], a[1])
			if err != nil {
				return err
			}
			return runList(g, cmd, deadQuery(q))
		},
	}
	f.bind(cmd.Flags())
	return cmd
}

func newDLQRedriveCmd(g *globals) *cobra.Command {
	var limit int
	var record string
	cmd := &cobra.Command{
		Use:   "redrive (OWNER BOX [--limit N] | --record RECORD_ID)",
		Short: "Move DEAD records back to the queue: a whole box, or one --record",
		Example: `  msgcenter dlq redrive did:tunnel:tg TUNNEL_OUTBOX --limit 100
  msgcenter dlq redrive --record cyrec:0123…`,
		RunE: func(cmd *cobra.Command, a []string) error {
			if record != "" {
				if len(a) > 0 || cmd.Flags().Changed("limit") {
					return usagef("--record redrives one record; drop OWNER BOX and --limit, or drop --record")
				}
				return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
					return c.RedriveRecord(cmd.Context(), record)
				})
			}
			if err := args("OWNER", "BOX")(cmd, a); err != nil {
				return usagef("%v, or use --record RECORD_ID", err)
			}
			return runBoxRedrive(g, cmd, a[0], a[1], limit)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "redrive at most this many records (default: the server's)")
	cmd.Flags().StringVar(&record, "record", "", "redrive only this record")
	return cmd
}
