package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// parseBox parses a BOX argument in any letter case.
func parseBox(s string) (model.BoxKind, error) {
	b, err := model.ParseBoxKind(s)
	if err != nil {
		return "", usagef("BOX %q is not a box kind; want one of %s, or consumer:NAME", s, joinBoxKinds())
	}
	return b, nil
}

func joinBoxKinds() string {
	s := make([]string, len(model.BoxKinds))
	for i, b := range model.BoxKinds {
		s[i] = string(b)
	}
	return strings.Join(s, ", ")
}

// parseStates parses a comma separated --state value.
func parseStates(flag, s string) ([]model.State, error) {
	var out []model.State
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		st, err := model.ParseState(p)
		if err != nil {
			return nil, usagef("--%s: %q is not a state; want one of %s", flag, strings.TrimSpace(p), joinStates())
		}
		out = append(out, st)
	}
	return out, nil
}

func joinStates() string {
	s := make([]string, len(model.States))
	for i, st := range model.States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// durationMS converts a duration flag to milliseconds, refusing negative
// values and sub-millisecond remainders that the wire cannot carry.
func durationMS(flag string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, usagef("--%s %s: must not be negative", flag, d)
	}
	if d%time.Millisecond != 0 {
		return 0, usagef("--%s %s: the smallest unit is 1ms", flag, d)
	}
	return d.Milliseconds(), nil
}

// checkLimit rejects page sizes the server would refuse anyway, with the
// bound in the message.
func checkLimit(limit int) error {
	if limit < 0 || limit > wire.MaxLimit {
		return usagef("--limit %d: want 1..%d (0 uses the server's default)", limit, wire.MaxLimit)
	}
	return nil
}

// parseOrder maps --order to ListQuery.Desc.
func parseOrder(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "desc", "":
		return true, nil
	case "asc":
		return false, nil
	}
	return false, usagef("--order %q: want asc or desc", s)
}

// splitList splits repeatable, comma separated flag values and drops
// empty items, so --to a,b --to c and --to a --to b,c mean the same.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// plural formats a count with its noun.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// aggFlags are dispatch's --aggregate flags.
type aggFlags struct {
	key             string
	window, maxWait time.Duration
}

func (a *aggFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&a.key, "aggregate", "", "make the message a part of burst KEY (a chat, a session): its recipients get the burst as one Mail once it pauses")
	fs.DurationVar(&a.window, "aggregate-window", 0, "with --aggregate: quiet time that ends the burst (default: the server's --mail-window)")
	fs.DurationVar(&a.maxWait, "aggregate-max-wait", 0, "with --aggregate: longest wait after the burst's first part (default: the server's --mail-max-wait, or the window if longer)")
}

// request turns the flags into the wire field (nil without --aggregate).
func (a *aggFlags) request(cmd *cobra.Command) (*wire.Aggregate, error) {
	changed := cmd.Flags().Changed
	if !changed("aggregate") {
		if changed("aggregate-window") || changed("aggregate-max-wait") {
			return nil, usagef("--aggregate-window and --aggregate-max-wait need --aggregate KEY")
		}
		return nil, nil
	}
	if strings.TrimSpace(a.key) == "" {
		return nil, usagef("--aggregate needs a key naming the burst (a chat, a session)")
	}
	out := &wire.Aggregate{Key: a.key}
	for _, f := range []struct {
		name string
		d    time.Duration
		dst  **int64
	}{{"aggregate-window", a.window, &out.WindowMS}, {"aggregate-max-wait", a.maxWait, &out.MaxWaitMS}} {
		if !changed(f.name) {
			continue
		}
		ms, err := durationMS(f.name, f.d)
		if err != nil {
			return nil, err
		}
		if ms == 0 {
			return nil, usagef("--%s must be at least 1ms", f.name)
		}
		*f.dst = &ms
	}
	return out, nil
}
