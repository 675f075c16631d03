package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/wire"
)

func newConversationsCmd(g *globals) *cobra.Command {
	var q wire.ConversationQuery
	var read wire.ReadConversationRequest
	cmd := &cobra.Command{
		Use:   "conversations OWNER",
		Short: "List an owner's conversations with unread counts, latest first (--read marks one read)",
		Example: `  msgcenter conversations did:x:bob --limit 20
  msgcenter conversations did:x:bob --read dm:did:x:alice              # mark it read, then list
  msgcenter conversations did:x:bob --read dm:did:x:alice --up-to 42  # up to seq 42 only`,
		Args: args("OWNER"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkLimit(q.Limit); err != nil {
				return err
			}
			if read.UpToSeq != 0 && read.ThreadKey == "" {
				return usagef("--up-to goes with --read THREAD_KEY")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			q.Owner = a[0]
			if read.ThreadKey != "" {
				for {
					res, err := c.ReadConversation(cmd.Context(), q.Owner, &read)
					if err != nil {
						return err
					}
					if !g.JSON {
						fmt.Fprintf(cmd.OutOrStdout(), "read %d records of %s\n", res.Read, read.ThreadKey)
					}
					if !res.More {
						break
					}
				}
			}
			res, err := c.Conversations(cmd.Context(), q)
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
				if err := tw.Flush(); err != nil {
					return err
				}
				if res.NextCursorThreadKey != "" {
					_, err := fmt.Fprintf(w, "\nnext page: --cursor-updated-at-ms %d --cursor-thread-key %s\n", res.NextCursorUpdatedAtMS, res.NextCursorThreadKey)
					return err
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	cmd.Flags().Int64Var(&q.CursorUpdatedAtMS, "cursor-updated-at-ms", 0, "resume after this conversation (from the previous page, with --cursor-thread-key)")
	cmd.Flags().StringVar(&q.CursorThreadKey, "cursor-thread-key", "", "resume after this conversation (from the previous page)")
	cmd.Flags().StringVar(&read.ThreadKey, "read", "", "first mark this conversation read (its THREAD key): every UNREAD record of it becomes READED")
	cmd.Flags().Int64Var(&read.UpToSeq, "up-to", 0, "with --read: only the records up to this INBOX seq")
	return cmd
}
