package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Durable consumers: named, filtered subscriptions to a source box, each
// with its own box (consumer:NAME) and a server-side cursor. The queue verbs
// (claim, done, fail) work the consumer's box like box next / record ack /
// record fail; the log verbs (sync, ack) read it after the cursor and move
// the cursor.
//
// The API has no "who am I": a consumer is named by its owner and name.
// --owner names the owner; without it the CLI looks NAME up among the
// consumers the token sees (an agent's token sees its own; an admin's sees
// everyone's, and needs --owner when several owners use the name).

func newConsumerCmd(g *globals) *cobra.Command {
	o := &consumerOwner{}
	cmd := groupCmd("consumer", "Durable consumers: create, list, get, delete, sync, read, claim, done, fail, ack")
	cmd.Long = `Durable consumers are named, filtered subscriptions to a source box. Every
source record that matches the filter gets the consumer its own record in its
own box, consumer:NAME of the owner, with its own state, lease and retries, so
consumers of one box never affect each other. The server keeps each
consumer's cursor (the last seq it acknowledged).

Work it as a queue (claim, then done or fail each record) or read it as a log
(sync: the records after the cursor, then the cursor moves past them). The
consumer's box also works with every box command: box list OWNER consumer:NAME.

NAME is looked up among the consumers the token sees; pass --owner when that
is ambiguous (an admin token sees everyone's) or to skip the lookup.`
	cmd.PersistentFlags().StringVar(&o.flag, "owner", "", "the consumer's owner DID (default: the token's own consumer named NAME)")
	cmd.AddCommand(
		newConsumerCreateCmd(g, o),
		newConsumerListCmd(g, o),
		newConsumerGetCmd(g, o),
		newConsumerDeleteCmd(g, o),
		newConsumerSyncCmd(g, o),
		newConsumerReadCmd(g, o),
		newConsumerClaimCmd(g, o),
		newConsumerDoneCmd(g, o),
		newConsumerFailCmd(g, o),
		newConsumerAckCmd(g, o),
	)
	return cmd
}

// consumerOwner finds the owner of a consumer named on the command line.
type consumerOwner struct{ flag string }

// checkName refuses a NAME the server would refuse, before any request.
func checkName(name string) error {
	if err := model.ValidConsumerName(name); err != nil {
		return usagef("NAME: %s", strings.TrimPrefix(err.Error(), "name: "))
	}
	return nil
}

// owner returns --owner, or the owner of the only consumer named name the
// token sees.
func (o *consumerOwner) owner(ctx context.Context, c *client.Client, name string) (string, error) {
	if o.flag != "" {
		return o.flag, nil
	}
	info, err := o.lookup(ctx, c, name)
	if err != nil {
		return "", err
	}
	return info.Owner, nil
}

// resolve checks NAME, connects, and finds the consumer's owner: the
// preamble of every command that acts on one consumer.
func (o *consumerOwner) resolve(cmd *cobra.Command, g *globals, name string) (*client.Client, string, error) {
	if err := checkName(name); err != nil {
		return nil, "", err
	}
	c, err := g.client()
	if err != nil {
		return nil, "", err
	}
	owner, err := o.owner(cmd.Context(), c, name)
	if err != nil {
		return nil, "", err
	}
	return c, owner, nil
}

// info returns the consumer with its progress.
func (o *consumerOwner) info(ctx context.Context, c *client.Client, name string) (*wire.ConsumerInfo, error) {
	if o.flag != "" {
		return c.GetConsumer(ctx, o.flag, name)
	}
	return o.lookup(ctx, c, name)
}

