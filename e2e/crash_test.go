package e2e

import (
	"context"
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

// TestCrashKill9LosesNothingAcknowledged is the crash test of the issue:
// kill -9 the server while 16 clients are sending, restart it on the same
// data directory, and check that every acknowledged message is there exactly
// once, that seqs have no gap, that nothing half-written exists, and that
// re-sending everything is idempotent.
func TestCrashKill9LosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	const (
		total     = 1000
		workers   = 16
		killAfter = 300
		sender    = "did:sender"
		rcpt      = "did:rcpt"
	)
	dir := t.TempDir()
	srv := startServer(t, dir)

	msgs := make([]*message.Message, total)
	ids := make([]string, total)
	index := make(map[string]int, total) // msg id -> message number
	run := time.Now().UnixNano()
	for i := range msgs {
		msgs[i] = &message.Message{From: sender, To: []string{rcpt}, Kind: message.KindChat,
			Nonce:   fmt.Sprintf("crash-%d-%d", run, i),
			Content: message.Content{Format: "text/plain", Content: fmt.Sprintf("message %d of the kill -9 test", i)}}
		id, err := msgs[i].ID()
		if err != nil {
			t.Fatalf("id of message %d: %v", i, err)
		}
		ids[i] = id
		index[id] = i
	}

	// Phase 1: send concurrently; kill -9 once killAfter are acknowledged.
	c := srv.Client()
	var (
		mu         sync.Mutex
		acked      = make(map[int]string) // message number -> msg_id of the 200 answer
		ackCount   atomic.Int64
		killIssued atomic.Bool // set just before the SIGKILL
		down       atomic.Bool // a request failed after the kill: skip the rest
		preKillErr = make(chan error, workers)
		reached    = make(chan struct{})
		once       sync.Once
		jobs       = make(chan int)
		wg         sync.WaitGroup
		attempts   atomic.Int64
	)
	// The workers keep sending right through the kill, so that it lands
	// with requests in flight; they stop once requests start failing.
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if down.Load() {
					continue // drain: not sent, so not acknowledged
				}
				attempts.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := c.PostSend(ctx, &wire.PostSendRequest{Msg: msgs[i]})
				cancel()
				if err != nil {
					// In flight at the kill or refused after it: not
					// acknowledged. Before the kill it is a server error.
					if killIssued.Load() {
						down.Store(true)
					} else {
						select {
						case preKillErr <- fmt.Errorf("post_send of message %d failed before the kill: %w", i, err):
						default:
						}
					}
					continue
				}
				mu.Lock()
				acked[i] = res.MsgID
				mu.Unlock()
				if ackCount.Add(1) >= killAfter {
					once.Do(func() { close(reached) })
				}
			}
		})
	}
	sendStart := time.Now()
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		for i := range total {
			jobs <- i
		}
		close(jobs)
	}()
	select {
	case <-reached:
	case <-feedDone:
		// Fell through without ever reaching killAfter: the sends failed.
		wg.Wait()
		t.Fatalf("only %d of %d post_sends were acknowledged before the kill point; server output:\n%s", ackCount.Load(), total, srv.Log())
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d post_sends acknowledged after 30s; server output:\n%s", ackCount.Load(), srv.Log())
	}
	killIssued.Store(true)
	killedAt := ackCount.Load()
	srv.Kill()
	wg.Wait()
	<-feedDone
	close(preKillErr)
	for err := range preKillErr {
		t.Error(err)
	}
	t.Logf("kill -9 after %d acknowledged (%s); %d acknowledged in all, %d requests sent, so %d in flight at the kill or refused after it",
		killedAt, time.Since(sendStart).Round(time.Millisecond), len(acked), attempts.Load(), attempts.Load()-int64(len(acked)))
	if srv.ExitCode() != -1 {
		t.Errorf("server exit code after SIGKILL = %d, want -1 (killed by signal)", srv.ExitCode())
	}
	if len(acked) >= total {
		t.Fatalf("all %d messages were acknowledged before the kill took effect: the test did not crash mid-stream", total)
	}
	for i, id := range acked {
		if id != ids[i] {
			t.Errorf("message %d: post_send answered msg_id %s, want the content hash %s", i, id, ids[i])
		}
	}

	// Phase 2: restart on the same data directory (the lock died with the
	// process) and check what survived.
	srv2 := startServer(t, dir)
	logReplay(t, srv2)
	c2 := srv2.Client()
	ctx := testCtx(t, 60*time.Second)
	inbox := syncAll(ctx, t, c2, rcpt, model.Inbox)
	outbox := syncAll(ctx, t, c2, sender, model.Outbox)
	checkSeqs(t, "INBOX of "+rcpt+" after restart", inbox)
	checkSeqs(t, "OUTBOX of "+sender+" after restart", outbox)
	inCount := checkBoxRecords(t, "INBOX of "+rcpt, inbox, rcpt, model.Inbox, index)
	outCount := checkBoxRecords(t, "OUTBOX of "+sender, outbox, sender, model.Outbox, index)
	for i := range acked {
		if inCount[i] != 1 {
			t.Errorf("acknowledged message %d (%s): %d INBOX records for %s after kill -9, want exactly 1", i, ids[i], inCount[i], rcpt)
		}
		if outCount[i] != 1 {
			t.Errorf("acknowledged message %d (%s): %d OUTBOX records for %s after kill -9, want exactly 1", i, ids[i], outCount[i], sender)
		}
	}
	// A post_send is one transaction: both records or neither.
	for i := range total {
		if inCount[i] != outCount[i] {
			t.Errorf("message %d (%s): %d INBOX but %d OUTBOX records: a post_send was half applied", i, ids[i], inCount[i], outCount[i])
		}
	}
	// Every message that left a record (acknowledged or not) is readable.
	unackedPresent := 0
	for i := range total {
		_, isAcked := acked[i]
		if !isAcked && inCount[i] == 0 {
			continue
		}
		if !isAcked {
			unackedPresent++
		}
		raw, err := c2.GetMessage(ctx, ids[i])
		if err != nil {
			t.Errorf("GET /v1/messages/%s (message %d, acknowledged=%v) after kill -9: %v", ids[i], i, isAcked, err)
			continue
		}
		if got := canonicalID(t, raw); got != ids[i] {
			t.Errorf("GET /v1/messages/%s returned a message whose id is %s", ids[i], got)
		}
	}
	t.Logf("after restart: %d INBOX and %d OUTBOX records; %d acknowledged, %d unacknowledged but committed before the kill",
		len(inbox), len(outbox), len(acked), unackedPresent)
	if t.Failed() {
		t.FailNow()
	}

	// Phase 3: send everything not acknowledged (those already stored must
	// not be duplicated), plus a sample of acknowledged ones again.
	var resend []int
	for i := range total {
		if _, ok := acked[i]; !ok || i%50 == 0 {
			resend = append(resend, i)
		}
	}
	jobs2 := make(chan int)
	errs := make(chan error, len(resend))
	var wg2 sync.WaitGroup
	for range workers {
		wg2.Go(func() {
			for i := range jobs2 {
				res, err := c2.PostSend(ctx, &wire.PostSendRequest{Msg: msgs[i]})
				switch {
				case err != nil:
					errs <- fmt.Errorf("re-send of message %d: %w", i, err)
				case res.MsgID != ids[i]:
					errs <- fmt.Errorf("re-send of message %d: msg_id %s, want %s", i, res.MsgID, ids[i])
				case !res.OK || len(res.LocalRecipients) != 1 || res.LocalRecipients[0] != rcpt:
					errs <- fmt.Errorf("re-send of message %d: ok=%v local_recipients=%v reason=%q, want ok to [%s]", i, res.OK, res.LocalRecipients, res.Reason, rcpt)
				}
			}
		})
	}
	for _, i := range resend {
		jobs2 <- i
	}
	close(jobs2)
	wg2.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	inbox = syncAll(ctx, t, c2, rcpt, model.Inbox)
	outbox = syncAll(ctx, t, c2, sender, model.Outbox)
	checkSeqs(t, "final INBOX of "+rcpt, inbox)
	checkSeqs(t, "final OUTBOX of "+sender, outbox)
	inCount = checkBoxRecords(t, "final INBOX of "+rcpt, inbox, rcpt, model.Inbox, index)
	outCount = checkBoxRecords(t, "final OUTBOX of "+sender, outbox, sender, model.Outbox, index)
	if len(inbox) != total || len(outbox) != total {
		t.Errorf("final totals: %d INBOX and %d OUTBOX records, want exactly %d each", len(inbox), len(outbox), total)
	}
	for i := range total {
		if inCount[i] != 1 || outCount[i] != 1 {
			t.Errorf("message %d (%s): %d INBOX and %d OUTBOX records at the end, want 1 each", i, ids[i], inCount[i], outCount[i])
		}
	}
}

