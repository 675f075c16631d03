// Command msgload is msgcenter's load tool (issue 5). It drives a live
// msgcenter server over its real HTTP API, and the same workload against
// NATS JetStream and River (on PostgreSQL) for comparison, and prints one
// line per phase and the ratio msgcenter/peer per phase from the same run.
//
// Phases:
//
//	enqueue  N messages of S bytes from P producers, each waiting for the
//	         system's acknowledgement (msgcenter: post_send's 200)
//	claim    C consumers each taking one message and waiting for a
//	         confirmed ack, until the N are consumed
//	mixed    producers offering R msgs/s for D while C consumers take them;
//	         end-to-end latency from the send's acknowledgement to the claim
//	group    one message to a group of G subscribers, repeated K times
//
// It is its own module so that the server's module never pulls in the
// peers' client libraries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	var cfg Config
	var o opts
	flag.StringVar(&cfg.MsgcenterURL, "url", "http://127.0.0.1:7420", "msgcenter server URL")
	flag.StringVar(&cfg.MsgcenterToken, "token", "", "msgcenter admin token (default: read from -data/admin.token)")
	flag.StringVar(&o.data, "data", "msgcenter-data", "the msgcenter server's --data directory, for admin.token")
	flag.StringVar(&cfg.NATSURL, "nats", "nats://127.0.0.1:4222", "NATS server with JetStream")
	flag.StringVar(&cfg.PostgresURL, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL for River")
	flag.StringVar(&o.targets, "targets", "msgcenter,nats,river", "comma list of msgcenter, nats, river")
	flag.StringVar(&o.phases, "phases", "enqueue,claim,mixed,group", "comma list of enqueue, claim, mixed, group")
	flag.IntVar(&o.n, "n", 20000, "enqueue/claim: messages")
	flag.IntVar(&cfg.Size, "size", 1024, "body bytes")
	flag.IntVar(&cfg.Producers, "producers", 8, "concurrent producers")
	flag.IntVar(&cfg.Consumers, "consumers", 8, "concurrent consumers")
	flag.BoolVar(&cfg.AckNext, "ack-next", false, "msgcenter: consumers acknowledge and claim the next message in one request (a state change with next, like JetStream's AckNext); the peers are driven as before")
	flag.IntVar(&o.rate, "rate", 5000, "mixed: offered msgs/s over all producers")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "mixed: how long to offer load")
	flag.StringVar(&o.groups, "groups", "1000,10000", "group: comma list of group sizes")
	flag.IntVar(&o.groupSends, "group-sends", 20, "group: messages per group size")
	flag.StringVar(&o.deliveries, "group-delivery", "members", `group: comma list of "members" (a record per subscriber: phase group/G) and "group" (stored once in the group's box: phase group-once/G)`)
	flag.IntVar(&o.pid, "pid", 0, "msgcenter server's process id: report its peak RSS and CPU time per phase (0: not reported)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write msgload's own CPU profile here: the load generator shares the machine with the server")
	flag.Parse()
	if cfg.MsgcenterToken == "" {
		if b, err := os.ReadFile(o.data + "/admin.token"); err == nil {
			cfg.MsgcenterToken = strings.TrimSpace(string(b))
		}
	}
	cfg.Run = fmt.Sprintf("%x", time.Now().UnixNano())
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "msgload: -cpuprofile:", err)
			os.Exit(2)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), cfg, o); err != nil {
		fmt.Fprintln(os.Stderr, "msgload:", err)
		pprof.StopCPUProfile() // os.Exit skips the deferred stop
		os.Exit(1)
	}
}

type opts struct {
	data, targets, phases, groups, deliveries string
	cpuprofile                                string
	n, rate, groupSends, pid                  int
	duration                                  time.Duration
}

func newTarget(name string) (Target, error) {
	switch name {
	case "msgcenter":
		return &msgcenterTarget{}, nil
	case "nats":
		return &natsTarget{}, nil
	case "river":
		return &riverTarget{}, nil
	}
	return nil, fmt.Errorf("unknown target %q (want msgcenter, nats or river)", name)
}

