package e2e

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Durable consumers end-to-end (issue 4, point 6) against the real binary,
// on both store drivers: an agent's INBOX gets 1,000 messages from four
// producers (two agents' post_send, a tunnel's dispatch for two external
// users) while three consumers with different filters follow it — two from
// the beginning, one started "now" midway. One consumer's records are all
// claimed and done; another's are partly failed (non-retryable → DEAD,
// retryable → retried, then done); the third is read as a log over the
// WebSocket stream, acknowledging with {"type":"ack"} frames and
// reconnecting without a cursor. The server (SQLite) or the node the
// messages are posted to (PostgreSQL) is killed with SIGKILL mid-stream and
// restarted. Each consumer must end with exactly its matching set, seqs
// 1..n, its own states and cursor, and the source untouched.

const (
	consAgent  = "did:cons:agent"
	consTunnel = "did:cons:tunnel"
	wsAlpha    = "did:ws:alpha"
	wsBeta     = "did:ws:beta"
)

// consumerServeArgs: no retention pass may take acknowledged records from
// under the checks; enough attempts that a lease lost to the kill never
// makes a record DEAD on its own.
var consumerServeArgs = []string{"--no-retention", "--max-attempts", "6"}

// TestConsumersSQLite runs the consumer scenario on one SQLite server,
// which is killed and restarted.
func TestConsumersSQLite(t *testing.T) {
	t.Parallel()
	d := sqliteDeployment(t, consumerServeArgs...)
	runConsumerScenario(t, d, consumerRoles{create: 0, post: 0, victim: 0})
}

// TestConsumersPostgres runs it on two PostgreSQL nodes: consumers are
// created through node 0, messages posted through node 1 (through node 0
// while node 1 is down), records consumed through both; node 1 is killed
// and restarted.
func TestConsumersPostgres(t *testing.T) {
	t.Parallel()
	d := pgDeployment(t, 2, consumerServeArgs...)
	runConsumerScenario(t, d, consumerRoles{create: 0, post: 1, victim: 1})
}

// consumerRoles says which node does what.
type consumerRoles struct{ create, post, victim int }