// checkBoxRecords checks that each record of a box is complete (right
// owner and box, a known message, its body present and hashing to its
// msg_id) and returns how many records each message number has.
func checkBoxRecords(t *testing.T, what string, recs []wire.RecordWithMsg, owner string, box model.BoxKind, index map[string]int) map[int]int {
	t.Helper()
	count := make(map[int]int)
	for _, r := range recs {
		rec := r.Record
		i, ok := index[rec.MsgID]
		if !ok {
			t.Errorf("%s: record %s (seq %d) is for unknown msg_id %q", what, rec.RecordID, rec.Seq, rec.MsgID)
			continue
		}
		count[i]++
		if count[i] == 2 {
			t.Errorf("%s: message %d (%s) has more than one record (second at seq %d)", what, i, rec.MsgID, rec.Seq)
		}
		if rec.Owner != owner || rec.BoxKind != box {
			t.Errorf("%s: record %s has owner %q box %q, want %q %q", what, rec.RecordID, rec.Owner, rec.BoxKind, owner, box)
		}
		if want := model.RecordID(owner, box, rec.MsgID, ""); rec.RecordID != want {
			t.Errorf("%s: record of message %d has id %s, want the derived id %s", what, i, rec.RecordID, want)
		}
		if box == model.Inbox && rec.State != model.Unread {
			t.Errorf("%s: record of message %d is %s, want UNREAD (nobody claimed it)", what, i, rec.State)
		}
		if len(r.Msg) == 0 {
			t.Errorf("%s: record of message %d (seq %d) has no message body", what, i, rec.Seq)
			continue
		}
		if got := canonicalID(t, r.Msg); got != rec.MsgID {
			t.Errorf("%s: record of message %d carries a body whose id is %s, want %s", what, i, got, rec.MsgID)
		}
	}
	return count
}

