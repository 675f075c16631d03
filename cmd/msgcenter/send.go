package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// msgFlags are the flags that build a message, shared by send and dispatch.
type msgFlags struct {
	from, source, kind, topic, replyTo, title, text, format, workspace string
	to, mentions                                                       []string
	msgFile                                                            string

	delay          time.Duration
	delayMS        int64
	deliverAt      string
	idempotencyKey string
}

// msgFlagNames are the flags that --msg-file replaces.
var msgFlagNames = []string{"from", "to", "source", "kind", "topic", "reply-to", "title", "text", "format", "workspace", "mention"}

func (f *msgFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.from, "from", "", "sender DID (required unless --msg-file)")
	fs.StringSliceVar(&f.to, "to", nil, "recipient DID; repeat or comma separate for several")
	fs.StringVar(&f.source, "source", "", "author DID when --from is a group")
	fs.StringVar(&f.kind, "kind", "", "message kind: "+strings.Join(message.Kinds, ", "))
	fs.StringVar(&f.topic, "topic", "", "thread topic")
	fs.StringVar(&f.replyTo, "reply-to", "", "id of the message this replies to")
	fs.StringVar(&f.title, "title", "", "title")
	fs.StringVar(&f.text, "text", "", "body text; - reads it from stdin")
	fs.StringVar(&f.format, "format", "", "MIME type of the body, e.g. text/markdown")
	fs.StringVar(&f.workspace, "workspace", "", "workspace DID")
	fs.StringSliceVar(&f.mentions, "mention", nil, "mentioned DID; repeatable")
	fs.StringVar(&f.msgFile, "msg-file", "", "read the full message JSON from FILE (- for stdin) instead of the flags above")
	fs.DurationVar(&f.delay, "delay", 0, "deliver after this long, e.g. 10s, 2h")
	fs.Int64Var(&f.delayMS, "delay-ms", 0, "deliver after this many milliseconds")
	fs.StringVar(&f.deliverAt, "deliver-at", "", "deliver at this RFC 3339 time, e.g. 2030-01-02T15:04:05Z")
	fs.StringVar(&f.idempotencyKey, "idempotency-key", "", "a key for retrying: the same command again stores nothing new (the key is the message's nonce, in place of its time), and the key with another message is refused")
}

// message builds the message from --msg-file or the flags.
func (f *msgFlags) message(cmd *cobra.Command) (*message.Message, error) {
	if f.msgFile != "" {
		for _, n := range msgFlagNames {
			if cmd.Flags().Changed(n) {
				return nil, usagef("--msg-file holds the whole message; drop --%s or put it in the file", n)
			}
		}
		data, err := readInput(cmd, f.msgFile)
		if err != nil {
			return nil, err
		}
		m, err := message.Decode(data)
		if err != nil {
			// Decoding is strict so a misspelt field is caught here rather
			// than silently changing the message and its id.
			return nil, usagef("--msg-file %s: %v", f.msgFile, err)
		}
		return m, nil
	}
	if f.from == "" {
		return nil, usagef("--from is required: the sender's DID (or pass the whole message with --msg-file)")
	}
	if f.kind != "" && !validKind(f.kind) {
		return nil, usagef("--kind %q: want one of %s", f.kind, strings.Join(message.Kinds, ", "))
	}
	text := f.text
	if text == "-" {
		data, err := readInput(cmd, "-")
		if err != nil {
			return nil, err
		}
		text = string(data)
	}
	if text == "" && f.title == "" {
		return nil, usagef("--text is required: the message's body (or --title, or the whole message with --msg-file)")
	}
	m := &message.Message{
		From:      f.from,
		To:        splitList(f.to),
		Source:    f.source,
		Kind:      f.kind,
		Workspace: f.workspace,
		Mentions:  splitList(f.mentions),
		Content:   message.Content{Title: f.title, Format: f.format, Content: text},
	}
	m.Stamp(f.idempotencyKey, time.Now())
	if f.topic != "" || f.replyTo != "" {
		m.Thread = &message.Thread{Topic: f.topic, ReplyTo: f.replyTo}
	}
	return m, nil
}