func run(ctx context.Context, cfg Config, o opts) error {
	phases := strings.Split(o.phases, ",")
	for _, p := range phases {
		switch p {
		case "enqueue", "claim", "mixed", "group":
		default:
			return fmt.Errorf("-phases: unknown phase %q", p)
		}
	}
	var groups []int
	for _, g := range strings.Split(o.groups, ",") {
		var n int
		if _, err := fmt.Sscan(g, &n); err != nil || n < 1 {
			return fmt.Errorf("-groups: bad size %q", g)
		}
		groups = append(groups, n)
	}
	for _, d := range strings.Split(o.deliveries, ",") {
		if d != "members" && d != "group" {
			return fmt.Errorf(`-group-delivery: unknown delivery %q (want "members" or "group")`, d)
		}
	}
	fmt.Printf("# msgload run %s: n=%d size=%d producers=%d consumers=%d rate=%d/s duration=%s\n",
		cfg.Run, o.n, cfg.Size, cfg.Producers, cfg.Consumers, o.rate, o.duration)
	var all []result
	for _, name := range strings.Split(o.targets, ",") {
		t, err := newTarget(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		res := runTarget(ctx, t, cfg, o, phases, groups)
		for _, r := range res {
			printResult(r)
		}
		all = append(all, res...)
	}
	printRatios(all)
	return nil
}

func runTarget(ctx context.Context, t Target, cfg Config, o opts, phases []string, groups []int) []result {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := t.Open(octx, cfg)
	cancel()
	if err != nil {
		why := strings.TrimPrefix(err.Error(), errSkip.Error()+": ")
		if !errors.Is(err, errSkip) {
			why = "failed to open: " + why
		}
		return []result{{target: t.Name(), phase: "all", skipped: why}}
	}
	defer t.Close()
	var rss *rssWatch
	if o.pid > 0 && t.Name() == "msgcenter" {
		if _, err := vmRSS(o.pid); err != nil {
			return []result{{target: t.Name(), phase: "all", skipped: "-pid: " + err.Error()}}
		}
		rss = &rssWatch{pid: o.pid}
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		go rss.run(rctx)
	}
	var out []result
	// run runs one phase; with -pid its note has the server's peak RSS
	// and the CPU it used.
	run := func(phase func() result) {
		var cpu0 time.Duration
		if rss != nil {
			cpu0, _ = cpuTime(o.pid)
		}
		r := phase()
		if rss != nil {
			note := rss.takePeak()
			if r.skipped == "" {
				r.note = strings.TrimSpace(note + " " + cpuNote(o.pid, cpu0, r.n))
			}
		}
		out = append(out, r)
	}
	for _, p := range phases {
		switch p {
		case "enqueue":
			run(func() result { return enqueue(ctx, t, cfg, o.n) })
		case "claim":
			run(func() result { return claim(ctx, t, cfg, o.n) })
		case "mixed":
			run(func() result { return mixed(ctx, t, cfg, o.rate, o.duration) })
		case "group":
			for _, d := range strings.Split(o.deliveries, ",") {
				for _, g := range groups {
					run(func() result { return group(ctx, t, cfg, g, d, o.groupSends) })
				}
			}
		}
	}
	return out
}

func printResult(r result) {
	if r.skipped != "" {
		fmt.Printf("%-10s %-16s skipped: %s\n", r.target, r.phase, r.skipped)
		return
	}
	lat := ""
	if r.lat != nil {
		lat = r.lat.String()
	}
	fmt.Printf("%-10s %-16s n=%-7d %9.0f msgs/s  %s  %s\n", r.target, r.phase, r.n, r.rate(), lat, r.note)
}

// printRatios prints msgcenter/peer for every phase both ran: rates as
// msgcenter÷peer (above 1 is better), latencies as p99 peer÷msgcenter
// (above 1 is better too).
func printRatios(all []result) {
	base := map[string]result{}
	for _, r := range all {
		if r.target == "msgcenter" && r.skipped == "" {
			base[r.phase] = r
		}
	}
	for _, r := range all {
		if r.target == "msgcenter" {
			continue
		}
		if r.skipped != "" {
			fmt.Printf("ratio msgcenter/%-6s %-16s skipped (%s)\n", r.target, r.phase, r.skipped)
			continue
		}
		b, ok := base[r.phase]
		if !ok || r.rate() == 0 {
			continue
		}
		line := fmt.Sprintf("ratio msgcenter/%-6s %-16s rate %.2fx", r.target, r.phase, b.rate()/r.rate())
		if r.lat != nil && b.lat != nil && b.lat.pct(99) > 0 {
			line += fmt.Sprintf("  p99 %s vs %s", ms(b.lat.pct(99)), ms(r.lat.pct(99)))
		}
		fmt.Println(line)
	}
}
