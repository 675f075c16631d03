package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func newBoxCmd(g *globals) *cobra.Command {
	cmd := groupCmd("box", "Read and work a box: list, next, sync, stream, redrive")
	cmd.AddCommand(newBoxListCmd(g), newBoxNextCmd(g), newBoxSyncCmd(g), newBoxStreamCmd(g), newBoxRedriveCmd(g))
	return cmd
}

// listFlags are the paging flags of box list and dlq list.
type listFlags struct {
	order          string
	limit          int
	cursorSortKey  int64
	cursorRecordID string
	withObject     bool
}

func (f *listFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.order, "order", "desc", "asc (oldest first) or desc (newest first)")
	fs.IntVar(&f.limit, "limit", 0, "page size, 1..1000 (default: the server's)")
	fs.Int64Var(&f.cursorSortKey, "cursor-sort-key", 0, "resume after this sort key (from the previous page)")
	fs.StringVar(&f.cursorRecordID, "cursor-record-id", "", "resume after this record id (from the previous page)")
	fs.BoolVar(&f.withObject, "with-object", true, "include each record's message, as the API does (--with-object=false: the records alone)")
}

// query builds the ListQuery for owner/box from the flags.
func (f *listFlags) query(owner, boxArg string) (wire.ListQuery, error) {
	box, err := parseBox(boxArg)
	if err != nil {
		return wire.ListQuery{}, err
	}
	desc, err := parseOrder(f.order)
	if err != nil {
		return wire.ListQuery{}, err
	}
	if err := checkLimit(f.limit); err != nil {
		return wire.ListQuery{}, err
	}
	return wire.ListQuery{Owner: owner, Box: box, Desc: desc, Limit: f.limit,
		CursorSortKey: f.cursorSortKey, CursorRecordID: f.cursorRecordID, WithObject: f.withObject}, nil
}

// runList lists one page and prints it with a ready-to-paste next-page hint.
func runList(g *globals, cmd *cobra.Command, q wire.ListQuery) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := c.List(cmd.Context(), q)
	if err != nil {
		return err
	}
	return g.emit(cmd, res, func(w io.Writer) error {
		if err := printRecords(w, res.Items); err != nil {
			return err
		}
		if res.NextCursorRecordID != "" {
			fmt.Fprintf(w, "\nnext page: --cursor-sort-key %d --cursor-record-id %s\n", res.NextCursorSortKey, res.NextCursorRecordID)
		}
		return nil
	})
}

