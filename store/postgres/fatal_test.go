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
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// fatalProxy forwards a client's connections to the server. Once armed, it
// lets pass `commits` COMMITs, then, right after the next one's answer,
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

// openThroughFatalProxy opens a store in a schema of its own whose
// connections go through a fatalProxy.
func openThroughFatalProxy(t *testing.T) (*postgres.Store, *fatalProxy) {
	t.Helper()
	schema := newSchema(t)
	u, err := url.Parse(testURL(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("%s is not a postgres:// URL, which this test routes through a proxy", "MSGCENTER_TEST_POSTGRES_URL")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &fatalProxy{ln: ln, up: u.Host}
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
	u.Host = ln.Addr().String()
	s, err := postgres.Open(t.Context(), u.String(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
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

// TestAckWithNextStandsWhenItsSessionEndsAfterCommit: the server answers
// the COMMIT of an ack with its next claim and then ends the session
// (FATAL 57P01, as when a backend is terminated during its COMMIT). Both
// are committed, so both are reported, and neither is made again: pgx's
// Close reports the FATAL after the COMMIT's answer was read, and taking
// that for a refusal ran the ack again alone, which then failed as a
// conflict with itself.
func TestAckWithNextStandsWhenItsSessionEndsAfterCommit(t *testing.T) {
	s, p := openThroughFatalProxy(t)
	ctx := t.Context()
	recs, held, claim := heldInbox(t, s, "did:test:fatal", "fatal-1", "fatal-2", "fatal-3")

	p.armed.Store(true)
	ack := &store.Update{RecordID: held.RecordID, From: model.Reading, ExpectLeaseID: "L1", To: model.Readed, NowMS: 2100}
	rec, next, err := s.UpdateThenClaim(ctx, ack, claim("L2"))
	if p.fired.Load() != 1 {
		t.Fatalf("the proxy ended %d sessions after a COMMIT, want 1", p.fired.Load())
	}
	if err != nil || rec.State != model.Readed || next.Err != nil || next.Record.RecordID != recs[1].RecordID {
		t.Fatalf("UpdateThenClaim = %+v, %+v, %v; want the ack and the claim of the second record", rec, next, err)
	}
	for i, want := range []model.State{model.Readed, model.Reading, model.Unread} {
		got, err := s.GetRecord(ctx, recs[i].RecordID)
		if err != nil || got.State != want {
			t.Fatalf("record %d: %s, %v; want %s", i+1, got.State, err, want)
		}
	}
}

// TestSendStandsWhenItsSessionEndsAfterCommit: the server answers the
// COMMIT of a send and then ends the session (FATAL 57P01). The send is
// in, and reported as it happened: its record created, not found
// existing by a second write of the same plan.
func TestSendStandsWhenItsSessionEndsAfterCommit(t *testing.T) {
	s, p := openThroughFatalProxy(t)
	p.armed.Store(true)
	res, err := s.Apply(t.Context(), plan("fatal-send", "did:test:fatal", model.Inbox, 1000))
	if p.fired.Load() != 1 {
		t.Fatalf("the proxy ended %d sessions after a COMMIT, want 1", p.fired.Load())
	}
	if err != nil || len(res.Created) != 1 || len(res.Existing) != 0 {
		t.Fatalf("Apply = %+v, %v; want its record created", res, err)
	}
}