// schedule turns --delay, --delay-ms and --deliver-at into the wire fields;
// at most one may be given.
func (f *msgFlags) schedule(cmd *cobra.Command) (delayMS, deliverAtMS *int64, err error) {
	var set []string
	for _, n := range []string{"delay", "delay-ms", "deliver-at"} {
		if cmd.Flags().Changed(n) {
			set = append(set, "--"+n)
		}
	}
	if len(set) > 1 {
		return nil, nil, usagef("%s: give only one way to delay the message", strings.Join(set, " and "))
	}
	switch {
	case cmd.Flags().Changed("delay"):
		ms, err := durationMS("delay", f.delay)
		if err != nil {
			return nil, nil, err
		}
		return &ms, nil, nil
	case cmd.Flags().Changed("delay-ms"):
		if f.delayMS < 0 {
			return nil, nil, usagef("--delay-ms %d: must not be negative", f.delayMS)
		}
		ms := f.delayMS
		return &ms, nil, nil
	case f.deliverAt != "":
		t, err := time.Parse(time.RFC3339, f.deliverAt)
		if err != nil {
			return nil, nil, usagef("--deliver-at %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z or 2030-01-02T15:04:05+08:00", f.deliverAt)
		}
		ms := t.UnixMilli()
		return nil, &ms, nil
	}
	return nil, nil, nil
}

func validKind(k string) bool {
	for _, x := range message.Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// readInput reads a file, or stdin for "-".
func readInput(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("cannot read %s: %v", name, err)
	}
	return data, nil
}

func newSendCmd(g *globals) *cobra.Command {
	var f msgFlags
	var tunnel, mode string
	var allRoutes bool
	cmd := &cobra.Command{
		Use:   "send --from DID (--to DID | --source DID) --text TEXT [flags]",
		Short: "Send a message outbound (post_send), now or later",
		Long: `Send a message (post_send): it lands in the sender's OUTBOX and, for each
recipient reachable through a tunnel route, in that tunnel's TUNNEL_OUTBOX.
To post in a group, --from is the group and --source its member, with no
--to: the group's subscribers get it.`,
		Example: `  msgcenter send --from did:x:alice --to did:x:bob --text "hello"
  msgcenter send --from did:x:team --source did:x:alice --text "standup at 10"
  msgcenter send --from did:x:alice --to did:x:bob --text "standup" --delay 2h
  msgcenter send --msg-file msg.json --idempotency-key order-42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := f.message(cmd)
			if err != nil {
				return err
			}
			delay, at, err := f.schedule(cmd)
			if err != nil {
				return err
			}
			req := &wire.PostSendRequest{Msg: m, IdempotencyKey: f.idempotencyKey, DelayMS: delay, DeliverAtMS: at}
			if tunnel != "" || allRoutes || mode != "" {
				req.SendCtx = &wire.SendCtx{TunnelDID: tunnel, AllRoutes: allRoutes, Mode: mode}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.PostSend(cmd.Context(), req)
			if err != nil {
				return err
			}
			if err := g.emit(cmd, res, func(w io.Writer) error { return printSendResult(w, res) }); err != nil {
				return err
			}
			return notOK(res.OK, res.Reason)
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().StringVar(&tunnel, "tunnel", "", "deliver only through routes of this tunnel DID (a delayed send whose recipient has no such route by its due time goes through the routes it has then)")
	cmd.Flags().BoolVar(&allRoutes, "all-routes", false, "deliver through every route of a recipient, not only the best one")
	cmd.Flags().StringVar(&mode, "mode", "", "delivery mode passed to the tunnel")
	return cmd
}

func newDispatchCmd(g *globals) *cobra.Command {
	var f msgFlags
	var ing model.Route
	var agg aggFlags
	cmd := &cobra.Command{
		Use:   "dispatch --from DID --to DID [flags]",
		Short: "Deliver an inbound message into inboxes (what tunnels do)",
		Example: `  msgcenter dispatch --from did:tg:user:42 --to did:x:bob --text "hi" \
      --tunnel-did did:tunnel:tg --platform telegram --chat-id 42

  # part of a burst: bob gets one Mail once chat 42 is quiet for 5s
  msgcenter dispatch --from did:tg:user:42 --to did:x:bob --text "hi" --aggregate tg:42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := f.message(cmd)
			if err != nil {
				return err
			}
			delay, at, err := f.schedule(cmd)
			if err != nil {
				return err
			}
			req := &wire.DispatchRequest{Msg: m, IdempotencyKey: f.idempotencyKey, DelayMS: delay, DeliverAtMS: at}
			if req.Aggregate, err = agg.request(cmd); err != nil {
				return err
			}
			// Only send an ingress context when one was described: the
			// server tells "no context" from "empty context" by presence.
			if ing.TunnelDID != "" || ing.Platform != "" || ing.ChatID != "" || ing.AccountID != "" || ing.Address != "" {
				r := ing
				req.IngressCtx = &r
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Dispatch(cmd.Context(), req)
			if err != nil {
				return err
			}
			if err := g.emit(cmd, res, func(w io.Writer) error { return printDispatchResult(w, res) }); err != nil {
				return err
			}
			return notOK(res.OK, res.Reason)
		},
	}
	f.bind(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&ing.TunnelDID, "tunnel-did", "", "ingress: the tunnel the message came through")
	fs.StringVar(&ing.Platform, "platform", "", "ingress: platform name, e.g. telegram")
	fs.StringVar(&ing.ChatID, "chat-id", "", "ingress: platform chat id (replies go back there)")
	fs.StringVar(&ing.AccountID, "account-id", "", "ingress: platform account id")
	fs.StringVar(&ing.Address, "address", "", "ingress: platform address of the sender")
	agg.bind(fs)
	return cmd
}

