package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newConversationsCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "conversations OWNER",
		Short:   "List an owner's conversations with unread counts, latest first",
		Example: "  msgcenter conversations did:x:bob --limit 20",
		Args:    args("OWNER"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Conversations(cmd.Context(), a[0], limit)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if len(res.Items) == 0 {
					_, err := fmt.Fprintln(w, "no conversations")
					return err
				}
				tw := newTable(w, "THREAD", "UNREAD", "LAST_SEQ", "LAST_BOX", "UPDATED", "LAST_RECORD_ID")
				for _, cv := range res.Items {
					row(tw, cv.ThreadKey, cv.UnreadCount, cv.LastSeq, cv.LastBox, fmtMS(cv.UpdatedAtMS), cv.LastRecordID)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	return cmd
}