// canonicalID decodes a message body and returns its content id.
func canonicalID(t *testing.T, raw []byte) string {
	t.Helper()
	m, err := client.DecodeMessage(raw)
	if err != nil {
		t.Errorf("decode message body %.200s: %v", raw, err)
		return ""
	}
	id, err := m.ID()
	if err != nil {
		t.Errorf("id of message body %.200s: %v", raw, err)
		return ""
	}
	return id
}

// logReplay says whether a restart found writes to replay: sends, claims
// and acks are answered once in the apply log and committed every few tens
// of milliseconds, so a kill usually leaves some.
func logReplay(t *testing.T, srv *server) {
	t.Helper()
	if i := strings.Index(srv.Log(), "applying writes acknowledged before the last stop"); i >= 0 {
		line, _, _ := strings.Cut(srv.Log()[i:], "\n")
		t.Logf("restart replayed the apply log: %s", line)
	} else {
		t.Logf("restart found nothing to replay: the kill came right after a commit")
	}
}

// TestCrashDuringClaimsLeaseComesBack: records claimed with a short lease
// before a kill -9 are still held after the restart, then come back
// (attempt counted) once the lease has expired, and the old lease can no
// longer ack them. A record acknowledged before the kill stays READED.
func TestCrashDuringClaimsLeaseComesBack(t *testing.T) {
	t.Parallel()
	const (
		owner   = "did:claimer"
		leaseMS = 2000
		n       = 3
	)
	dir := t.TempDir()
	srv := startServer(t, dir)
	c := srv.Client()
	ctx := testCtx(t, 60*time.Second)

	for i := range n {
		_, err := c.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:boss", To: []string{owner},
			Nonce: fmt.Sprintf("claim-%d-%d", time.Now().UnixNano(), i), Content: message.Content{Content: fmt.Sprintf("job %d", i)}}})
		if err != nil {
			t.Fatalf("post_send %d: %v", i, err)
		}
	}
	held := make(map[string]wire.RecordWithMsg) // record id -> claim
	// Taken before the claims: no lease can expire before claimedAt+lease.
	claimedAt := time.Now()
	for i := range n {
		got, err := c.Next(ctx, owner, model.Inbox, &wire.NextRequest{LeaseMS: leaseMS, Holder: "worker-1"})
		if err != nil || got == nil {
			t.Fatalf("claim %d: record %v, err %v", i, got, err)
		}
		if got.Record.State != model.Reading || got.Record.Lease == nil {
			t.Fatalf("claim %d: state %s lease %+v, want READING with a lease", i, got.Record.State, got.Record.Lease)
		}
		held[got.Record.RecordID] = *got
	}
	// One more, claimed and acknowledged just before the kill.
	extra, err := c.PostSend(ctx, &wire.PostSendRequest{Msg: &message.Message{From: "did:boss", To: []string{owner},
		Nonce: fmt.Sprintf("acked-%d", time.Now().UnixNano()), Content: message.Content{Content: "done before the crash"}}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Next(ctx, owner, model.Inbox, &wire.NextRequest{LeaseMS: leaseMS, Holder: "worker-1"})
	if err != nil || done == nil || done.Record.MsgID != extra.MsgID {
		t.Fatalf("claim of the message to ack: %+v, %v", done, err)
	}
	if _, err := c.Ack(ctx, done.Record.RecordID, done.Record.Lease.ID, ""); err != nil {
		t.Fatalf("ack before the kill: %v", err)
	}
	srv.Kill()

	srv2 := startServer(t, dir)
	logReplay(t, srv2)
	c2 := srv2.Client()
	restartedIn := time.Since(claimedAt)
	t.Logf("restarted %s after the claims", restartedIn.Round(time.Millisecond))

	// comeback checks a record claimed again after the restart: it is one
	// of ours, claimed for the first time since, not before its old lease
	// expired (server clock: the new lease's start), with the attempt
	// counted and a new lease.
	seen := make(map[string]bool)
	comeback := func(got *wire.RecordWithMsg, lease int64, holder string) {
		t.Helper()
		rec := got.Record
		old, ok := held[rec.RecordID]
		if !ok || seen[rec.RecordID] {
			t.Fatalf("claimed record %s again (one of ours=%v, already re-claimed=%v)", rec.RecordID, ok, seen[rec.RecordID])
		}
		seen[rec.RecordID] = true
		if rec.Lease == nil || rec.Lease.ID == old.Record.Lease.ID || rec.Lease.Holder != holder {
			t.Fatalf("record %s: lease %+v after the re-claim, want a new lease held by %s", rec.RecordID, rec.Lease, holder)
		}
		reclaimedAt := rec.Lease.ExpiresAtMS - lease
		if reclaimedAt < old.Record.Lease.ExpiresAtMS {
			t.Errorf("record %s was claimed again at %d, %d ms before its pre-crash lease expired at %d: the claim did not survive kill -9",
				rec.RecordID, reclaimedAt, old.Record.Lease.ExpiresAtMS-reclaimedAt, old.Record.Lease.ExpiresAtMS)
		}
		if rec.Delivery.Attempts != 1 {
			t.Errorf("record %s: attempts %d after one expired lease, want 1", rec.RecordID, rec.Delivery.Attempts)
		}
		if rec.MsgID != old.Record.MsgID || len(got.Msg) == 0 {
			t.Errorf("record %s: re-claim returned msg %q (body %d bytes), want %q with its body", rec.RecordID, rec.MsgID, len(got.Msg), old.Record.MsgID)
		}
		t.Logf("record %s claimed again %d ms after its old lease expired (attempts=%d, last_error=%q)",
			rec.RecordID, reclaimedAt-old.Record.Lease.ExpiresAtMS, rec.Delivery.Attempts, rec.Delivery.LastError)
	}

	// Still within the lease: the claims survived the crash.
	if restartedIn < leaseMS*time.Millisecond-500*time.Millisecond {
		got, err := c2.Next(ctx, owner, model.Inbox, &wire.NextRequest{LeaseMS: leaseMS, Holder: "early"})
		if err != nil {
			t.Fatalf("claim right after restart: %v", err)
		}
		if got != nil {
			// Only legitimate if this request was served after the lease
			// (and the 1 s retry backoff) ran out; comeback checks that.
			t.Logf("claim right after restart returned %s", got.Record.RecordID)
			comeback(got, leaseMS, "early")
		}
		for id := range held {
			asked := time.Since(claimedAt)
			r, err := c2.GetRecord(ctx, id, false)
			if err != nil {
				t.Fatalf("get record %s after restart: %v", id, err)
			}
			if asked < leaseMS*time.Millisecond && !seen[id] && (r.Record.State != model.Reading || r.Record.Lease == nil || r.Record.Lease.Holder != "worker-1") {
				t.Errorf("record %s after restart: state %s lease %+v, want still READING held by worker-1", id, r.Record.State, r.Record.Lease)
			}
		}
	} else {
		t.Logf("restart took %s, longer than the lease: skipping the still-held checks", restartedIn)
	}

	// After the lease (and the first retry backoff) they come back.
	for len(seen) < n {
		got, err := c2.Next(ctx, owner, model.Inbox, &wire.NextRequest{LeaseMS: 30000, WaitMS: 15000, Holder: "worker-2"})
		if err != nil {
			t.Fatalf("claim after lease expiry: %v", err)
		}
		if got == nil {
			t.Fatalf("only %d of %d records came back within 15 s after their %d ms lease expired across a kill -9", len(seen), n, leaseMS)
		}
		comeback(got, 30000, "worker-2")
	}
	if r, err := c2.GetRecord(ctx, done.Record.RecordID, false); err != nil || r.Record.State != model.Readed {
		t.Errorf("record acknowledged before the kill: %+v, %v; want READED", r, err)
	}
	// The pre-crash holder's lease is gone for good.
	for id, old := range held {
		_, err := c2.Ack(ctx, id, old.Record.Lease.ID, "")
		if !client.IsLeaseLost(err) {
			t.Errorf("ack of %s with the lease from before the crash: err %v, want lease_lost", id, err)
		}
	}
}

// TestDelayedSurvivesKill9: a delayed message accepted just before a kill -9
// is delivered after the restart, not before it is due.
func TestDelayedSurvivesKill9(t *testing.T) {
	t.Parallel()
	const (
		rcpt    = "did:later"
		delayMS = 1500
	)
	dir := t.TempDir()
	srv := startServer(t, dir)
	ctx := testCtx(t, 60*time.Second)
	msg := &message.Message{From: "did:early", To: []string{rcpt}, Nonce: fmt.Sprintf("delay-%d", time.Now().UnixNano()),
		Content: message.Content{Content: "see you in 1.5 s"}}
	sentAt := time.Now()
	res, err := srv.Client().PostSend(ctx, &wire.PostSendRequest{Msg: msg, DelayMS: ptr(int64(delayMS))})
	if err != nil {
		t.Fatalf("post_send with delay_ms %d: %v", delayMS, err)
	}
	srv.Kill()
	if res.ScheduledDeliveryTime == "" {
		t.Fatalf("post_send with delay_ms: no scheduled_delivery_time in %+v", res)
	}
	due, err := time.Parse(time.RFC3339Nano, res.ScheduledDeliveryTime)
	if err != nil {
		t.Fatalf("scheduled_delivery_time %q: %v", res.ScheduledDeliveryTime, err)
	}
	if d := due.Sub(sentAt); d < delayMS*time.Millisecond-50*time.Millisecond || d > delayMS*time.Millisecond+2*time.Second {
		t.Errorf("scheduled_delivery_time is %s after the send, want about %d ms", d, delayMS)
	}

	srv2 := startServer(t, dir)
	logReplay(t, srv2)
	c2 := srv2.Client()
	dueMS := due.UnixMilli()
	// The server's clock is ours (same host): a record's created_at_ms is
	// when the delayed message was materialized, so it is the authority on
	// "not before due", whatever the request latency.
	checkNotEarly := func(what string, r *wire.RecordWithMsg) {
		t.Helper()
		if r.Record.MsgID != res.MsgID {
			t.Errorf("%s: claimed msg %s, want the delayed %s", what, r.Record.MsgID, res.MsgID)
		}
		if r.Record.CreatedAtMS < dueMS {
			t.Errorf("%s: the delayed message was put in the inbox at %d, %d ms before it was due at %d (%s)",
				what, r.Record.CreatedAtMS, dueMS-r.Record.CreatedAtMS, dueMS, res.ScheduledDeliveryTime)
		}
	}
	sched, err := c2.Scheduled(ctx, wire.ScheduledQuery{Recipient: rcpt})
	if err != nil {
		t.Fatalf("list scheduled after restart: %v", err)
	}
	switch {
	case sched.Count == 1 && len(sched.Items) == 1 && sched.Items[0].MsgID == res.MsgID && sched.Items[0].DueAtMS == dueMS:
	case sched.Count == 0 && time.Until(due) < 0:
		t.Logf("restart took until after due: the message was already materialized")
	default:
		t.Errorf("scheduled after restart (%s before due): %+v, want the one pending message %s due at %d", time.Until(due), sched, res.MsgID, dueMS)
	}
	var got *wire.RecordWithMsg
	if left := time.Until(due); left > 100*time.Millisecond {
		// Long-poll until just before due: nothing may show up early.
		got, err = c2.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{WaitMS: (left - 100*time.Millisecond).Milliseconds()})
		if err != nil {
			t.Fatalf("claim before due: %v", err)
		}
		if got != nil {
			checkNotEarly("long poll ending just before due", got)
			t.Logf("the long poll ending just before due answered late, after the message became due")
		}
	} else {
		t.Logf("restart took until %s before due: skipping the long poll before due", left)
	}
	if got == nil {
		got, err = c2.Next(ctx, rcpt, model.Inbox, &wire.NextRequest{WaitMS: 15000})
		if err != nil {
			t.Fatalf("claim after due: %v", err)
		}
		if got == nil {
			t.Fatalf("delayed message (due %s) lost across kill -9: not delivered within 15 s; server output:\n%s", res.ScheduledDeliveryTime, srv2.Log())
		}
		checkNotEarly("claim after due", got)
	}
	arrived := time.Now()
	if arrived.Before(due) {
		t.Errorf("delayed message claimed at %s, before it was due at %s", arrived.Format(time.RFC3339Nano), res.ScheduledDeliveryTime)
	}
	t.Logf("delayed message put in the inbox %d ms after it was due, claimed %s after due",
		got.Record.CreatedAtMS-dueMS, arrived.Sub(due).Round(time.Millisecond))
	if out := syncAll(ctx, t, c2, "did:early", model.Outbox); len(out) != 1 || out[0].Record.MsgID != res.MsgID {
		t.Errorf("sender's OUTBOX after delivery has %d records, want exactly the delayed message", len(out))
	}
	if sched, err := c2.Scheduled(ctx, wire.ScheduledQuery{Recipient: rcpt}); err != nil || sched.Count != 0 {
		t.Errorf("scheduled after delivery: %+v (err %v), want none pending", sched, err)
	}
	if _, err := c2.GetMessage(ctx, res.MsgID); err != nil {
		t.Errorf("get delayed message %s: %v", res.MsgID, err)
	}
}
