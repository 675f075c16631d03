package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Retention end-to-end (issue 4, point 6) on both store drivers: with
// INBOX and consumer records kept 2 s after they finish and a pass every
// second, finished inbox records go and unfinished ones stay; a durable
// consumer's records at or below its cursor go at the next pass, except one
// still claimed, and a finished one above the cursor goes after 2 s;
// records of a box family the policy keeps 30 days stay; a consumer that
// has not examined source records keeps them (on PostgreSQL, where the test
// can hold its fan-out by locking its row). At every look, every record
// missing must be one retention may delete, and no earlier than it may.
// Purges show as retention.purged events and in
// msgcenter_purged_records_total, and `msgcenter retention run` works.

const (
	retA      = "did:ret:a" // source of the consumer
	retB      = "did:ret:b" // no consumer
	retSender = "did:ret:sender"
	retCons   = "all"
)

// retentionServeArgs: --retention-interval takes no less than 1s.
var retentionServeArgs = []string{"--retention", "INBOX=2s,CONSUMER=2s", "--retention-interval", "1s"}

func TestRetentionSQLite(t *testing.T) {
	t.Parallel()
	d := sqliteDeployment(t, retentionServeArgs...)
	runRetentionScenario(t, d)
}

func TestRetentionPostgres(t *testing.T) {
	t.Parallel()
	d := pgDeployment(t, 2, retentionServeArgs...)
	runRetentionScenario(t, d)
}

// retained is what the test knows of one record: whether retention may
// delete it, and from when (local unix ms; the server's clock is the
// same).
type retained struct {
	owner     string
	box       model.BoxKind
	seq       int64
	why       string
	purgeable bool
	notBefore int64
}

// retentionWatch tracks records and checks, at each look, that every
// missing one was purgeable and old enough.
type retentionWatch struct {
	t   *testing.T
	ctx context.Context
	d   *deployment
	mu  sync.Mutex
	rec map[string]*retained // by record id
	// adopt, when set, says whether an untracked record that appears in
	// a box is expected (and how to track it).
	adopt func(r model.Record) *retained
}

func (w *retentionWatch) track(r model.Record, purgeable bool, notBefore int64, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rec[r.RecordID] = &retained{owner: r.Owner, box: r.BoxKind, seq: r.Seq, why: why, purgeable: purgeable, notBefore: notBefore}
}

func (w *retentionWatch) set(recordID string, purgeable bool, notBefore int64, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x := w.rec[recordID]
	if x == nil {
		w.t.Fatalf("record %s is not tracked", recordID)
	}
	x.purgeable, x.notBefore, x.why = purgeable, notBefore, why
}

// look reads every tracked box (alternating nodes) and returns how many
// purgeable records are still present. Any record gone that was not
// purgeable, or gone too early, fails the test.
func (w *retentionWatch) look(n int) int {
	w.t.Helper()
	w.mu.Lock()
	type boxKey struct {
		owner string
		box   model.BoxKind
	}
	boxes := map[boxKey]bool{}
	for _, x := range w.rec {
		boxes[boxKey{x.owner, x.box}] = true
	}
	w.mu.Unlock()
	cl := w.d.Admin(n % w.d.N())
	present := map[string]model.Record{}
	for b := range boxes {
		maps.Copy(present, boxRecords(w.ctx, w.t, cl, b.owner, b.box))
	}
	now := time.Now().UnixMilli()
	w.mu.Lock()
	defer w.mu.Unlock()
	left := 0
	for id, r := range present {
		if _, ok := w.rec[id]; ok {
			continue
		}
		var x *retained
		if w.adopt != nil {
			x = w.adopt(r)
		}
		if x == nil {
			w.t.Fatalf("unexpected record %s seq %d in %s %s (%s)", id, r.Seq, r.Owner, r.BoxKind, r.State)
		}
		w.rec[id] = x
	}
	for id, x := range w.rec {
		_, ok := present[id]
		switch {
		case ok && x.purgeable:
			left++
		case ok:
		case !x.purgeable:
			w.t.Fatalf("retention deleted %s seq %d of %s (%s), which it must keep", x.box, x.seq, x.owner, x.why)
		case now < x.notBefore:
			w.t.Fatalf("retention deleted %s seq %d of %s (%s) %d ms too early", x.box, x.seq, x.owner, x.why, x.notBefore-now)
		}
	}
	return left
}

// settle looks until every purgeable record is gone.
func (w *retentionWatch) settle(what string) {
	w.t.Helper()
	n := 0
	eventually(w.ctx, w.t, 20*time.Second, what, func() string {
		n++
		if left := w.look(n); left > 0 {
			return fmt.Sprintf("%d records retention may delete are still there", left)
		}
		return ""
	})
}

