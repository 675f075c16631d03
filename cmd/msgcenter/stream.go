package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/wire"
)

// newBoxStreamCmd follows a box live. It runs until Ctrl-C (or SIGTERM),
// which is a normal end, and resumes by itself across disconnects and
// server restarts (the SDK reconnects after the last seq printed).
func newBoxStreamCmd(g *globals) *cobra.Command {
	var after int64
	cmd := &cobra.Command{
		Use:   "stream OWNER BOX",
		Short: "Print a box's records as they land (replay after --after, then live) until Ctrl-C",
		Example: `  msgcenter box stream did:x:bob INBOX
  msgcenter box stream did:x:bob INBOX --after 120 --json`,
		Args: args("OWNER", "BOX"),
		RunE: func(cmd *cobra.Command, a []string) error {
			box, err := parseBox(a[1])
			if err != nil {
				return err
			}
			if after < 0 {
				return usagef("--after %d: must not be negative", after)
			}
			start := after
			if _, ok := box.ConsumerName(); ok && !cmd.Flags().Changed("after") {
				start = -1 // the server's: after the consumer's cursor
			}
			c, err := g.client(client.WithStreamRetry(retryNotice(cmd.ErrOrStderr())))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			err = c.StreamBox(cmd.Context(), a[0], box, start, func(f wire.StreamFrame) error {
				if g.JSON {
					// One compact object per line, for jq and scripts.
					b, err := json.Marshal(f)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(w, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", f.Seq, fmtMS(f.Record.CreatedAtMS), f.Record.State,
					f.Record.RecordID, summary(f.Msg))
				return err
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "start after this seq (0: replay the whole box first; a consumer's box starts after its cursor unless --after is given)")
	return cmd
}

// retryNotice tells the person watching a stream why nothing arrives
// while it reconnects (the server is down, say), once per distinct
// reason, on w (stderr, so that --json output stays clean).
func retryNotice(w io.Writer) func(error, time.Duration) {
	last := ""
	return func(err error, _ time.Duration) {
		if msg := err.Error(); msg != last {
			last = msg
			fmt.Fprintf(w, "stream interrupted (%v); reconnecting, and resuming after the last record printed\n", err)
		}
	}
}
