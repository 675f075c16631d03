package postgres_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// fatalProxy forwards a client's connections to the server. Once armed, it
// lets pass commits COMMITs, then, right after the next one's answer,
// sends FATAL 57P01 and closes the connection: what a backend terminated
// during its COMMIT sends (PostgresMain checks for interrupts after it
// answered, before ReadyForQuery).
type fatalProxy struct {
	ln      net.Listener
	up      string
	armed   atomic.Bool
	commits atomic.Int32
	fired   atomic.Int32
}

func startFatalProxy(t *testing.T, upstream string) *fatalProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &fatalProxy{ln: ln, up: upstream}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.handle(c)
		}
	}()
	return p
}

func (p *fatalProxy) handle(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.up)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	r := bufio.NewReader(s)
	for {
		msg := make([]byte, 5)
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(msg[1:])-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if _, err := c.Write(append(msg, body...)); err != nil {
			return
		}
		if msg[0] != 'C' || string(body) != "COMMIT\x00" || !p.armed.Load() || p.commits.Add(-1) >= 0 {
			continue
		}
		p.armed.Store(false)
		var fields []byte
		for _, f := range [][2]string{{"S", "FATAL"}, {"V", "FATAL"}, {"C", "57P01"}, {"M", "terminating connection due to administrator command"}} {
			fields = append(append(append(fields, f[0][0]), f[1]...), 0)
		}
		fields = append(fields, 0)
		e := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(len(fields)+4))
		_, _ = c.Write(append(e, fields...))
		p.fired.Add(1)
		return
	}
}

// TestChangeGroupCommittedBeforeItsSessionEnded: the server answers a
// group's COMMIT and then ends the session (FATAL). The group committed,
// so its calls report their outcomes, and none is made a second time:
// every record a claim took is one a claim returned.
func TestChangeGroupCommittedBeforeItsSessionEnded(t *testing.T) {
	schema := newSchema(t)
	u, err := url.Parse(testURL(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("%s is not a postgres:// URL, which this test routes through a proxy", "MSGCENTER_TEST_POSTGRES_URL")
	}
	p := startFatalProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	s, err := postgres.Open(t.Context(), u.String(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	const owner = "did:test:fatal"
	recs := inbox(t, s, owner, 8)
	h := holdChanges(t, s)
	held, err := s.Claim(ctx, claimAs(owner, owner, "L0"))
	if err != nil {
		t.Fatal(err)
	}

	p.commits.Store(1) // the held call's own transaction
	p.armed.Store(true)
	var got [3]model.Record
	var errs [4]error
	h.queue(t, s,
		func() { got[0], errs[0] = s.Claim(ctx, claimAs(owner, owner, "B")) },
		func() { got[1], errs[1] = s.Claim(ctx, claimAs(owner, owner, "C1")) },
		func() { got[2], errs[2] = s.Claim(ctx, claimAs(owner, owner, "C2")) },
		func() { _, errs[3] = s.Update(ctx, ackOf(held, "L0")) },
	)
	if p.fired.Load() != 1 {
		t.Fatalf("the proxy ended %d sessions after a COMMIT, want 1 (batches %v)", p.fired.Load(), h.batches())
	}
	if groups, grouped, _ := postgres.ChangeGroups(s); groups != 1 || grouped != 3 {
		t.Fatalf("%d groups carried %d calls (batches %v); want the three queued calls in one", groups, grouped, h.batches())
	}
	returned := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for _, r := range got {
		returned[r.RecordID] = true
	}
	reading := 0
	for _, r := range recs {
		cur, err := s.GetRecord(ctx, r.RecordID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.RecordID == held.RecordID:
			if cur.State != model.Readed {
				t.Fatalf("the acked record is %s", cur.State)
			}
		case cur.State == model.Reading:
			reading++
			if !returned[cur.RecordID] {
				t.Fatalf("record %s was claimed (lease %+v) by no claim that returned it", cur.RecordID, cur.Lease)
			}
		}
	}
	if reading != len(got) {
		t.Fatalf("%d records claimed, %d claims returned", reading, len(got))
	}
}