func newBoxListCmd(g *globals) *cobra.Command {
	var f listFlags
	var state, tag string
	cmd := &cobra.Command{
		Use:     "list OWNER BOX",
		Short:   "List a box's records by time, one page at a time",
		Example: "  msgcenter box list did:x:bob INBOX --state UNREAD --limit 20",
		Args:    args("OWNER", "BOX"),
		RunE: func(cmd *cobra.Command, a []string) error {
			q, err := f.query(a[0], a[1])
			if err != nil {
				return err
			}
			if q.States, err = parseStates("state", state); err != nil {
				return err
			}
			q.Tag = tag
			return runList(g, cmd, q)
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().StringVar(&state, "state", "", "only these states, comma separated (e.g. UNREAD,READING)")
	cmd.Flags().StringVar(&tag, "tag", "", "only records with this tag")
	return cmd
}

func newBoxNextCmd(g *globals) *cobra.Command {
	var lease, wait time.Duration
	var peek, noObject bool
	var state, holder string
	cmd := &cobra.Command{
		Use:   "next OWNER BOX",
		Short: "Claim the next record of a box with a lease (or --peek at it)",
		Long: `Claim the next waiting record of a box. The record is held (READING or
SENDING) until you ack or fail it, or the lease runs out and it returns to
the queue. Prints "no record available" (or null with --json) when the box
has nothing within --wait.`,
		Example: `  msgcenter box next did:x:bob INBOX --lease 30s --wait 10s
  msgcenter box next did:tunnel:tg TUNNEL_OUTBOX --peek`,
		Args: args("OWNER", "BOX"),
		RunE: func(cmd *cobra.Command, a []string) error {
			box, err := parseBox(a[1])
			if err != nil {
				return err
			}
			req := &wire.NextRequest{Holder: holder}
			if req.LeaseMS, err = durationMS("lease", lease); err != nil {
				return err
			}
			if req.WaitMS, err = durationMS("wait", wait); err != nil {
				return err
			}
			if req.StateFilter, err = parseStates("state", state); err != nil {
				return err
			}
			if peek {
				if cmd.Flags().Changed("lease") {
					return usagef("--peek takes no lease; drop --lease or --peek")
				}
				lock := false
				req.LockOnTake = &lock
			}
			if noObject {
				with := false
				req.WithObject = &with
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			hint := "ack with:  msgcenter record ack %[1]s --lease-id %[2]s"
			if box.IsOutbound() {
				// A sender reports how the delivery went.
				hint = "report with:  msgcenter record deliver %[1]s --lease-id %[2]s --ok\n         or:  msgcenter record fail %[1]s --lease-id %[2]s --retryable"
			}
			return runBoxNext(g, cmd, c, a[0], box, req, hint)
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&lease, "lease", 0, "how long the claim lasts, e.g. 30s (default: the server's, 300s)")
	fs.DurationVar(&wait, "wait", 0, "wait up to this long for a record to arrive, e.g. 10s")
	fs.BoolVar(&peek, "peek", false, "look at the next record without claiming it")
	fs.StringVar(&state, "state", "", "take from these states instead of the box's waiting state, comma separated")
	fs.StringVar(&holder, "holder", "", "name of the consumer holding the lease (shown to others)")
	fs.BoolVar(&noObject, "no-object", false, "do not fetch the message body")
	return cmd
}

// runBoxNext claims (or peeks at) the next record of a box and prints it;
// ackHint, a format taking the record id and the lease id, tells how to
// finish a claimed record.
func runBoxNext(g *globals, cmd *cobra.Command, c *client.Client, owner string, box model.BoxKind, req *wire.NextRequest, ackHint string) error {
	res, err := c.Next(cmd.Context(), owner, box, req)
	if err != nil {
		return err
	}
	if res == nil {
		if g.JSON {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "null")
			return err
		}
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "no record available in %s %s\n", owner, box)
		return err
	}
	return g.emit(cmd, res, func(w io.Writer) error {
		if err := printRecord(w, res); err != nil {
			return err
		}
		if l := res.Record.Lease; l != nil {
			fmt.Fprintf(w, "\n"+ackHint+"\n", res.Record.RecordID, l.ID)
		}
		return nil
	})
}

func newBoxSyncCmd(g *globals) *cobra.Command {
	var after int64
	var limit int
	var thread string
	var withObject bool
	cmd := &cobra.Command{
		Use:   "sync OWNER BOX",
		Short: "Fetch a box's records after a sequence number (incremental sync)",
		Example: `  msgcenter box sync did:x:bob INBOX --after 120
  msgcenter box sync did:x:bob INBOX --after 0 --thread dm:did:x:alice`,
		Args: args("OWNER", "BOX"),
		RunE: func(cmd *cobra.Command, a []string) error {
			box, err := parseBox(a[1])
			if err != nil {
				return err
			}
			if after < 0 {
				return usagef("--after %d: must not be negative", after)
			}
			if err := checkLimit(limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Sync(cmd.Context(), wire.SyncQuery{Owner: a[0], Box: box, AfterSeq: after,
				Limit: limit, ThreadKey: thread, WithObject: withObject})
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if err := printRecords(w, res.Items); err != nil {
					return err
				}
				fmt.Fprintf(w, "\nlast_seq %d (continue with --after %d)\n", res.LastSeq, res.LastSeq)
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.Int64Var(&after, "after", 0, "return records with seq greater than this")
	fs.IntVar(&limit, "limit", 0, "page size, 1..1000 (default: the server's)")
	fs.StringVar(&thread, "thread", "", "only this thread key, as msgcenter conversations lists them (dm:DID, group:DID, with /topic:T for a topic)")
	fs.BoolVar(&withObject, "with-object", true, "include each record's message, as the API does (--with-object=false: the records alone)")
	return cmd
}

func newBoxRedriveCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "redrive OWNER BOX",
		Short:   "Move a box's DEAD records back to the queue (same as dlq redrive)",
		Example: "  msgcenter box redrive did:tunnel:tg TUNNEL_OUTBOX --limit 100",
		Args:    args("OWNER", "BOX"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return runBoxRedrive(g, cmd, a[0], a[1], limit)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "redrive at most this many records (default: the server's)")
	return cmd
}

func runBoxRedrive(g *globals, cmd *cobra.Command, owner, boxArg string, limit int) error {
	box, err := parseBox(boxArg)
	if err != nil {
		return err
	}
	if limit < 0 {
		return usagef("--limit %d: must not be negative", limit)
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := c.RedriveBox(cmd.Context(), owner, box, &wire.RedriveRequest{Limit: limit})
	if err != nil {
		return err
	}
	return g.emit(cmd, res, func(w io.Writer) error {
		fmt.Fprintf(w, "redrove %s from %s %s\n", plural(res.Redriven, "record"), owner, box)
		for _, id := range res.RecordIDs {
			fmt.Fprintln(w, id)
		}
		return nil
	})
}

// deadQuery is the list query of a box's dead-letter records.
func deadQuery(q wire.ListQuery) wire.ListQuery {
	q.States = []model.State{model.Dead}
	return q
}
