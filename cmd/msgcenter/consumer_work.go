package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// The consumer verbs that work a consumer's records: the log verbs (sync,
// ack) and the queue verbs (read, claim, done, fail).

func newConsumerSyncCmd(g *globals, o *consumerOwner) *cobra.Command {
	var limit int
	var peek bool
	cmd := &cobra.Command{
		Use:   "sync NAME",
		Short: "Print the records after the consumer's cursor, with their messages, then move the cursor past them",
		Long: `Print the records of the consumer's box after its server-side cursor, with
their messages, then acknowledge the last one printed so that the next sync
starts after it. With --peek the cursor stays. Records are not claimed: this
is the log view; use claim/done/fail to work them as a queue.`,
		Example: `  msgcenter consumer sync work
  msgcenter consumer sync work --limit 10 --peek --json`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkName(a[0]); err != nil {
				return err
			}
			if err := checkLimit(limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ci, err := o.info(ctx, c, a[0])
			if err != nil {
				return err
			}
			res, err := c.Sync(ctx, wire.SyncQuery{Owner: ci.Owner, Box: ci.Box, AfterSeq: ci.AckedSeq, Limit: limit, WithObject: true})
			if err != nil {
				return err
			}
			cursor := ci.AckedSeq
			if len(res.Items) > 0 && !peek {
				acked, err := c.AckConsumer(ctx, ci.Owner, ci.Name, res.LastSeq)
				if err != nil {
					return fmt.Errorf("read %s but could not move the cursor (run again to re-read): %w",
						plural(len(res.Items), "record"), err)
				}
				cursor, ci = acked.AckedSeq, acked
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if len(res.Items) == 0 {
					_, err := fmt.Fprintf(w, "nothing new after seq %d\n", ci.AckedSeq)
					return err
				}
				for _, it := range res.Items {
					printLogItem(w, it)
				}
				more := ""
				if left := ci.LastSeq - res.LastSeq; left > 0 {
					more = fmt.Sprintf("; %d more: run again", left)
				}
				if peek {
					fmt.Fprintf(w, "peeked at %s; cursor stays at seq %d%s\n", plural(len(res.Items), "record"), cursor, more)
				} else {
					fmt.Fprintf(w, "acknowledged through seq %d%s\n", cursor, more)
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many records, 1..1000 (default: the server's)")
	cmd.Flags().BoolVar(&peek, "peek", false, "do not move the cursor")
	return cmd
}

// printLogItem renders one record of a log read: a header line, then the
// message's text indented.
func printLogItem(w io.Writer, it wire.RecordWithMsg) {
	r := it.Record
	head := fmt.Sprintf("#%d  %s  %s", r.Seq, fmtMS(r.SortKey), r.State)
	text := ""
	if m, err := client.DecodeMessage(it.Msg); err == nil && len(it.Msg) > 0 {
		head += "  from " + m.LogicalSender()
		if m.Thread != nil && m.Thread.Topic != "" {
			head += "  topic " + m.Thread.Topic
		}
		if m.Content.Title != "" {
			text = m.Content.Title + "\n"
		}
		text += m.Content.Content
	}
	fmt.Fprintf(w, "%s  %s\n", head, r.RecordID)
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line != "" {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// inConsumer checks that a record belongs to the consumer's box, so that a
// record id from elsewhere is not acted on under the consumer's name.
func inConsumer(rec model.Record, owner, name string) error {
	if rec.BoxKind != model.ConsumerBox(name) || (owner != "" && rec.Owner != owner) {
		return fmt.Errorf("record %s is in %s of %s, not in consumer %s's box", rec.RecordID, rec.BoxKind, rec.Owner, name)
	}
	return nil
}

func newConsumerReadCmd(g *globals, o *consumerOwner) *cobra.Command {
	return &cobra.Command{
		Use:   "read NAME RECORD_ID",
		Short: "Show one record of the consumer's box and its message",
		Args:  args("NAME", "RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkName(a[0]); err != nil {
				return err
			}
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				res, err := c.GetRecord(cmd.Context(), a[1], true)
				if err != nil {
					return nil, err
				}
				return res, inConsumer(res.Record, o.flag, a[0])
			})
		},
	}
}

func newConsumerClaimCmd(g *globals, o *consumerOwner) *cobra.Command {
	var lease, wait time.Duration
	var holder string
	var noObject bool
	cmd := &cobra.Command{
		Use:   "claim NAME",
		Short: "Claim the consumer's next record with a lease (get_next on its box)",
		Long: `Claim the next UNREAD record of the consumer's box. It is held (READING)
until you report it with consumer done or consumer fail, or the lease runs
out and it returns to the queue.`,
		Example: "  msgcenter consumer claim work --wait 30s --lease 2m",
		Args:    args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkName(a[0]); err != nil {
				return err
			}
			req := &wire.NextRequest{Holder: holder}
			var err error
			if req.LeaseMS, err = durationMS("lease", lease); err != nil {
				return err
			}
			if req.WaitMS, err = durationMS("wait", wait); err != nil {
				return err
			}
			if noObject {
				with := false
				req.WithObject = &with
			}
			c, owner, err := o.resolve(cmd, g, a[0])
			if err != nil {
				return err
			}
			return runBoxNext(g, cmd, c, owner, model.ConsumerBox(a[0]), req,
				"ack with:  msgcenter consumer done "+a[0]+" %s --lease-id %s")
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&wait, "wait", 0, "wait up to this long for a record to arrive, e.g. 30s")
	fs.DurationVar(&lease, "lease", 0, "how long the claim lasts, e.g. 2m (default: the server's, 300s)")
	fs.StringVar(&holder, "holder", "", "name of the worker holding the lease (shown to others)")
	fs.BoolVar(&noObject, "no-object", false, "do not fetch the message body")
	return cmd
}

// consumerRecordAction checks that RECORD_ID is the consumer's, then runs call.
func consumerRecordAction(g *globals, cmd *cobra.Command, o *consumerOwner, name, id string, call func(c *client.Client) (*wire.RecordWithMsg, error)) error {
	if err := checkName(name); err != nil {
		return err
	}
	return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
		if err := consumerRecord(cmd, c, o, name, id); err != nil {
			return nil, err
		}
		return call(c)
	})
}

// consumerRecord checks that the record id is in consumer name's box.
func consumerRecord(cmd *cobra.Command, c *client.Client, o *consumerOwner, name, id string) error {
	cur, err := c.GetRecord(cmd.Context(), id, false)
	if err != nil {
		return err
	}
	return inConsumer(cur.Record, o.flag, name)
}

func newConsumerDoneCmd(g *globals, o *consumerOwner) *cobra.Command {
	var leaseID string
	var nf nextFlags
	cmd := &cobra.Command{
		Use:   "done NAME RECORD_ID",
		Short: "Acknowledge a claimed record of the consumer: done (READING → READED); --next also claims the next one",
		Example: `  msgcenter consumer done work cyrec:0123… --lease-id L1
  msgcenter consumer done work cyrec:0123… --lease-id L1 --next --wait 10s`,
		Args: args("NAME", "RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			next, err := nf.request(cmd)
			if err != nil {
				return err
			}
			if next == nil {
				return consumerRecordAction(g, cmd, o, a[0], a[1], func(c *client.Client) (*wire.RecordWithMsg, error) {
					return c.Ack(cmd.Context(), a[1], leaseID, "")
				})
			}
			if err := checkName(a[0]); err != nil {
				return err
			}
			return ackNext(g, cmd, a[1], &wire.DeliveryRequest{Result: &wire.DeliveryResult{OK: true}, LeaseID: leaseID, Next: next},
				func(c *client.Client) error { return consumerRecord(cmd, c, o, a[0], a[1]) })
		},
	}
	cmd.Flags().StringVar(&leaseID, "lease-id", "", "the lease_id of the claim that holds the record (next printed it); required unless the token is an admin's")
	nf.bind(cmd.Flags())
	return cmd
}

func newConsumerFailCmd(g *globals, o *consumerOwner) *cobra.Command {
	var f failFlags
	var errMsg string
	cmd := &cobra.Command{
		Use:   "fail NAME RECORD_ID",
		Short: "Report that handling a claimed record failed (retry or dead-letter)",
		Example: `  msgcenter consumer fail work cyrec:0123… --lease-id L1 --retryable --retry-after 30s --error "tool timed out"
  msgcenter consumer fail work cyrec:0123… --lease-id L1 --error "cannot parse"`,
		Args: args("NAME", "RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if cmd.Flags().Changed("error") {
				if cmd.Flags().Changed("error-message") {
					return usagef("--error is --error-message; give one of them")
				}
				f.message = errMsg
			}
			res, err := f.result(cmd)
			if err != nil {
				return err
			}
			return consumerRecordAction(g, cmd, o, a[0], a[1], func(c *client.Client) (*wire.RecordWithMsg, error) {
				return stateRecord(c.ReportDelivery(cmd.Context(), a[1], &wire.DeliveryRequest{Result: res, LeaseID: f.leaseID}))
			})
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().StringVar(&errMsg, "error", "", "what went wrong (same as --error-message)")
	return cmd
}

func newConsumerAckCmd(g *globals, o *consumerOwner) *cobra.Command {
	return &cobra.Command{
		Use:     "ack NAME SEQ",
		Short:   "Move the consumer's cursor to SEQ (never back)",
		Example: "  msgcenter consumer ack work 42",
		Args:    args("NAME", "SEQ"),
		RunE: func(cmd *cobra.Command, a []string) error {
			seq, err := strconv.ParseInt(a[1], 10, 64)
			if err != nil || seq < 0 {
				return usagef("SEQ %q: want a seq of the consumer's box (0 or more)", a[1])
			}
			c, owner, err := o.resolve(cmd, g, a[0])
			if err != nil {
				return err
			}
			res, err := c.AckConsumer(cmd.Context(), owner, a[0], seq)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "consumer %s: cursor at seq %d of %d (%d not acknowledged)\n",
					res.Name, res.AckedSeq, res.LastSeq, res.LastSeq-res.AckedSeq)
				return err
			})
		},
	}
}