func runConsumerScenario(t *testing.T, d *deployment, roles consumerRoles) {
	t.Helper()
	const total = 1000
	ctx := testCtx(t, 150*time.Second)
	start := time.Now()
	run := time.Now().UnixNano()
	msgs, byID := consMessages(t, run, total)

	// Tokens: the agent owns the source and the consumers; two agents and
	// a tunnel produce.
	agentTok := d.newToken(ctx, consAgent, model.RoleAgent)
	tunnelTok := d.newToken(ctx, consTunnel, model.RoleTunnel)
	prodTok := []string{d.newToken(ctx, "did:cons:prod0", model.RoleAgent), d.newToken(ctx, "did:cons:prod1", model.RoleAgent),
		tunnelTok, tunnelTok}
	agent := make([]*client.Client, d.N())
	for n := range agent {
		agent[n] = d.Client(n, agentTok)
	}
	other := func(n int) int { return (n + 1) % d.N() }

	// down is set while the victim is being killed and restarted (and for
	// a second after): requests may fail only then.
	var down atomic.Bool
	var unexpected atomic.Int64
	unexpectedErr := func(what string, err error) {
		if !down.Load() && ctx.Err() == nil && unexpected.Add(1) <= 5 {
			t.Errorf("%s: %v (while every node was up)", what, err)
		}
	}

	// The background goroutines: stopped and waited for when the scenario
	// ends, however it ends, so that none outlives the test.
	var (
		prod, workers, reader sync.WaitGroup
		halted                atomic.Bool
		stopWorkers           = make(chan struct{})
		stopReader            = make(chan struct{})
		stopW, stopR          sync.Once
	)
	haltWorkers := func() { stopW.Do(func() { close(stopWorkers) }) }
	haltReader := func() { stopR.Do(func() { close(stopReader) }) }
	t.Cleanup(func() {
		halted.Store(true)
		haltWorkers()
		haltReader()
		prod.Wait()
		workers.Wait()
		reader.Wait()
	})

	// Producers: message i comes from producer i%4; each retries until
	// acknowledged, through the other node when its node fails. A
	// message's id is its content's hash, so a retry of one that did land
	// adds nothing.
	var acked atomic.Int64
	for p := range 4 {
		cls := make([]*client.Client, d.N())
		for n := range cls {
			cls[n] = d.Client(n, prodTok[p])
		}
		prod.Go(func() {
			for i := p; i < total; i += 4 {
				m := msgs[i].msg
				node := roles.post
				for {
					var err error
					if p < 2 {
						_, err = cls[node].PostSend(ctx, &wire.PostSendRequest{Msg: m})
					} else {
						_, err = cls[node].Dispatch(ctx, &wire.DispatchRequest{Msg: m})
					}
					if err == nil {
						break
					}
					if halted.Load() {
						return
					}
					if ctx.Err() != nil {
						t.Errorf("message %d never acknowledged: %v", i, err)
						return
					}
					unexpectedErr(fmt.Sprintf("send message %d through node %d", i, node), err)
					node = other(node)
					time.Sleep(20 * time.Millisecond)
				}
				acked.Add(1)
			}
		})
	}
	waitAcked := func(n int64) {
		t.Helper()
		eventually(ctx, t, 60*time.Second, fmt.Sprintf("%d messages acknowledged", n), func() string {
			if got := acked.Load(); got < n {
				return fmt.Sprintf("%d acknowledged", got)
			}
			return ""
		})
	}

	create := func(name string, f model.ConsumerFilter, startAt string) *wire.ConsumerInfo {
		t.Helper()
		info, err := agent[roles.create].CreateConsumer(ctx, &wire.ConsumerRequest{Name: name,
			SourceOwner: consAgent, SourceBox: string(model.Inbox), Filter: f, Start: startAt})
		if err != nil {
			t.Fatalf("create consumer %s through node %d: %v", name, roles.create, err)
		}
		if info.Owner != consAgent || info.Box != model.ConsumerBox(name) || info.AckedSeq != 0 {
			t.Fatalf("created consumer %s: %+v", name, info)
		}
		return info
	}

	// Two consumers from the beginning once a fifth is in: the backfill
	// and the live fan-out meet while messages keep coming.
	waitAcked(total / 5)
	create(consAlpha, model.ConsumerFilter{Workspace: []string{wsAlpha}}, "")
	create(consUrgent, model.ConsumerFilter{Text: "urgent"}, wire.StartBeginning)

	// Workers claim the records of alpha (all done) and urgent (some fail).
	w := &claimWorkers{t: t, ctx: ctx, agent: agent, byID: byID, stop: stopWorkers,
		finished: map[string]model.State{}, failedOnce: map[string]bool{}}
	for n := range 2 {
		workers.Go(func() { w.run(consAlpha, n%d.N()) })
		workers.Go(func() { w.run(consUrgent, (n+1)%d.N()) })
	}

	// The third consumer starts "now", halfway, and is read as a log.
	waitAcked(total / 2)
	late := create(consLate, model.ConsumerFilter{Kind: []string{message.KindNotify}}, wire.StartNow)
	t.Logf("consumer %s created at source seq %d (%d acknowledged)", consLate, late.SourceSeq, acked.Load())
	if late.SourceSeq <= 0 || late.SourceSeq > late.SourceLastSeq {
		t.Errorf("consumer %s created now: source_seq %d, source last seq %d", consLate, late.SourceSeq, late.SourceLastSeq)
	}
	ws := &wsConsumerReader{t: t, ctx: ctx, d: d, token: agentTok, name: consLate, byID: byID,
		seen: map[int64]string{}, stop: stopReader}
	reader.Go(ws.run)

	// kill -9 at 70%, then restart on the same data and address. On
	// PostgreSQL, fan-out is held first (the consumers' rows locked), so
	// that messages acknowledged right before the kill are certainly not
	// fanned out yet.
	waitAcked(total * 7 / 10)
	names := []string{consAlpha, consUrgent, consLate}
	var release func()
	if d.driver == "postgres" {
		release = d.holdFanOut(ctx, consAgent, names...)
		waitAcked(acked.Load() + 20)
	}
	before := map[string]*wire.ConsumerInfo{}
	var lags []string
	for _, name := range names {
		info, err := agent[roles.create].GetConsumer(ctx, consAgent, name)
		if err != nil {
			t.Fatalf("get consumer %s before the kill: %v", name, err)
		}
		before[name] = info
		lag := info.SourceLastSeq - info.SourceSeq
		lags = append(lags, fmt.Sprintf("%s %d", name, lag))
		if release != nil && lag < 20 {
			t.Errorf("consumer %s is %d source records behind with its fan-out held for 20 messages", name, lag)
		}
	}
	lateAckedBefore := ws.confirmed()
	down.Store(true)
	killAt := acked.Load()
	d.Kill(roles.victim)
	downAt := time.Now()
	if release != nil {
		release()
	}
	if d.N() > 1 {
		// The producers go on through the surviving node meanwhile.
		waitAcked(killAt + 100)
	} else {
		time.Sleep(300 * time.Millisecond) // the server is just gone
	}
	postedWhileDown := acked.Load() - killAt // or in flight at the kill
	d.Restart(roles.victim)
	// Keep-alive connections to the killed process may still fail a
	// request just after the restart.
	time.AfterFunc(time.Second, func() { down.Store(false) })
	t.Logf("kill -9 of node %d after %d acknowledged, the consumers then behind by %s source records; %d acknowledged after it (%s down); restarted",
		roles.victim, killAt, strings.Join(lags, ", "), postedWhileDown, time.Since(downAt).Round(time.Millisecond))
	// What was committed before the kill is all there after it.
	for _, name := range names {
		info, err := agent[roles.victim].GetConsumer(ctx, consAgent, name)
		if err != nil {
			t.Fatalf("get consumer %s after the restart: %v", name, err)
		}
		b := before[name]
		if info.SourceSeq < b.SourceSeq || info.LastSeq < b.LastSeq || info.AckedSeq < b.AckedSeq {
			t.Errorf("consumer %s went back across kill -9: before source_seq %d last_seq %d acked_seq %d, after %d %d %d",
				name, b.SourceSeq, b.LastSeq, b.AckedSeq, info.SourceSeq, info.LastSeq, info.AckedSeq)
		}
		if name == consLate && info.AckedSeq < lateAckedBefore {
			t.Errorf("consumer %s: cursor %d after the restart, but an ack of %d was confirmed before the kill",
				name, info.AckedSeq, lateAckedBefore)
		}
	}

	prod.Wait()
	if t.Failed() {
		t.FailNow()
	}
	posted := time.Since(start)

	// Fan-out completes: every consumer has examined the whole source.
	infos := map[string]*wire.ConsumerInfo{}
	eventually(ctx, t, 30*time.Second, "fan-out of every message to every consumer", func() string {
		for _, name := range []string{consAlpha, consUrgent, consLate} {
			info, err := agent[0].GetConsumer(ctx, consAgent, name)
			if err != nil {
				return err.Error()
			}
			if info.SourceLastSeq != total || info.SourceSeq != total {
				return fmt.Sprintf("consumer %s at source seq %d of %d (want %d)", name, info.SourceSeq, info.SourceLastSeq, total)
			}
			infos[name] = info
		}
		return ""
	})
	ws.target.Store(infos[consLate].LastSeq)
	// The claimed consumers drain (retries come back after their backoff).
	for _, name := range []string{consAlpha, consUrgent} {
		eventually(ctx, t, 30*time.Second, "consumer "+name+" drained", func() string {
			left := listAll(ctx, t, agent[0], consAgent, model.ConsumerBox(name), model.Unread, model.Reading)
			if len(left) > 0 {
				return fmt.Sprintf("%d records UNREAD or READING, e.g. seq %d %s", len(left), left[0].Record.Seq, left[0].Record.State)
			}
			return ""
		})
	}
	eventually(ctx, t, 30*time.Second, "WebSocket reader of "+consLate+" acknowledged everything", func() string {
		if got := ws.confirmed(); got != infos[consLate].LastSeq {
			return fmt.Sprintf("cursor %d of %d", got, infos[consLate].LastSeq)
		}
		return ""
	})
	haltWorkers()
	haltReader()
	workers.Wait()
	reader.Wait()

	// The source: every message exactly once, seqs 1..n, untouched by
	// the consumers' claims and failures.
	cl := d.Admin(0)
	source := syncAll(ctx, t, cl, consAgent, model.Inbox)
	checkSeqs(t, "source INBOX", source)
	srcSeq := map[string]int64{}
	for _, r := range source {
		if _, ok := byID[r.Record.MsgID]; !ok {
			t.Errorf("source INBOX: unknown message %s", r.Record.MsgID)
		}
		if _, dup := srcSeq[r.Record.MsgID]; dup {
			t.Errorf("source INBOX: message %d twice", byID[r.Record.MsgID].i)
		}
		srcSeq[r.Record.MsgID] = r.Record.Seq
		if r.Record.State != model.Unread || r.Record.Delivery.Attempts != 0 || r.Record.Lease != nil {
			t.Errorf("source INBOX record seq %d is %s with %d attempts: consumers' work leaked into the source",
				r.Record.Seq, r.Record.State, r.Record.Delivery.Attempts)
		}
	}
	if len(srcSeq) != total {
		t.Fatalf("source INBOX holds %d distinct messages, want every one of the %d acknowledged", len(srcSeq), total)
	}

	// Each consumer: exactly its matching set, seqs 1..n, in source order.
	boxes := map[string]map[string]model.Record{} // consumer -> msg id -> record
	for _, name := range []string{consAlpha, consUrgent, consLate} {
		recs := syncAll(ctx, t, cl, consAgent, model.ConsumerBox(name))
		checkSeqs(t, "consumer "+name, recs)
		got := map[string]model.Record{}
		var prev int64
		for _, r := range recs {
			m := byID[r.Record.MsgID]
			switch {
			case m == nil:
				t.Errorf("consumer %s: seq %d is unknown message %s", name, r.Record.Seq, r.Record.MsgID)
				continue
			case !m.matches(name):
				t.Errorf("consumer %s: seq %d is message %d (workspace %q, kind %s, urgent %v), which its filter excludes",
					name, r.Record.Seq, m.i, m.workspace, m.kind, m.urgent)
			case name == consLate && srcSeq[m.id] <= late.SourceSeq:
				t.Errorf("consumer %s: seq %d is message %d at source seq %d, from before its start at %d",
					name, r.Record.Seq, m.i, srcSeq[m.id], late.SourceSeq)
			}
			if _, dup := got[m.id]; dup {
				t.Errorf("consumer %s: message %d twice", name, m.i)
			}
			if s := srcSeq[m.id]; s <= prev {
				t.Errorf("consumer %s: seq %d is source seq %d, after source seq %d: out of source order", name, r.Record.Seq, s, prev)
			} else {
				prev = s
			}
			got[m.id] = r.Record
		}
		want := 0
		for _, m := range msgs {
			if m.matches(name) && (name != consLate || srcSeq[m.id] > late.SourceSeq) {
				want++
				if _, ok := got[m.id]; !ok {
					t.Errorf("consumer %s: message %d (source seq %d) is missing", name, m.i, srcSeq[m.id])
				}
			}
		}
		if len(recs) != want || infos[name].LastSeq != int64(want) {
			t.Errorf("consumer %s: %d records, last seq %d; want exactly its %d matching messages", name, len(recs), infos[name].LastSeq, want)
		}
		boxes[name] = got
	}

	// Each consumer's states are its own.
	states := func(name string) map[model.State]int {
		c := map[model.State]int{}
		for _, r := range boxes[name] {
			c[r.State]++
		}
		return c
	}
	for id, r := range boxes[consAlpha] {
		if r.State != model.Readed {
			t.Errorf("consumer %s: message %d is %s, want READED (all done)", consAlpha, byID[id].i, r.State)
		}
	}
	overlap := 0
	for id, r := range boxes[consUrgent] {
		m := byID[id]
		want := model.Readed
		if m.fate() == fateDead {
			want = model.Dead
		}
		if r.State != want {
			t.Errorf("consumer %s: message %d is %s, want %s", consUrgent, m.i, r.State, want)
		}
		switch m.fate() {
		case fateDead:
			if r.Delivery.ErrorCode != "bad_payload" {
				t.Errorf("consumer %s: DEAD message %d has error code %q", consUrgent, m.i, r.Delivery.ErrorCode)
			}
		case fateRetry:
			if r.Delivery.Attempts < 2 {
				t.Errorf("consumer %s: message %d failed once (retryable) then done, but has %d attempts", consUrgent, m.i, r.Delivery.Attempts)
			}
		}
		if a, ok := boxes[consAlpha][id]; ok && a.State != r.State {
			overlap++ // the same message, READED for alpha and DEAD for urgent
		}
	}
	if overlap == 0 {
		t.Errorf("no message is DEAD for %s and READED for %s: the scenario should show them apart", consUrgent, consAlpha)
	}
	for _, r := range boxes[consLate] {
		if r.State != model.Unread || r.Delivery.Attempts != 0 {
			t.Errorf("consumer %s (read as a log only): seq %d is %s with %d attempts", consLate, r.Seq, r.State, r.Delivery.Attempts)
		}
	}
	// Cursors: only the log reader's moved.
	for _, name := range []string{consAlpha, consUrgent, consLate} {
		info, err := cl.GetConsumer(ctx, consAgent, name)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if name == consLate {
			want = info.LastSeq
		}
		if info.AckedSeq != want {
			t.Errorf("consumer %s: cursor %d, want %d", name, info.AckedSeq, want)
		}
	}
	if w.reclaimed.Load() > 0 {
		t.Errorf("%d records were claimed again after they were done or DEAD", w.reclaimed.Load())
	}
	ws.mu.Lock()
	sessions, resumed := ws.sessions, ws.resumed
	ws.mu.Unlock()
	if resumed < 10 {
		t.Errorf("the WebSocket reader resumed after its acknowledged cursor only %d times in %d sessions", resumed, sessions)
	}
	t.Logf("%d messages (%s to post); consumers: %s %d %v, %s %d %v (%d shared messages apart), %s %d read in %d WebSocket sessions (%d resumed after the cursor); %d claims; %s in all",
		total, posted.Round(time.Millisecond), consAlpha, len(boxes[consAlpha]), states(consAlpha),
		consUrgent, len(boxes[consUrgent]), states(consUrgent), overlap, consLate, len(boxes[consLate]),
		sessions, resumed, w.claims.Load(), time.Since(start).Round(time.Millisecond))
}

