package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/model"
)

// Retention: how long finished records and events are kept. serve takes
// the policy as flags (retentionFlags); retention show / run ask a running
// server.

func newRetentionCmd(g *globals) *cobra.Command {
	cmd := groupCmd("retention", "Retention of finished records and events: show the policy, run a pass (admin)")
	cmd.AddCommand(newRetentionShowCmd(g), newRetentionRunCmd(g))
	return cmd
}

func newRetentionShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Show the retention policy of the server (needs an admin token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.RetentionPolicy(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				tw := newTable(w, "FAMILY", "KEEP_FINISHED")
				for _, f := range sortedFamilies(res.TerminalMS) {
					row(tw, f, fmtKeepMS(res.TerminalMS[f]))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(w, "\nevents kept %s\n", fmtKeepMS(res.EventsMS))
				fmt.Fprintf(w, "idempotency keys kept %s after they were bound\n", fmtKeepMS(res.IdempotencyKeysMS))
				if res.Enabled {
					fmt.Fprintf(w, "a pass runs every %s\n", fmtKeep(time.Duration(res.IntervalMS)*time.Millisecond))
				} else {
					fmt.Fprintln(w, "background passes are off (msgcenter retention run runs one)")
				}
				fmt.Fprintln(w, "acknowledged records of consumer boxes go at the next pass")
				fmt.Fprintln(w, "a group's log (GROUP_INBOX) goes after its period read or not, once its consumers have examined it")
				return nil
			})
		},
	}
}

func newRetentionRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run one full retention pass now and say what it deleted (needs an admin token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.RunRetention(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(cmd, res, func(w io.Writer) error {
				var total int64
				var parts []string
				for _, f := range sortedFamilies(res.Records) {
					total += res.Records[f]
					parts = append(parts, fmt.Sprintf("%s %d", f, res.Records[f]))
				}
				by := ""
				if len(parts) > 0 {
					by = " (" + strings.Join(parts, ", ") + ")"
				}
				bodies := fmt.Sprintf("%d message bodies", res.Messages)
				if res.Messages == 1 {
					bodies = "1 message body"
				}
				_, err := fmt.Fprintf(w, "purged %s%s, %s, %s, %s\n", plural(int(total), "record"), by,
					bodies, plural(int(res.Events), "event"), plural(int(res.IdempotencyKeys), "idempotency key"))
				return err
			})
		},
	}
}

// sortedFamilies lists a per-family map's keys in the order of
// core.Families, then any other key.
func sortedFamilies[V any](m map[model.BoxKind]V) []model.BoxKind {
	var out []model.BoxKind
	seen := map[model.BoxKind]bool{}
	for _, f := range core.Families() {
		if _, ok := m[f]; ok {
			out, seen[f] = append(out, f), true
		}
	}
	var rest []model.BoxKind
	for f := range m {
		if !seen[f] {
			rest = append(rest, f)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i] < rest[j] })
	return append(out, rest...)
}

// fmtKeepMS renders a wire retention (0: forever).
func fmtKeepMS(ms int64) string {
	if ms <= 0 {
		return "forever"
	}
	return fmtKeep(time.Duration(ms) * time.Millisecond)
}

// fmtKeep renders a duration in days when it is whole days.
func fmtKeep(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

// Environment variables of serve's retention flags.
const (
	envRetention         = "MSGCENTER_RETENTION"
	envRetentionEvents   = "MSGCENTER_RETENTION_EVENTS"
	envRetentionInterval = "MSGCENTER_RETENTION_INTERVAL"
	envNoRetention       = "MSGCENTER_NO_RETENTION"
)

// retentionFlags are serve's retention flags.
type retentionFlags struct {
	terminal, events, interval string
	disabled                   bool
}

func (f *retentionFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.terminal, "retention", "", "how long finished records are kept, per box family: FAMILY=DURATION,… with FAMILY one of "+
		familyNames()+" and DURATION like 720h, 30d or off (keep forever); unlisted families keep them 30d; GROUP_INBOX's applies to a group's whole log, read or not (env "+envRetention+")")
	fs.StringVar(&f.events, "retention-events", "30d", "how long the event log is kept, e.g. 7d, or off (env "+envRetentionEvents+")")
	fs.StringVar(&f.interval, "retention-interval", "1m", "pause between retention passes (env "+envRetentionInterval+")")
	fs.BoolVar(&f.disabled, "no-retention", false, "run no retention passes in the background; an admin can still run one (env "+envNoRetention+")")
}

