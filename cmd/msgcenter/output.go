package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// emit prints v as indented JSON with --json, and otherwise calls human.
// Every command goes through it so --json behaves the same everywhere.
func (g *globals) emit(cmd *cobra.Command, v any, human func(w io.Writer) error) error {
	w := cmd.OutOrStdout()
	if g.JSON {
		return writeJSON(w, v)
	}
	return human(w)
}

// writeJSON prints v as indented JSON. A json.RawMessage is re-indented but
// otherwise kept byte for byte (numbers included), since a message's id is
// a hash of exactly those bytes.
func writeJSON(w io.Writer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("server sent invalid JSON: %w", err)
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns a tabwriter for column output; call Flush when done.
func newTable(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	return tw
}

// row writes one tab-separated table row.
func row(tw *tabwriter.Writer, cols ...any) {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(tw, strings.Join(s, "\t"))
}

// fmtMS renders a unix-millisecond time in local time; 0 means unset.
func fmtMS(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05.000")
}

// fmtRFC3339 renders a time the server wrote as RFC 3339 the way fmtMS
// renders milliseconds, so that one listing does not mix UTC and local
// times; a value that does not parse is shown as it is.
func fmtRFC3339(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return fmtMS(t.UnixMilli())
}

// kv prints aligned "key  value" lines, skipping empty values so that the
// detail views only show what is set.
type kv struct{ tw *tabwriter.Writer }

func newKV(w io.Writer) kv { return kv{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

func (k kv) add(key string, val any) {
	s := fmt.Sprint(val)
	if s == "" || s == "0" || s == "[]" {
		return
	}
	fmt.Fprintf(k.tw, "%s\t%s\n", key, s)
}

func (k kv) flush() error { return k.tw.Flush() }

// printRecord renders one record and, when present, its message.
func printRecord(w io.Writer, rm *wire.RecordWithMsg) error {
	r := rm.Record
	k := newKV(w)
	k.add("record_id", r.RecordID)
	k.add("owner", r.Owner)
	k.add("box", r.BoxKind)
	k.add("state", r.State)
	k.add("seq", r.Seq)
	k.add("msg_id", r.MsgID)
	k.add("thread", r.ThreadKey)
	k.add("tags", strings.Join(r.Tags, ","))
	k.add("created", fmtMS(r.CreatedAtMS))
	k.add("updated", fmtMS(r.UpdatedAtMS))
	if l := r.Lease; l != nil {
		k.add("lease_id", l.ID)
		k.add("lease_holder", l.Holder)
		k.add("lease_expires", fmtMS(l.ExpiresAtMS))
	}
	if rt := r.Route; rt != nil {
		k.add("route", routeString(rt.TunnelDID, rt.Platform, rt.ChatID, rt.Address, rt.TargetDID))
	}
	d := r.Delivery
	k.add("attempts", d.Attempts)
	k.add("next_retry", fmtMS(d.NextRetryAtMS))
	k.add("external_id", d.ExternalMsgID)
	k.add("delivered", fmtMS(d.DeliveredAtMS))
	if d.ErrorCode != "" || d.ErrorMessage != "" {
		k.add("error", strings.Trim(d.ErrorCode+": "+d.ErrorMessage, ": "))
	}
	k.add("last_error", d.LastError)
	if err := k.flush(); err != nil {
		return err
	}
	if len(rm.Msg) > 0 && string(rm.Msg) != "null" {
		fmt.Fprintln(w)
		return printMessage(w, rm.Msg)
	}
	return nil
}

func routeString(tunnel, platform, chat, address, target string) string {
	var p []string
	for _, kv := range [][2]string{{"tunnel", tunnel}, {"platform", platform}, {"chat", chat}, {"address", address}, {"target", target}} {
		if kv[1] != "" {
			p = append(p, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(p, " ")
}

// printMessage renders a message's headers and text body.
func printMessage(w io.Writer, raw json.RawMessage) error {
	m, err := client.DecodeMessage(raw)
	if err != nil {
		return err
	}
	k := newKV(w)
	k.add("from", m.From)
	k.add("source", m.Source)
	k.add("to", strings.Join(m.To, ", "))
	k.add("kind", m.Kind)
	if t := m.Thread; t != nil {
		k.add("topic", t.Topic)
		k.add("reply_to", t.ReplyTo)
		k.add("correlation_id", t.CorrelationID)
	}
	k.add("workspace", m.Workspace)
	k.add("mentions", strings.Join(m.Mentions, ", "))
	k.add("created", fmtMS(m.CreatedAtMS))
	k.add("expires", fmtMS(m.ExpiresAtMS))
	k.add("title", m.Content.Title)
	k.add("format", m.Content.Format)
	if len(m.Content.Machine) > 0 {
		k.add("machine", string(m.Content.Machine))
	}
	if err := k.flush(); err != nil {
		return err
	}
	if m.Content.Content != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, m.Content.Content)
	}
	return nil
}

// summary is a one-line gist of a record's message for tables.
func summary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	m, err := client.DecodeMessage(raw)
	if err != nil {
		return ""
	}
	text := m.Content.Title
	if text == "" {
		text = m.Content.Content
	}
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 50 {
		text = string(r[:49]) + "…"
	}
	return m.LogicalSender() + ": " + text
}

// printRecords renders records as a table. The TARGET column appears
// when some record is routed (a tunnel's outbox), LAST_ERROR when some
// attempt failed (what a dead-letter list is read for), and SUMMARY when
// the messages were fetched.
func printRecords(w io.Writer, items []wire.RecordWithMsg) error {
	if len(items) == 0 {
		fmt.Fprintln(w, "no records")
		return nil
	}
	withMsg, withTarget, withError := false, false, false
	for _, it := range items {
		withMsg = withMsg || len(it.Msg) > 0
		withTarget = withTarget || target(it.Record) != ""
		withError = withError || it.Record.Delivery.LastError != ""
	}
	header := []string{"RECORD_ID", "STATE", "SEQ", "ATTEMPTS", "THREAD", "UPDATED"}
	if withTarget {
		header = append(header, "TARGET")
	}
	if withError {
		header = append(header, "LAST_ERROR")
	}
	if withMsg {
		header = append(header, "SUMMARY")
	}
	tw := newTable(w, header...)
	for _, it := range items {
		r := it.Record
		cols := []any{r.RecordID, r.State, r.Seq, r.Delivery.Attempts, r.ThreadKey, fmtMS(r.UpdatedAtMS)}
		if withTarget {
			cols = append(cols, orDash(target(r)))
		}
		if withError {
			cols = append(cols, orDash(oneLine(r.Delivery.LastError, 60)))
		}
		if withMsg {
			cols = append(cols, summary(it.Msg))
		}
		row(tw, cols...)
	}
	return tw.Flush()
}

// target is whom a tunnel's outbox record goes to: its target DID, else
// the platform address or chat. (An INBOX record's route is the way back
// to its sender, not a target.)
func target(r model.Record) string {
	if rt := r.Route; rt != nil && r.BoxKind == model.TunnelOutbox {
		return cmp.Or(rt.TargetDID, rt.Address, rt.ChatID)
	}
	return ""
}

func orDash(s string) string { return cmp.Or(s, "-") }

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