// notOK turns a 200 answer with ok=false into a failing exit status: a
// script should not mistake "nothing was delivered" for success.
func notOK(ok bool, reason string) error {
	if ok {
		return nil
	}
	if reason == "" {
		reason = "the server did not accept the message"
	}
	return fmt.Errorf("not delivered: %s", reason)
}

// scheduledIDText shows a delayed send's entry, with how to cancel it
// while its time is to come. A repeat of the send (the same idempotency
// key) is answered with the entry after its time too, when there is
// nothing left to cancel.
func scheduledIDText(id int64, at string, now time.Time) string {
	if id == 0 {
		return ""
	}
	if due, err := time.Parse(time.RFC3339Nano, at); err == nil && !due.After(now) {
		return fmt.Sprintf("%d (its time has passed: delivered, unless it was cancelled)", id)
	}
	return fmt.Sprintf("%d (cancel with: msgcenter scheduled cancel %d)", id, id)
}

func printSendResult(w io.Writer, r *wire.PostSendResult) error {
	k := newKV(w)
	k.add("msg_id", r.MsgID)
	k.add("outbox_record", r.OutboxRecordID)
	k.add("scheduled_for", fmtRFC3339(r.ScheduledDeliveryTime))
	k.add("scheduled_id", scheduledIDText(r.ScheduledID, r.ScheduledDeliveryTime, time.Now()))
	k.add("local", strings.Join(r.LocalRecipients, ", "))
	k.add("dropped", strings.Join(r.DroppedRecipients, ", "))
	k.add("reason", r.Reason)
	if err := k.flush(); err != nil {
		return err
	}
	if len(r.Deliveries) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w, "TUNNEL", "TARGET", "RECORD_ID", "PRIORITY", "MODE")
	for _, d := range r.Deliveries {
		row(tw, d.TunnelDID, d.TargetDID, d.RecordID, d.Priority, d.Mode)
	}
	return tw.Flush()
}

func printDispatchResult(w io.Writer, r *wire.DispatchResult) error {
	k := newKV(w)
	k.add("msg_id", r.MsgID)
	k.add("scheduled_for", fmtRFC3339(r.ScheduledDeliveryTime))
	k.add("scheduled_id", scheduledIDText(r.ScheduledID, r.ScheduledDeliveryTime, time.Now()))
	k.add("delivered", strings.Join(r.DeliveredRecipients, ", "))
	k.add("group", r.DeliveredGroup)
	k.add("agents", strings.Join(r.DeliveredAgents, ", "))
	k.add("dropped", strings.Join(r.DroppedRecipients, ", "))
	k.add("reason", r.Reason)
	if a := r.Aggregate; a != nil {
		switch {
		case a.Duplicate && a.MailID != "":
			k.add("aggregate", "duplicate: already in Mail "+a.MailID)
		case a.Duplicate && a.BucketID == 0:
			k.add("aggregate", "duplicate: its idempotency key was used before")
		default:
			dup := ""
			if a.Duplicate {
				dup = "duplicate: "
			}
			k.add("aggregate", fmt.Sprintf("%spart %d of pending Mail %d, due %s", dup, a.Parts, a.BucketID, fmtMS(a.DueAtMS)))
		}
	}
	return k.flush()
}