func (o *consumerOwner) lookup(ctx context.Context, c *client.Client, name string) (*wire.ConsumerInfo, error) {
	list, err := c.ListConsumers(ctx, "")
	if err != nil {
		return nil, err
	}
	var found []wire.ConsumerInfo
	for _, ci := range list.Consumers {
		if ci.Name == name {
			found = append(found, ci)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no consumer named %q is visible to this token (consumer list shows them; pass --owner for another owner's)", name)
	case 1:
		return &found[0], nil
	}
	owners := make([]string, len(found))
	for i, ci := range found {
		owners[i] = ci.Owner
	}
	return nil, usagef("several owners have a consumer named %q (%s): pass --owner", name, strings.Join(owners, ", "))
}

// parseSource splits --source OWNER/BOX at the last '/': DIDs may contain
// '/', box names never do.
func parseSource(s string) (owner, box string, err error) {
	i := strings.LastIndex(s, "/")
	if i <= 0 || i == len(s)-1 {
		return "", "", usagef("--source %q: want OWNER/BOX, e.g. did:x:bob/INBOX", s)
	}
	return s[:i], s[i+1:], nil
}

func newConsumerCreateCmd(g *globals, o *consumerOwner) *cobra.Command {
	var source, sourceOwner, sourceBox, text, start string
	var afterSeq int64
	var f model.ConsumerFilter
	cmd := &cobra.Command{
		Use:   "create NAME (--source OWNER/BOX | --source-owner DID --source-box BOX) [filter flags]",
		Short: "Create a durable consumer of a box, with a filter",
		Long: `Create a durable consumer of a box. Filter flags select the source records
it takes: every flag given must match; a repeated (or comma separated) flag
matches any of its values. Without filter flags it takes everything.

By default it starts at the beginning (every record the source still holds);
--start now takes only what arrives from now on, --after-seq N what comes
after seq N of the source box.`,
		Example: `  msgcenter consumer create work --source did:x:bob/INBOX --topic work --from did:x:carol
  msgcenter consumer create alerts --source-owner did:x:bob --source-box INBOX --text outage --start now`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkName(a[0]); err != nil {
				return err
			}
			fl := cmd.Flags()
			switch {
			case source != "" && (fl.Changed("source-owner") || fl.Changed("source-box")):
				return usagef("--source is OWNER/BOX; drop --source-owner/--source-box or --source")
			case source != "":
				var err error
				if sourceOwner, sourceBox, err = parseSource(source); err != nil {
					return err
				}
			case sourceOwner == "" || sourceBox == "":
				return usagef("say which box to consume: --source OWNER/BOX (or --source-owner DID --source-box BOX)")
			}
			box, err := parseBox(sourceBox)
			if err != nil {
				return err
			}
			if _, ok := box.ConsumerName(); ok {
				return usagef("--source: a consumer reads a box of messages, not another consumer's box")
			}
			req := &wire.ConsumerRequest{Owner: o.flag, Name: a[0], SourceOwner: sourceOwner, SourceBox: string(box)}
			switch {
			case fl.Changed("start") && fl.Changed("after-seq"):
				return usagef("--start and --after-seq both say where to begin; give one")
			case fl.Changed("after-seq"):
				if afterSeq < 0 {
					return usagef("--after-seq %d: must not be negative", afterSeq)
				}
				req.AfterSeq = &afterSeq
			case fl.Changed("start"):
				switch s := strings.ToLower(strings.TrimSpace(start)); s {
				case wire.StartBeginning, wire.StartNow:
					req.Start = s
				default:
					return usagef("--start %q: want beginning or now", start)
				}
			}
			req.Filter = model.ConsumerFilter{From: splitList(f.From), To: splitList(f.To), Kind: splitList(f.Kind),
				Topic: splitList(f.Topic), Tags: splitList(f.Tags), Mentions: splitList(f.Mentions),
				Workspace: splitList(f.Workspace), Text: text}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.CreateConsumer(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				fmt.Fprintf(w, "created consumer %s of %s: box %s, reading %s %s after seq %d\n", res.Name, res.Owner,
					res.Box, res.SourceOwner, res.SourceBox, res.SourceSeq)
				fmt.Fprintf(w, "filter: %s\n", filterString(res.Filter))
				return nil
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&source, "source", "", "the box to consume, OWNER/BOX (e.g. did:x:bob/INBOX)")
	fs.StringVar(&sourceOwner, "source-owner", "", "the source box's owner DID")
	fs.StringVar(&sourceBox, "source-box", "", "the source box kind, e.g. INBOX")
	fs.StringSliceVar(&f.From, "from", nil, "only messages from this DID; repeatable")
	fs.StringSliceVar(&f.To, "to", nil, "only messages to this DID; repeatable")
	fs.StringSliceVar(&f.Kind, "kind", nil, "only messages of this kind; repeatable")
	fs.StringSliceVar(&f.Topic, "topic", nil, "only messages in this thread topic; repeatable")
	fs.StringSliceVar(&f.Tags, "tag", nil, "only records or messages (meta.tags) with this tag; repeatable")
	fs.StringSliceVar(&f.Mentions, "mention", nil, "only messages mentioning this DID; repeatable")
	fs.StringSliceVar(&f.Workspace, "workspace", nil, "only messages of this workspace; repeatable")
	fs.StringVar(&text, "text", "", "only messages whose title or text contains this (ignoring case)")
	fs.StringVar(&start, "start", wire.StartBeginning, "beginning (everything the source holds) or now (only new records)")
	fs.Int64Var(&afterSeq, "after-seq", 0, "start after this seq of the source box instead of --start")
	return cmd
}

// filterString renders a filter compactly: "topic=work from=did:x:a,did:x:b".
func filterString(f model.ConsumerFilter) string {
	var p []string
	for _, l := range []struct {
		key  string
		vals []string
	}{{"from", f.From}, {"to", f.To}, {"kind", f.Kind}, {"topic", f.Topic}, {"tag", f.Tags},
		{"mention", f.Mentions}, {"workspace", f.Workspace}} {
		if len(l.vals) > 0 {
			p = append(p, l.key+"="+strings.Join(l.vals, ","))
		}
	}
	if f.Text != "" {
		p = append(p, "text~"+strconv.Quote(f.Text))
	}
	if len(p) == 0 {
		return "everything"
	}
	return strings.Join(p, " ")
}

func newConsumerListCmd(g *globals, o *consumerOwner) *cobra.Command {
	var lf listFlags
	var state string
	cmd := &cobra.Command{
		Use:   "list [NAME]",
		Short: "List consumers, or with NAME the records of that consumer's box",
		Example: `  msgcenter consumer list
  msgcenter consumer list work --state UNREAD --limit 20`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 0 {
				for _, n := range []string{"state", "order", "limit", "cursor-sort-key", "cursor-record-id", "with-object"} {
					if cmd.Flags().Changed(n) {
						return usagef("--%s applies to a consumer's records: give NAME (consumer list NAME --%s …)", n, n)
					}
				}
				return runConsumerList(g, cmd, o.flag)
			}
			_, owner, err := o.resolve(cmd, g, a[0])
			if err != nil {
				return err
			}
			q, err := lf.query(owner, string(model.ConsumerBox(a[0])))
			if err != nil {
				return err
			}
			if q.States, err = parseStates("state", state); err != nil {
				return err
			}
			return runList(g, cmd, q)
		},
	}
	lf.bind(cmd.Flags())
	cmd.Flags().StringVar(&state, "state", "", "only these states, comma separated (e.g. UNREAD,READING)")
	return cmd
}

func runConsumerList(g *globals, cmd *cobra.Command, owner string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	res, err := c.ListConsumers(cmd.Context(), owner)
	if err != nil {
		return err
	}
	return g.emit(cmd, res, func(w io.Writer) error {
		if len(res.Consumers) == 0 {
			_, err := fmt.Fprintln(w, "no consumers")
			return err
		}
		tw := newTable(w, "NAME", "OWNER", "SOURCE", "FILTER", "ACKED", "LAST_SEQ", "TO_EXAMINE")
		for _, ci := range res.Consumers {
			row(tw, ci.Name, ci.Owner, ci.SourceOwner+"/"+string(ci.SourceBox), filterString(ci.Filter),
				ci.AckedSeq, ci.LastSeq, ci.SourceLastSeq-ci.SourceSeq)
		}
		return tw.Flush()
	})
}

// printConsumer renders one consumer.
func printConsumer(w io.Writer, ci *wire.ConsumerInfo) error {
	k := newKV(w)
	k.add("name", ci.Name)
	k.add("owner", ci.Owner)
	k.add("box", ci.Box)
	k.add("source", ci.SourceOwner+"/"+string(ci.SourceBox))
	k.add("filter", filterString(ci.Filter))
	k.add("examined", fmt.Sprintf("seq %d of %d in the source", ci.SourceSeq, ci.SourceLastSeq))
	k.add("cursor", fmt.Sprintf("acked seq %d of %d (%d not acknowledged)", ci.AckedSeq, ci.LastSeq, ci.LastSeq-ci.AckedSeq))
	k.add("created", fmtMS(ci.CreatedAtMS))
	k.add("updated", fmtMS(ci.UpdatedAtMS))
	return k.flush()
}

func newConsumerGetCmd(g *globals, o *consumerOwner) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show a consumer and its progress",
		Args:  args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := checkName(a[0]); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := o.info(cmd.Context(), c, a[0])
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error { return printConsumer(w, res) })
		},
	}
}

func newConsumerDeleteCmd(g *globals, o *consumerOwner) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a consumer and every record of its box (the source is untouched)",
		Args:  args("NAME"),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, owner, err := o.resolve(cmd, g, a[0])
			if err != nil {
				return err
			}
			if err := c.DeleteConsumer(cmd.Context(), owner, a[0]); err != nil {
				return err
			}
			// The route answers 204; --json gets what was deleted.
			res := map[string]any{"owner": owner, "name": a[0], "deleted": true}
			return g.emit(cmd, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted consumer %s of %s\n", a[0], owner)
				return err
			})
		},
	}
}