func runRetentionScenario(t *testing.T, d *deployment) {
	t.Helper()
	ctx := testCtx(t, 90*time.Second)
	start := time.Now()
	run := time.Now().UnixNano()
	adm, post := d.Admin(0), d.Admin(d.N()-1)
	nowMS := func() int64 { return time.Now().UnixMilli() }

	pol, err := adm.RetentionPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pol.TerminalMS[model.Inbox] != 2000 || pol.TerminalMS[model.ConsumerFamily] != 2000 ||
		pol.TerminalMS[model.Outbox] != (30*24*time.Hour).Milliseconds() || pol.IntervalMS != 1000 || !pol.Enabled {
		t.Fatalf("retention policy %+v, want INBOX and CONSUMER 2s, OUTBOX 30d, a pass every 1s", pol)
	}

	if _, err := adm.CreateConsumer(ctx, &wire.ConsumerRequest{Owner: retA, Name: retCons, SourceOwner: retA,
		SourceBox: string(model.Inbox)}); err != nil {
		t.Fatal(err)
	}
	sent := 0
	send := func(to string, n int) map[string]bool {
		t.Helper()
		ids := map[string]bool{}
		for range n {
			m := &message.Message{From: retSender, To: []string{to}, Kind: message.KindChat,
				Content: message.Content{Content: fmt.Sprintf("retention %d message %d", run, sent)}}
			sent++
			res, err := post.PostSend(ctx, &wire.PostSendRequest{Msg: m})
			if err != nil {
				t.Fatal(err)
			}
			ids[res.MsgID] = true
		}
		return ids
	}
	// records returns the records of a box whose message is in ids, by seq.
	records := func(owner string, box model.BoxKind, ids map[string]bool) []model.Record {
		t.Helper()
		var out []model.Record
		for _, r := range syncAll(ctx, t, adm, owner, box) {
			if ids == nil || ids[r.Record.MsgID] {
				out = append(out, r.Record)
			}
		}
		return out
	}
	setState := func(r model.Record, s model.State) int64 {
		t.Helper()
		at := nowMS()
		if _, err := adm.SetState(ctx, r.RecordID, &wire.StateRequest{NewState: s}); err != nil {
			t.Fatalf("set %s seq %d of %s to %s: %v", r.BoxKind, r.Seq, r.Owner, s, err)
		}
		return at
	}
	consumerAt := func(seq int64) func() string {
		return func() string {
			info, err := adm.GetConsumer(ctx, retA, retCons)
			if err != nil {
				return err.Error()
			}
			if info.SourceSeq != seq || info.LastSeq != seq {
				return fmt.Sprintf("source_seq %d, last_seq %d, want %d", info.SourceSeq, info.LastSeq, seq)
			}
			return ""
		}
	}

	aIDs, bIDs := send(retA, 30), send(retB, 10)
	eventually(ctx, t, 15*time.Second, "fan-out of 30 messages", consumerAt(30))
	w := &retentionWatch{t: t, ctx: ctx, d: d, rec: map[string]*retained{}}
	const keep = 2000 // ms

	// A's INBOX: a third READED, a third ARCHIVED, a third left UNREAD of
	// which two are claimed (READING).
	var wantInbox int64
	for _, r := range records(retA, model.Inbox, aIDs) {
		switch (r.Seq - 1) % 3 {
		case 0:
			w.track(r, true, setState(r, model.Readed)+keep, "INBOX READED")
			wantInbox++
		case 1:
			w.track(r, true, setState(r, model.Archived)+keep, "INBOX ARCHIVED")
			wantInbox++
		default:
			w.track(r, false, 0, "INBOX UNREAD")
		}
	}
	for range 2 {
		got, err := adm.Next(ctx, retA, model.Inbox, &wire.NextRequest{LeaseMS: 600_000, WithObject: ptr(false)})
		if err != nil || got == nil {
			t.Fatalf("claim in the INBOX of %s: %v %v", retA, got, err)
		}
		w.set(got.Record.RecordID, false, 0, "INBOX READING")
	}
	// B's INBOX (no consumer): half READED.
	for _, r := range records(retB, model.Inbox, bIDs) {
		if r.Seq%2 == 0 {
			w.track(r, true, setState(r, model.Readed)+keep, "INBOX READED, no consumer")
			wantInbox++
		} else {
			w.track(r, false, 0, "INBOX UNREAD, no consumer")
		}
	}
	// The sender's OUTBOX copies are SENT, a finished state, but OUTBOX
	// keeps them 30 days.
	for _, r := range records(retSender, model.Outbox, nil) {
		w.track(r, false, 0, "OUTBOX SENT, kept 30d")
	}

	// The consumer's box: one record claimed, the cursor at or above it
	// (at least 20), one record above the cursor done.
	cbox := model.ConsumerBox(retCons)
	held, err := adm.Next(ctx, retA, cbox, &wire.NextRequest{LeaseMS: 600_000, WithObject: ptr(false)})
	if err != nil || held == nil {
		t.Fatalf("claim in consumer %s: %v %v", retCons, held, err)
	}
	cursor := max(20, held.Record.Seq)
	ackedAt := nowMS()
	info, err := adm.AckConsumer(ctx, retA, retCons, cursor)
	if err != nil || info.AckedSeq != cursor {
		t.Fatalf("ack consumer %s to %d: %+v %v", retCons, cursor, info, err)
	}
	var wantConsumer int64
	crecs := records(retA, cbox, nil)
	var above *model.Record
	for i := len(crecs) - 1; i >= 0 && above == nil; i-- {
		if r := crecs[i]; r.Seq > cursor && r.RecordID != held.Record.RecordID {
			above = &crecs[i]
		}
	}
	for _, r := range crecs {
		switch {
		case r.RecordID == held.Record.RecordID:
			w.track(r, false, 0, fmt.Sprintf("consumer record READING at or below the cursor %d", cursor))
		case r.Seq <= cursor:
			w.track(r, true, ackedAt, fmt.Sprintf("consumer record acknowledged by the cursor %d", cursor))
			wantConsumer++
		case above != nil && r.RecordID == above.RecordID:
			w.track(r, true, setState(r, model.Readed)+keep, "consumer record READED above the cursor")
			wantConsumer++
		default:
			w.track(r, false, 0, fmt.Sprintf("consumer record UNREAD above the cursor %d", cursor))
		}
	}
	if above == nil {
		t.Fatalf("no consumer record above the cursor %d", cursor)
	}

	// The CLI, while passes go on in the background.
	runCLIRetention(t, d)

	w.settle("retention of the finished records")
	t.Logf("finished INBOX records and acknowledged consumer records are gone, the rest stayed (%s)",
		time.Since(start).Round(time.Millisecond))

	// A lagging consumer keeps the source records it has not examined.
	if d.driver == "postgres" {
		wantInbox += runRetentionLag(ctx, t, d, w, send, records, setState)
	} else {
		t.Logf("lagging consumer: checked on PostgreSQL only, where the test can hold fan-out by locking the consumer's row")
	}

	// Events and metrics agree, per family, with what the test deleted.
	want := map[model.BoxKind]int64{model.Inbox: wantInbox, model.ConsumerFamily: wantConsumer}
	eventually(ctx, t, 10*time.Second, "retention.purged events and msgcenter_purged_records_total", func() string {
		evs, n := purgedEvents(ctx, t, adm)
		if !maps.Equal(evs, want) {
			return fmt.Sprintf("%d retention.purged events count %v, want %v", n, evs, want)
		}
		for _, f := range []model.BoxKind{model.Inbox, model.ConsumerFamily, model.Outbox} {
			got := d.metricSum(ctx, fmt.Sprintf(`msgcenter_purged_records_total{box=%q}`, f))
			if int64(got) != want[f] {
				return fmt.Sprintf("msgcenter_purged_records_total{box=%q} summed over the nodes is %v, want %d", f, got, want[f])
			}
		}
		return ""
	})
	_, n := purgedEvents(ctx, t, adm)
	t.Logf("purged %v in %d passes (retention.purged events and /metrics agree): %s", want, n, time.Since(start).Round(time.Millisecond))
}

