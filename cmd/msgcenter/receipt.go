package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

func newReceiptCmd(g *globals) *cobra.Command {
	cmd := groupCmd("receipt", "Read receipts: set a reader's status, list receipts")
	cmd.AddCommand(newReceiptSetCmd(g), newReceiptListCmd(g))
	return cmd
}

func receiptStatuses() string {
	return strings.Join([]string{
		string(model.ReceiptUnread), string(model.ReceiptReading), string(model.ReceiptReaded),
		string(model.ReceiptAccepted), string(model.ReceiptRejected), string(model.ReceiptQuarantined),
	}, ", ")
}

func newReceiptSetCmd(g *globals) *cobra.Command {
	var req wire.ReceiptRequest
	var status string
	cmd := &cobra.Command{
		Use:     "set --msg MSG_ID --reader DID --status STATUS [--group GROUP]",
		Short:   "Record a reader's status for a message",
		Example: "  msgcenter receipt set --group did:g:team --msg cymsg:ab… --reader did:x:bob --status READED",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case req.MsgID == "":
				return usagef("--msg is required: the id of the message being read")
			case req.ReaderDID == "":
				return usagef("--reader is required: the DID of the reader")
			case status == "":
				return usagef("--status is required: one of %s", receiptStatuses())
			}
			req.Status = model.ReceiptStatus(strings.ToUpper(strings.TrimSpace(status)))
			if !model.ValidReceiptStatus(req.Status) {
				return usagef("--status %q: want one of %s", status, receiptStatuses())
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.SetReceipt(cmd.Context(), &req)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				return printReceipts(w, []model.Receipt{*res})
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&req.MsgID, "msg", "", "message id")
	fs.StringVar(&req.ReaderDID, "reader", "", "reader DID")
	fs.StringVar(&req.GroupID, "group", "", "group the message was read in")
	fs.StringVar(&status, "status", "", "one of "+receiptStatuses())
	fs.StringVar(&req.Reason, "reason", "", "why (for REJECTED or QUARANTINED)")
	return cmd
}

func newReceiptListCmd(g *globals) *cobra.Command {
	var q wire.ReceiptQuery
	cmd := &cobra.Command{
		Use:     "list [--msg MSG_ID] [--group GROUP] [--reader DID]",
		Short:   "List read receipts of a message, group and/or reader",
		Example: "  msgcenter receipt list --msg cymsg:ab…\n  msgcenter receipt list --group did:g:team --reader did:x:bob",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.MsgID == "" && q.GroupID == "" && q.Reader == "" {
				return usagef("say whose receipts: give at least one of --msg, --group, --reader")
			}
			if err := checkLimit(q.Limit); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.ListReceipts(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				if err := printReceipts(w, res.Items); err != nil {
					return err
				}
				if res.NextCursorMsgID != "" {
					_, err := fmt.Fprintf(w, "\nnext page: --cursor-at-ms %d --cursor-msg-id %s --cursor-reader %s\n",
						res.NextCursorAtMS, res.NextCursorMsgID, res.NextCursorReader)
					return err
				}
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&q.MsgID, "msg", "", "message id")
	fs.StringVar(&q.GroupID, "group", "", "group DID")
	fs.StringVar(&q.Reader, "reader", "", "reader DID")
	fs.IntVar(&q.Limit, "limit", 0, "at most this many, 1..1000 (default: the server's)")
	fs.Int64Var(&q.CursorAtMS, "cursor-at-ms", 0, "resume after this receipt (from the previous page, with the two below)")
	fs.StringVar(&q.CursorMsgID, "cursor-msg-id", "", "resume after this receipt (from the previous page)")
	fs.StringVar(&q.CursorReader, "cursor-reader", "", "resume after this receipt (from the previous page)")
	return cmd
}

func printReceipts(w io.Writer, items []model.Receipt) error {
	if len(items) == 0 {
		_, err := fmt.Fprintln(w, "no receipts")
		return err
	}
	tw := newTable(w, "MSG_ID", "READER", "GROUP", "STATUS", "AT", "REASON")
	for _, r := range items {
		row(tw, r.MsgID, r.Reader, r.GroupID, r.Status, fmtMS(r.AtMS), r.Reason)
	}
	return tw.Flush()
}
