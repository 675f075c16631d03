package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// runGroup measures the read side of a group fan-out: -members subscribers,
// each with a token of its own and one WebSocket stream, and -sends
// messages dispatched through the group one after another, -interval
// apart. With delivery "members" each subscriber streams its own INBOX;
// with "group" every subscriber streams the group's GROUP_INBOX. Both are
// timed from the dispatch's 200 (t0) to each subscriber's frame: "push" is
// every (message, subscriber) pair, "all" is the last subscriber of each
// message, which is when the fan-out has reached everyone who is online.
func runGroup(ctx context.Context, c *config) error {
	raiseFileLimit(uint64(c.members) + 1024)
	for _, d := range strings.Split(c.deliveries, ",") {
		if err := groupRound(ctx, c, model.GroupDelivery(strings.TrimSpace(d))); err != nil {
			return fmt.Errorf("delivery %s: %w", d, err)
		}
	}
	return nil
}

func groupRound(ctx context.Context, c *config, delivery model.GroupDelivery) error {
	if !model.ValidGroupDelivery(delivery) {
		return fmt.Errorf("unknown delivery %q (want members or group)", delivery)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	grp := fmt.Sprintf("did:bench:%s:group-%s", run, delivery)
	g := c.members
	subs := make([]string, g)
	for i := range subs {
		subs[i] = fmt.Sprintf("did:bench:%s:%s:m%d", run, delivery, i)
	}
	admin := producerClient(c, 64)
	if _, err := admin.SetGroup(ctx, grp, &wire.SubscribersRequest{Subscribers: subs, Delivery: delivery}); err != nil {
		return err
	}
	tokens, err := memberTokens(ctx, c, subs)
	if err != nil {
		return err
	}

	// arrived[k][i] is when subscriber i read message k (0: not yet).
	total := 1 + c.sends // message 0 warms every stream up
	arrived := make([][]atomic.Int64, total)
	for k := range arrived {
		arrived[k] = make([]atomic.Int64, g)
	}
	var pending atomic.Int64 // frames still to come for the current message
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	marker := []byte(run + "#")

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var streams sync.WaitGroup
	streamErrs := make(chan error, g)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	dialed := make(chan error, g)
	sem := make(chan struct{}, 64) // concurrent dials
	for i := range g {
		owner, box := subs[i], model.Inbox
		if delivery == model.DeliverToGroup {
			owner, box = grp, model.GroupInbox
		}
		u := fmt.Sprintf("ws%s/v1/boxes/%s/%s/stream?after_seq=0", strings.TrimPrefix(c.url, "http"),
			url.PathEscape(owner), box)
		streams.Go(func() {
			sem <- struct{}{}
			conn, _, err := websocket.Dial(sctx, u, &websocket.DialOptions{HTTPClient: hc,
				HTTPHeader: http.Header{"Authorization": {"Bearer " + tokens[i]}}})
			<-sem
			dialed <- err
			if err != nil {
				return
			}
			defer conn.CloseNow()
			conn.SetReadLimit(4 << 20)
			// The readers share the two cores with the server, so each does
			// as little as a reader can: no context timer per read (the end
			// of sctx closes the connection instead), one buffer reused, and
			// the marker found in the frame's bytes without decoding them.
			// The marker is in the message's content and nowhere else.
			defer context.AfterFunc(sctx, func() { _ = conn.CloseNow() })()
			var buf bytes.Buffer
			for {
				_, r, err := conn.Reader(context.Background())
				if err == nil {
					buf.Reset()
					_, err = buf.ReadFrom(r)
				}
				if err != nil {
					if sctx.Err() == nil {
						streamErrs <- fmt.Errorf("stream %d: %w", i, err)
					}
					return
				}
				at := now()
				if k := frameIndex(buf.Bytes(), marker); k >= 0 && k < total && arrived[k][i].CompareAndSwap(0, at) {
					pending.Add(-1)
				}
			}
		})
	}
	for range g {
		if err := <-dialed; err != nil {
			return fmt.Errorf("dial: %w", err)
		}
	}

	sender := producerClient(c, 1)
	send := func(k int) (int64, error) {
		m := &message.Message{From: grp, Source: "did:bench:" + run + ":author", Kind: message.KindGroupMsg,
			Content: message.Content{Content: pad(run+"#"+strconv.Itoa(k)+";", c.body)}}
		pending.Store(int64(g))
		_, err := sender.Dispatch(ctx, &wire.DispatchRequest{Msg: m})
		return now(), err
	}
	// await waits until every subscriber has message k (or gives up).
	await := func(k int, limit time.Duration) error {
		deadline := time.Now().Add(limit)
		for pending.Load() > 0 {
			select {
			case err := <-streamErrs:
				return err
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("message %d: %d of %d subscribers had no frame after %s", k, pending.Load(), g, limit)
			}
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	}
	if _, err := send(0); err != nil {
		return fmt.Errorf("warm-up dispatch: %w", err)
	}
	if err := await(0, 60*time.Second); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	log.Printf("delivery %s: %d subscribers streaming over WebSocket; %d dispatches, %s apart, %d-byte content",
		delivery, g, c.sends, c.interval, c.body)

	t0 := make([]int64, total)
	var dispatch, push, all []time.Duration
	cpu0, self0, start := cpuTime(c.pid), cpuTime(os.Getpid()), time.Now()
	for k := 1; k < total; k++ {
		next := time.Now().Add(c.interval)
		before := now()
		at, err := send(k)
		if err != nil {
			return fmt.Errorf("dispatch %d: %w", k, err)
		}
		t0[k] = at
		dispatch = append(dispatch, time.Duration(at-before))
		if err := await(k, 30*time.Second); err != nil {
			return err
		}
		last := int64(0)
		for i := range g {
			t := arrived[k][i].Load()
			push = append(push, time.Duration(t-at))
			last = max(last, t)
		}
		all = append(all, time.Duration(last-at))
		time.Sleep(time.Until(next))
	}
	elapsed := time.Since(start)
	cpu1, self1 := cpuTime(c.pid), cpuTime(os.Getpid())
	stop()
	streams.Wait()

	fmt.Printf("delivery %-8s subscribers %d, dispatches %d\n", delivery, g, c.sends)
	if c.pid != 0 {
		fmt.Printf("  server CPU per dispatch:        %s\n", ((cpu1 - cpu0) / time.Duration(c.sends)).Round(100*time.Microsecond))
	}
	fmt.Printf("  this program's CPU per dispatch: %s (%s elapsed)\n", ((self1 - self0) / time.Duration(c.sends)).Round(100*time.Microsecond), elapsed.Round(time.Millisecond))
	fmt.Printf("  dispatch (send -> 200):         %s\n", percentiles(dispatch))
	fmt.Printf("  push (200 -> each frame):       %s\n", percentiles(push))
	fmt.Printf("  all (200 -> last subscriber):   %s\n", percentiles(all))
	return nil
}

// frameIndex is the message number in a "<run>#<k>;" marker, or -1.
func frameIndex(msg, marker []byte) int {
	i := bytes.Index(msg, marker)
	if i < 0 {
		return -1
	}
	rest := msg[i+len(marker):]
	j := bytes.IndexByte(rest, ';')
	if j < 0 {
		return -1
	}
	k, err := strconv.Atoi(string(rest[:j]))
	if err != nil {
		return -1
	}
	return k
}

// memberTokens creates an agent token for each DID, 32 at a time.
func memberTokens(ctx context.Context, c *config, dids []string) ([]string, error) {
	admin := producerClient(c, 32)
	out := make([]string, len(dids))
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(dids) {
					return
				}
				res, err := admin.CreateToken(ctx, &wire.TokenRequest{DID: dids[i], Role: model.RoleAgent})
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, fmt.Errorf("token for %s: %w", dids[i], err))
					mu.Unlock()
					return
				}
				out[i] = res.Token
			}
		})
	}
	wg.Wait()
	return out, firstErr
}