var cliPurgedRE = regexp.MustCompile(`^purged \d+ records?( \([A-Z_]+ \d+(, [A-Z_]+ \d+)*\))?, \d+ message bod(y|ies), \d+ events?, \d+ idempotency keys?\n$`)

// runCLIRetention runs `msgcenter retention show` and `retention run`
// against node 0.
func runCLIRetention(t *testing.T, d *deployment) {
	t.Helper()
	cli := func(args ...string) cliResult {
		t.Helper()
		res := runCLI(t, "", append(args, "--server", d.URL(0), "--data", d.dirs[0])...)
		if res.Code != 0 {
			t.Fatalf("msgcenter %s: exit %d; stdout %q; stderr %q", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr)
		}
		return res
	}
	var pol wire.RetentionPolicy
	if res := cli("retention", "show", "--json"); json.Unmarshal([]byte(res.Stdout), &pol) != nil ||
		pol.TerminalMS[model.Inbox] != 2000 || pol.IntervalMS != 1000 {
		t.Errorf("retention show --json printed %q", res.Stdout)
	}
	if res := cli("retention", "show"); !strings.Contains(res.Stdout, "INBOX") || !strings.Contains(res.Stdout, "2s") {
		t.Errorf("retention show printed %q", res.Stdout)
	}
	var got wire.RetentionResult
	res := cli("retention", "run", "--json")
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
		t.Fatalf("retention run --json printed %q: %v", res.Stdout, err)
	}
	if got.Messages != 0 || got.Events != 0 {
		t.Errorf("retention run deleted %d message bodies and %d events: bodies are kept an hour after their last use, events 30 days",
			got.Messages, got.Events)
	}
	if res := cli("retention", "run"); !cliPurgedRE.MatchString(res.Stdout) {
		t.Errorf("retention run printed %q, want %s", res.Stdout, cliPurgedRE)
	}
	t.Logf("msgcenter retention run --json: %+v", got)
}

