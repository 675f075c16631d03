package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/wire"
)

// nextFlags are an ack's --next, --wait and --lease: the same request also
// claims the next waiting record of the acked record's box, as "box next"
// would, so a worker acks and takes its next record in one call.
type nextFlags struct {
	next        bool
	wait, lease time.Duration
}

func (f *nextFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&f.next, "next", false, "also claim the box's next waiting record and print it")
	fs.DurationVar(&f.wait, "wait", 0, "with --next: wait up to this long for a record to arrive, e.g. 10s")
	fs.DurationVar(&f.lease, "lease", 0, "with --next: how long the claim lasts, e.g. 30s (default: the server's)")
}

// request is the next to send: nil without --next.
func (f *nextFlags) request(cmd *cobra.Command) (*wire.NextRequest, error) {
	if !f.next {
		if cmd.Flags().Changed("wait") || cmd.Flags().Changed("lease") {
			return nil, usagef("--wait and --lease shape the claim of the next record: add --next or drop them")
		}
		return nil, nil
	}
	waitMS, err := durationMS("wait", f.wait)
	if err != nil {
		return nil, err
	}
	leaseMS, err := durationMS("lease", f.lease)
	if err != nil {
		return nil, err
	}
	return &wire.NextRequest{WaitMS: waitMS, LeaseMS: leaseMS}, nil
}

// ackNext sends req, an ack asking for the next record, for record id
// once check (nil: none) passes, and prints the ack, then the record
// claimed (or that none came). A claim that failed after the ack is printed
// and then reported as an error: the ack stands.
func ackNext(g *globals, cmd *cobra.Command, id string, req *wire.DeliveryRequest, check func(c *client.Client) error) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(c); err != nil {
			return err
		}
	}
	res, err := c.ReportDelivery(cmd.Context(), id, req)
	if err != nil {
		return err
	}
	err = g.emit(cmd, res, func(w io.Writer) error {
		fmt.Fprintf(w, "acked %s (%s)\n\n", res.Record.RecordID, res.Record.State)
		switch {
		case res.NextError != nil:
			return nil
		case res.Next == nil:
			_, err := fmt.Fprintf(w, "no record available in %s %s\n", res.Record.Owner, res.Record.BoxKind)
			return err
		}
		return printRecord(w, res.Next)
	})
	if err == nil && res.NextError != nil {
		err = fmt.Errorf("acked, but claiming the next record failed: %s: %s", res.NextError.Code, res.NextError.Message)
	}
	return err
}
