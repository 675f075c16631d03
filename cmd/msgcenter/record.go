package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func newRecordCmd(g *globals) *cobra.Command {
	cmd := groupCmd("record", "Inspect and act on one record: get, state, ack, fail, deliver, lease, redrive")
	cmd.AddCommand(
		newRecordGetCmd(g),
		newRecordStateCmd(g),
		newRecordAckCmd(g),
		newRecordFailCmd(g),
		newRecordDeliverCmd(g),
		newRecordLeaseCmd(g),
		newRecordRedriveCmd(g),
	)
	return cmd
}

// recordAction runs one call that answers a record and prints it.
func recordAction(g *globals, cmd *cobra.Command, call func(c *client.Client) (*wire.RecordWithMsg, error)) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := call(c)
	if err != nil {
		return err
	}
	return g.emit(cmd, res, func(w io.Writer) error { return printRecord(w, res) })
}

func newRecordGetCmd(g *globals) *cobra.Command {
	var noObject bool
	cmd := &cobra.Command{
		Use:   "get RECORD_ID",
		Short: "Show a record and its message",
		Args:  args("RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				return c.GetRecord(cmd.Context(), a[0], !noObject)
			})
		},
	}
	cmd.Flags().BoolVar(&noObject, "no-object", false, "do not fetch the message body")
	return cmd
}

func newRecordStateCmd(g *globals) *cobra.Command {
	var reason, leaseID string
	cmd := &cobra.Command{
		Use:   "state RECORD_ID NEW_STATE",
		Short: "Move a record to a new state (checked against the transition table)",
		Example: `  msgcenter record state cyrec:0123… ARCHIVED --reason "handled by hand"
  msgcenter record state cyrec:0123… UNREAD`,
		Args: args("RECORD_ID", "NEW_STATE"),
		RunE: func(cmd *cobra.Command, a []string) error {
			st, err := model.ParseState(a[1])
			if err != nil {
				return usagef("NEW_STATE %q is not a state; want one of %s", a[1], joinStates())
			}
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				return stateRecord(c.SetState(cmd.Context(), a[0], &wire.StateRequest{NewState: st, Reason: reason, LeaseID: leaseID}))
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept in the event log")
	cmd.Flags().StringVar(&leaseID, "lease-id", "", "the lease_id of the claim that holds the record (next printed it); required unless the token is an admin's")
	return cmd
}

func newRecordAckCmd(g *globals) *cobra.Command {
	var externalID, leaseID string
	var nf nextFlags
	cmd := &cobra.Command{
		Use:   "ack RECORD_ID",
		Short: "Acknowledge a held record: done (READED / SENT); --next also claims the box's next one",
		Long: `Acknowledge a held record: done (READED / SENT).

With --next the same request also claims the next waiting record of the
record's box, as "box next" would (--wait, --lease), and prints it: a worker
acks and takes its next record in one call.`,
		Example: `  msgcenter record ack cyrec:0123… --lease-id L1 --external-id tg:987
  msgcenter record ack cyrec:0123… --lease-id L1 --next --wait 10s --lease 30s`,
		Args: args("RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			next, err := nf.request(cmd)
			if err != nil {
				return err
			}
			if next == nil {
				return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
					return c.Ack(cmd.Context(), a[0], leaseID, externalID)
				})
			}
			return ackNext(g, cmd, a[0], &wire.DeliveryRequest{
				Result:  &wire.DeliveryResult{OK: true, ExternalMsgID: externalID},
				LeaseID: leaseID,
				Next:    next,
			}, nil)
		},
	}
	cmd.Flags().StringVar(&externalID, "external-id", "", "id the external platform gave the delivered message")
	cmd.Flags().StringVar(&leaseID, "lease-id", "", "the lease_id of the claim that holds the record (next printed it); required unless the token is an admin's")
	nf.bind(cmd.Flags())
	return cmd
}

// failFlags describe a failed delivery.
type failFlags struct {
	code, message, leaseID string
	retryable              bool
	retryAfter             time.Duration
}

func (f *failFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.code, "error-code", "", "machine-readable error code, e.g. rate_limited")
	fs.StringVar(&f.message, "error-message", "", "what went wrong, for people")
	fs.BoolVar(&f.retryable, "retryable", false, "the failure is temporary: retry with backoff (without it the failure is permanent)")
	fs.DurationVar(&f.retryAfter, "retry-after", 0, "retry no sooner than this, e.g. 5s (implies --retryable)")
	fs.StringVar(&f.leaseID, "lease-id", "", "the lease_id of the claim that holds the record (next printed it); required unless the token is an admin's")
}