// TestConsumerFanOutAcrossNodes: on PostgreSQL, a consumer created through
// one node is fed at once (well within the nodes' 5-second safety-net
// sweep) by a message posted through another node, even when nothing in
// its source told the other node about it yet.
func TestConsumerFanOutAcrossNodes(t *testing.T) {
	t.Parallel()
	d := pgDeployment(t, 2, "--no-retention")
	ctx := testCtx(t, 60*time.Second)
	const within = 2 * time.Second
	for round := range 4 {
		owner := fmt.Sprintf("did:xnode:%d", round) // an empty source: no backfill to announce the consumer
		via, postVia := round%2, (round+1)%2
		startAt := []string{wire.StartBeginning, wire.StartNow}[round/2]
		if _, err := d.Admin(via).CreateConsumer(ctx, &wire.ConsumerRequest{Owner: owner, Name: "c",
			SourceOwner: owner, SourceBox: string(model.Inbox), Start: startAt}); err != nil {
			t.Fatal(err)
		}
		m := &message.Message{From: "did:xnode:sender", To: []string{owner}, Kind: message.KindChat,
			Content: message.Content{Content: fmt.Sprintf("round %d", round)}}
		if _, err := d.Admin(postVia).PostSend(ctx, &wire.PostSendRequest{Msg: m}); err != nil {
			t.Fatal(err)
		}
		posted := time.Now()
		eventually(ctx, t, within, fmt.Sprintf("round %d: consumer created through node %d (start %s) fed by a post through node %d",
			round, via, startAt, postVia), func() string {
			info, err := d.Admin(via).GetConsumer(ctx, owner, "c")
			if err != nil {
				return err.Error()
			}
			if info.LastSeq != 1 {
				return fmt.Sprintf("source_seq %d, last_seq %d", info.SourceSeq, info.LastSeq)
			}
			return ""
		})
		t.Logf("round %d: consumer created through node %d (start %s), message posted through node %d: fanned out after %s",
			round, via, startAt, postVia, time.Since(posted).Round(time.Millisecond))
	}
}