// runRetentionLag holds the consumer's fan-out by locking its row from
// the test (its compare-and-set waits; retention reads the row without
// locking it), finishes new source records, and checks that they stay
// while records finished at the same time in a box without consumer go.
// It returns how many INBOX records it had deleted.
func runRetentionLag(ctx context.Context, t *testing.T, d *deployment, w *retentionWatch,
	send func(string, int) map[string]bool,
	records func(string, model.BoxKind, map[string]bool) []model.Record,
	setState func(model.Record, model.State) int64) int64 {
	t.Helper()
	const keep = 2000
	release := d.holdFanOut(ctx, retA, retCons)

	aIDs, bIDs := send(retA, 5), send(retB, 5)
	var aNew, bNew []model.Record
	for _, r := range records(retA, model.Inbox, aIDs) {
		setState(r, model.Readed)
		w.track(r, false, 0, "INBOX READED, not examined by the lagging consumer")
		aNew = append(aNew, r)
	}
	for _, r := range records(retB, model.Inbox, bIDs) {
		w.track(r, true, setState(r, model.Readed)+keep, "INBOX READED, no consumer")
		bNew = append(bNew, r)
	}
	for _, r := range records(retSender, model.Outbox, nil) {
		w.mu.Lock()
		_, ok := w.rec[r.RecordID]
		w.mu.Unlock()
		if !ok {
			w.track(r, false, 0, "OUTBOX SENT, kept 30d")
		}
	}
	w.settle("retention of finished records next to a lagging consumer")
	// One more full pass, now that the lagging records are old enough.
	res, err := d.Admin(1).RunRetention(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records[model.Inbox] != 0 {
		t.Errorf("a pass with the consumer lagging deleted %d INBOX records", res.Records[model.Inbox])
	}
	w.look(0)
	info, err := d.Admin(0).GetConsumer(ctx, retA, retCons)
	if err != nil {
		t.Fatal(err)
	}
	if info.SourceSeq != 30 || info.SourceLastSeq != 35 {
		t.Fatalf("consumer %s: source_seq %d of %d while its row is locked, want 30 of 35", retCons, info.SourceSeq, info.SourceLastSeq)
	}
	t.Logf("consumer %s held at source seq %d of %d: its 5 unexamined READED records stay, %d finished at the same time in another box went",
		retCons, info.SourceSeq, info.SourceLastSeq, len(bNew))

	// Let it go: it examines them, gets its 5 records, and they go.
	w.mu.Lock()
	w.adopt = func(r model.Record) *retained {
		if r.Owner == retA && r.BoxKind == model.ConsumerBox(retCons) && r.Seq > 30 && r.State == model.Unread {
			return &retained{owner: r.Owner, box: r.BoxKind, seq: r.Seq, why: "consumer record UNREAD above the cursor"}
		}
		return nil
	}
	w.mu.Unlock()
	released := time.Now().UnixMilli()
	release()
	for _, r := range aNew {
		w.set(r.RecordID, true, released, "INBOX READED, examined once the consumer caught up")
	}
	eventually(ctx, t, 15*time.Second, "the consumer caught up", func() string {
		info, err := d.Admin(0).GetConsumer(ctx, retA, retCons)
		if err != nil {
			return err.Error()
		}
		if info.SourceSeq != 35 || info.LastSeq != 35 {
			return fmt.Sprintf("source_seq %d, last_seq %d", info.SourceSeq, info.LastSeq)
		}
		return ""
	})
	w.settle("retention of the records the consumer examined late")
	return int64(len(aNew) + len(bNew))
}