// config turns the flags (or, for flags not given, their environment
// variables) into the core's policy. Errors name the flag or variable.
func (f *retentionFlags) config(cmd *cobra.Command, g *globals) (core.RetentionConfig, error) {
	var cfg core.RetentionConfig
	// value is the flag's value, or its environment variable's when the
	// flag was not given; name is what an error should point at.
	value := func(flag, env, v string) (string, string) {
		if !cmd.Flags().Changed(flag) {
			if e := g.env(env); e != "" {
				return e, env
			}
		}
		return v, "--" + flag
	}
	var err error
	spec, name := value("retention", envRetention, f.terminal)
	if cfg.Terminal, err = parseRetention(name, spec); err != nil {
		return cfg, err
	}
	ev, name := value("retention-events", envRetentionEvents, f.events)
	if cfg.Events, err = parseKeep(name, ev); err != nil {
		return cfg, err
	}
	// A pause, not a period to keep: "off" and anything under a second are
	// refused with the one message that says what to do instead.
	iv, name := value("retention-interval", envRetentionInterval, f.interval)
	cfg.Interval, err = parseKeep(name, iv)
	switch {
	case err != nil && !strings.EqualFold(strings.TrimSpace(iv), "0"):
		return cfg, usagef("%s %q: not a pause (want e.g. 1m, 30s or 1h)", name, iv)
	case err != nil || cfg.Interval < time.Second:
		return cfg, usagef("%s %q: want a pause between passes of at least 1s, e.g. 1m (--no-retention runs no passes)", name, iv)
	}
	cfg.Disabled = f.disabled
	if !cmd.Flags().Changed("no-retention") {
		if v := g.env(envNoRetention); v != "" {
			if cfg.Disabled, err = strconv.ParseBool(v); err != nil {
				return cfg, usagef("%s=%q: want true or false", envNoRetention, v)
			}
		}
	}
	return cfg, nil
}

func familyNames() string {
	var s []string
	for _, f := range core.Families() {
		s = append(s, string(f))
	}
	return strings.Join(s, ", ")
}

// parseRetention parses FAMILY=DURATION,… (families in any letter case).
func parseRetention(name, spec string) (map[model.BoxKind]time.Duration, error) {
	out := map[model.BoxKind]time.Duration{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		fam, dur, ok := strings.Cut(item, "=")
		if !ok {
			return nil, usagef("%s: %q is not FAMILY=DURATION (e.g. INBOX=720h,CONSUMER=7d,TUNNEL_OUTBOX=off)", name, item)
		}
		f := model.BoxKind(strings.ToUpper(strings.TrimSpace(fam)))
		known := false
		for _, k := range core.Families() {
			known = known || k == f
		}
		if !known {
			return nil, usagef("%s: unknown box family %q; want one of %s", name, strings.TrimSpace(fam), familyNames())
		}
		if _, dup := out[f]; dup {
			return nil, usagef("%s: %s is given twice", name, f)
		}
		d, err := parseKeep(name+" "+string(f), dur)
		if err != nil {
			return nil, err
		}
		out[f] = d
	}
	return out, nil
}

// maxKeepDays keeps a day count within a time.Duration (about 290 years).
const maxKeepDays = 100000

// parseKeep parses a retention: a positive Go duration (720h, 90m), days
// (30d, 1d12h), or off / forever to keep forever (a negative duration, as
// core.RetentionConfig has it).
func parseKeep(name, s string) (time.Duration, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "off", "forever":
		return -1, nil
	case "":
		return 0, usagef("%s: a duration is required (e.g. 30d, 720h, or off to keep forever)", name)
	}
	var d time.Duration
	rest := t
	if days, after, ok := strings.Cut(t, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 || strings.ContainsAny(days, "+-eE") {
			return 0, usagef("%s %q: not a duration (want e.g. 30d, 1d12h, 720h, or off)", name, s)
		}
		if n > maxKeepDays {
			return 0, usagef("%s %q: at most %dd (use off to keep forever)", name, s, maxKeepDays)
		}
		d, rest = time.Duration(n*float64(24*time.Hour)), after
	}
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, usagef("%s %q: not a duration (want e.g. 30d, 1d12h, 720h, or off)", name, s)
		}
		d += r
	}
	if d < time.Millisecond {
		return 0, usagef("%s %q: must be positive (use off to keep forever)", name, s)
	}
	return d, nil
}