func (f *failFlags) result(cmd *cobra.Command) (*wire.DeliveryResult, error) {
	ms, err := durationMS("retry-after", f.retryAfter)
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("retryable") && !f.retryable && ms > 0 {
		return nil, usagef("--retry-after asks for a retry but --retryable=false forbids one; drop one of them")
	}
	return &wire.DeliveryResult{
		OK:           false,
		ErrorCode:    f.code,
		ErrorMessage: f.message,
		// A retry-after only means something for a retry; say so on the
		// wire rather than rely on the server to infer it.
		Retryable:    f.retryable || ms > 0,
		RetryAfterMS: ms,
	}, nil
}

func newRecordFailCmd(g *globals) *cobra.Command {
	var f failFlags
	cmd := &cobra.Command{
		Use:   "fail RECORD_ID",
		Short: "Report that handling a held record failed (retry or dead-letter)",
		Example: `  msgcenter record fail cyrec:0123… --lease-id L1 --retryable --retry-after 5s --error-code rate_limited
  msgcenter record fail cyrec:0123… --lease-id L1 --error-code bad_address --error-message "chat not found"`,
		Args: args("RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			res, err := f.result(cmd)
			if err != nil {
				return err
			}
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				return stateRecord(c.ReportDelivery(cmd.Context(), a[0], &wire.DeliveryRequest{Result: res, LeaseID: f.leaseID}))
			})
		},
	}
	f.bind(cmd.Flags())
	return cmd
}

func newRecordDeliverCmd(g *globals) *cobra.Command {
	var f failFlags
	var ok bool
	var externalID string
	cmd := &cobra.Command{
		Use:   "deliver RECORD_ID (--ok [--external-id ID] | --error-code C [--retryable …])",
		Short: "Report a delivery outcome: --ok for success, failure flags otherwise",
		Args:  args("RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			failSet := false
			for _, n := range []string{"error-code", "error-message", "retryable", "retry-after"} {
				if cmd.Flags().Changed(n) {
					failSet = true
				}
			}
			var res *wire.DeliveryResult
			switch {
			case ok && failSet:
				return usagef("--ok reports success; drop the failure flags (--error-code, --error-message, --retryable, --retry-after)")
			case ok:
				res = &wire.DeliveryResult{OK: true, ExternalMsgID: externalID}
			case !failSet:
				return usagef("say how it went: --ok for success, or --error-code/--error-message (and --retryable) for a failure")
			case externalID != "":
				return usagef("--external-id belongs to a successful delivery; add --ok or drop it")
			default:
				var err error
				if res, err = f.result(cmd); err != nil {
					return err
				}
			}
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				return stateRecord(c.ReportDelivery(cmd.Context(), a[0], &wire.DeliveryRequest{Result: res, LeaseID: f.leaseID}))
			})
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().BoolVar(&ok, "ok", false, "the delivery succeeded")
	cmd.Flags().StringVar(&externalID, "external-id", "", "id the external platform gave the delivered message (with --ok)")
	return cmd
}

func newRecordLeaseCmd(g *globals) *cobra.Command {
	var lease time.Duration
	var leaseID string
	cmd := &cobra.Command{
		Use:     "lease RECORD_ID",
		Short:   "Extend the lease of a held record",
		Example: "  msgcenter record lease cyrec:0123… --lease 60s --lease-id L1",
		Args:    args("RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			ms, err := durationMS("lease", lease)
			if err != nil {
				return err
			}
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				return c.ExtendLease(cmd.Context(), a[0], &wire.LeaseRequest{LeaseMS: ms, LeaseID: leaseID})
			})
		},
	}
	cmd.Flags().DurationVar(&lease, "lease", 0, "new lease length from now, e.g. 60s (default: the server's)")
	cmd.Flags().StringVar(&leaseID, "lease-id", "", "the lease_id of the claim that holds the record (next printed it); required unless the token is an admin's")
	return cmd
}

func newRecordRedriveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "redrive RECORD_ID",
		Short: "Move one DEAD record back to the queue",
		Args:  args("RECORD_ID"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return recordAction(g, cmd, func(c *client.Client) (*wire.RecordWithMsg, error) {
				return c.RedriveRecord(cmd.Context(), a[0])
			})
		},
	}
}

// stateRecord is the record a state change or delivery report answers, for
// the commands that ask for no next record.
func stateRecord(r *wire.StateResult, err error) (*wire.RecordWithMsg, error) {
	if err != nil {
		return nil, err
	}
	return &r.RecordWithMsg, nil
}
