// Command streamload measures box streams (issue 4, point 7) against a
// running `msgcenter serve`: push latency under load, server memory per
// idle WebSocket stream, replay rate, and how long a group message takes to
// reach every streaming subscriber (issue 5). It talks to the server over HTTP
// only; the server is started separately (see docs/benchmarks.md,
// "Streams"), and -pid names its process so that its RSS and CPU time can be
// read from /proc.
//
//	streamload -mode latency -url http://127.0.0.1:7432 -data DIR -pid PID -streams 100 -sse 50 -rate 1000 -duration 20s
//	streamload -mode idle    -url ... -data DIR -pid PID -conns 10000 -boxes 10000
//	streamload -mode replay  -url ... -data DIR -pid PID -records 100000 -body 1024
//	streamload -mode group   -url ... -data DIR -pid PID -members 1000 -sends 20 -deliveries members,group
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/msgcenter/msgcenter/client"
)

type config struct {
	url, token, data string
	pid              int

	// latency
	streams, sse, rate, workers, body int
	duration                          time.Duration

	// idle
	conns, boxes, dialers int
	settle                time.Duration

	// replay
	records, fillWorkers, repeat int
	owner                        string
	transports                   string

	// group
	members, sends int
	interval       time.Duration
	deliveries     string
}

func main() {
	var c config
	mode := flag.String("mode", "", "latency, idle, replay or group")
	flag.StringVar(&c.url, "url", "http://127.0.0.1:7432", "server base URL")
	flag.StringVar(&c.token, "token", "", "admin token (default: read from -data/admin.token)")
	flag.StringVar(&c.data, "data", "", "the server's --data directory (for admin.token)")
	flag.IntVar(&c.pid, "pid", 0, "server process id, for VmRSS and CPU time from /proc (0: not reported)")
	flag.IntVar(&c.streams, "streams", 100, "latency: connected streams, one per recipient box")
	flag.IntVar(&c.sse, "sse", 50, "latency: how many of -streams use SSE (the SDK's StreamBox); the rest WebSocket")
	flag.IntVar(&c.rate, "rate", 1000, "latency: offered post_send rate, msgs/s, spread over the recipients")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "latency: how long to offer load")
	flag.IntVar(&c.workers, "workers", 64, "latency: concurrent post_send callers")
	flag.IntVar(&c.body, "body", 100, "content length in bytes (latency default 100; pass 1024 for replay)")
	flag.IntVar(&c.conns, "conns", 10000, "idle: WebSocket streams to open")
	flag.IntVar(&c.boxes, "boxes", 10000, "idle: distinct recipient boxes the streams are spread over")
	flag.IntVar(&c.dialers, "dialers", 64, "idle: concurrent dials")
	flag.DurationVar(&c.settle, "settle", 10*time.Second, "idle: wait after connecting before reading RSS")
	flag.IntVar(&c.records, "records", 100000, "replay: records in the box to catch up")
	flag.IntVar(&c.fillWorkers, "fill-workers", 16, "replay: concurrent post_sends filling the box")
	flag.IntVar(&c.repeat, "repeat", 2, "replay: runs per transport")
	flag.StringVar(&c.owner, "owner", "did:bench:replay", "replay: owner of the INBOX that is filled and replayed")
	flag.StringVar(&c.transports, "transports", "sse,ws", "replay: transports to measure, in order")
	flag.IntVar(&c.members, "members", 1000, "group: subscribers of the group, each streaming over WebSocket with a token of its own")
	flag.IntVar(&c.sends, "sends", 20, "group: dispatches through the group, one at a time")
	flag.DurationVar(&c.interval, "interval", 200*time.Millisecond, "group: time from one dispatch to the next")
	flag.StringVar(&c.deliveries, "deliveries", "members,group", "group: the group deliveries to measure, in order")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)

	if c.token == "" && c.data != "" {
		b, err := os.ReadFile(filepath.Join(c.data, "admin.token"))
		if err != nil {
			log.Fatal(err)
		}
		c.token = strings.TrimSpace(string(b))
	}
	if c.token == "" {
		log.Fatal("need -token or -data")
	}
	ctx := context.Background()
	var err error
	switch *mode {
	case "latency":
		err = runLatency(ctx, &c)
	case "idle":
		err = runIdle(ctx, &c)
	case "replay":
		err = runReplay(ctx, &c)
	case "group":
		err = runGroup(ctx, &c)
	default:
		err = fmt.Errorf("-mode must be latency, idle, replay or group, got %q", *mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// producerClient is an SDK client with a connection pool sized for n
// concurrent callers.
func producerClient(c *config, n int) *client.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = n * 2
	tr.MaxIdleConnsPerHost = n * 2
	return client.New(c.url, c.token, client.WithHTTPClient(&http.Client{Transport: tr}))
}

// wsURL is the WebSocket URL of owner's INBOX stream.
func wsURL(c *config, owner string, after int64) string {
	return "ws" + strings.TrimPrefix(c.url, "http") + "/v1/boxes/" + owner + "/INBOX/stream?after_seq=" + strconv.FormatInt(after, 10)
}

// pad returns s padded with 'x' to n bytes (s itself when longer).
func pad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat("x", n-len(s))
}

// procStatus reads one "Key: value kB" field of /proc/<pid>/status, in KiB.
func procStatus(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}

// cpuTime is the user+system CPU time a process has used so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are fields 14 and 15 of the line, 12 and 13 after ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// metric returns the value of the first /metrics line that starts with
// prefix, or "?".
func metric(c *config, prefix string) string {
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(l, prefix))
		}
	}
	return "?"
}

// raiseFileLimit lifts this process's RLIMIT_NOFILE to at least n (the soft
// limit up to the hard one; the hard one too when running as root).
func raiseFileLimit(n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Printf("getrlimit: %v", err)
		return
	}
	if lim.Cur >= n {
		return
	}
	want := lim
	want.Cur = n
	if want.Max < n {
		want.Max = n
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	log.Printf("client RLIMIT_NOFILE: soft %d, hard %d", lim.Cur, lim.Max)
}

// percentiles formats p50/p90/p99/p99.9/max of sorted durations.
func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	p := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	r := func(x time.Duration) string { return x.Round(10 * time.Microsecond).String() }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s p99.9=%s max=%s", len(d), r(p(.50)), r(p(.90)), r(p(.99)), r(p(.999)), r(d[len(d)-1]))
}
