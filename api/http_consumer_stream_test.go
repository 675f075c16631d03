package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// readWSRaw reads one WebSocket message as a generic JSON object.
func readWSRaw(t testing.TB, ctx context.Context, c *websocket.Conn) map[string]json.RawMessage {
	t.Helper()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read WebSocket: %v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("WebSocket frame %s: %v", b, err)
	}
	return m
}

// readControl reads a control frame, strictly.
func readControl(t testing.TB, ctx context.Context, c *websocket.Conn) wire.StreamControlFrame {
	t.Helper()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read WebSocket: %v", err)
	}
	var f wire.StreamControlFrame
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || f.Type == "" {
		t.Fatalf("want a control frame, got %s (%v)", b, err)
	}
	return f
}

func writeWS(t testing.TB, ctx context.Context, c *websocket.Conn, s string) {
	t.Helper()
	if err := c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		t.Fatalf("write WebSocket: %v", err)
	}
}

func TestHTTPConsumerStreamAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "feed", SourceOwner: didAlice, SourceBox: "INBOX"})
	e.fill(t, "m", 5)
	e.pump(t)
	path := boxPath(didAlice, model.ConsumerBox("feed"), "stream")

	ws := dialWS(t, ctx, e, path, e.alice, nil)
	var frames []wire.StreamFrame
	for range 5 {
		frames = append(frames, readWSFrame(t, ctx, ws))
	}
	checkRun(t, frames, 1, "m", 0)
	if raw := readWSFrameRawKeys(frames); raw != "" {
		t.Fatal(raw)
	}

	writeWS(t, ctx, ws, `{"type":"ack","seq":3}`)
	if f := readControl(t, ctx, ws); f.Type != wire.StreamAcked || f.Seq != 3 || f.Error != nil {
		t.Fatalf("answer to ack 3: %+v", f)
	}
	if c := e.consumer(t, e.alice, didAlice, "feed"); c.AckedSeq != 3 || c.LastSeq != 5 {
		t.Fatalf("consumer after WebSocket ack: %+v", c)
	}
	// Never back: the answer says where the cursor is.
	writeWS(t, ctx, ws, `{"type":"ack","seq":2}`)
	if f := readControl(t, ctx, ws); f.Type != wire.StreamAcked || f.Seq != 3 {
		t.Fatalf("answer to ack 2 after 3: %+v", f)
	}

	t.Run("bad frames are answered, the stream goes on", func(t *testing.T) {
		for _, c := range []struct{ frame, field string }{
			{`{`, ""},
			{`[1]`, "body"},
			{`{"type":"nack","seq":1}`, "type"},
			{`{"seq":1}`, "type"},
			{`{"type":"ack"}`, "seq"},
			{`{"type":"ack","seq":"4"}`, "seq"},
			{`{"type":"ack","seq":4,"extra":1}`, "extra"},
			{`{"type":"ack","seq":-1}`, "seq"},
			{`{"type":"ack","seq":99}`, "seq"},
			{`{"type":"ack","seq":4} {}`, ""},
			{`{"type":"ack","seq":4}}`, ""},
			{`{"type":"ack","seq":1,"seq":5}`, "seq"}, // not the last one silently
			{`{"type":"ack","Seq":5,"seq":1}`, "seq"},
		} {
			writeWS(t, ctx, ws, c.frame)
			f := readControl(t, ctx, ws)
			if f.Type != wire.StreamError || f.Error == nil || f.Error.Code != wire.CodeInvalid || f.Error.Field != c.field || f.Error.Message == "" {
				t.Fatalf("frame %s: answer %+v %+v, want an invalid_argument error on field %q", c.frame, f, f.Error, c.field)
			}
		}
		if err := ws.Write(ctx, websocket.MessageBinary, []byte(`{"type":"ack","seq":4}`)); err != nil {
			t.Fatal(err)
		}
		if f := readControl(t, ctx, ws); f.Type != wire.StreamError || f.Error.Code != wire.CodeInvalid {
			t.Fatalf("binary frame: %+v", f)
		}
		if c := e.consumer(t, e.alice, didAlice, "feed"); c.AckedSeq != 3 {
			t.Fatalf("bad frames moved the cursor: %+v", c)
		}
		e.fill(t, "late", 1)
		e.pump(t)
		if f := readWSFrame(t, ctx, ws); f.Seq != 6 || contentOf(t, f.Msg) != "late-0" {
			t.Fatalf("record after the bad frames: %+v", f)
		}
	})
	ws.Close(websocket.StatusNormalClosure, "")

	t.Run("no cursor resumes after the acked one", func(t *testing.T) {
		ws := dialWS(t, ctx, e, path, e.alice, nil)
		if f := readWSFrame(t, ctx, ws); f.Seq != 4 {
			t.Fatalf("WebSocket without a cursor starts at seq %d, want 4", f.Seq)
		}
		sse := mustSSE(t, ctx, e, path, e.alice, nil)
		if f := sse.nextFrame(t); f.Seq != 4 {
			t.Fatalf("SSE without a cursor starts at seq %d, want 4", f.Seq)
		}
		// A cursor the client gives wins.
		if f := mustSSE(t, ctx, e, path+"?after_seq=0", e.alice, nil).nextFrame(t); f.Seq != 1 {
			t.Fatalf("after_seq=0 starts at seq %d, want 1", f.Seq)
		}
		if f := mustSSE(t, ctx, e, path, e.alice, map[string]string{"Last-Event-ID": "5"}).nextFrame(t); f.Seq != 6 {
			t.Fatalf("Last-Event-ID 5 starts at seq %d, want 6", f.Seq)
		}
		// The SDK: StreamConsumer starts where the server says.
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		var first int64
		err := client.New(e.url, e.alice).StreamConsumer(sctx, didAlice, "feed", func(f wire.StreamFrame) error {
			first = f.Seq
			return errStop
		})
		if !errors.Is(err, errStop) || first != 4 {
			t.Fatalf("SDK StreamConsumer: first seq %d, err %v; want 4", first, err)
		}
		// Acked over HTTP, seen by the next stream.
		if c := ok[wire.ConsumerInfo](t, e.do(t, "POST", consumerPath(didAlice, "feed", "ack"), e.alice, wire.AckRequest{Seq: 5})); c.AckedSeq != 5 {
			t.Fatalf("HTTP ack: %+v", c)
		}
		if f := mustSSE(t, ctx, e, path, e.alice, nil).nextFrame(t); f.Seq != 6 {
			t.Fatalf("after HTTP ack 5 the stream starts at %d", f.Seq)
		}
	})

	t.Run("an ack on a box that is not a consumer's", func(t *testing.T) {
		ws := dialWS(t, ctx, e, boxPath(didAlice, model.Inbox, "stream")+"?after_seq=6", e.alice, nil)
		writeWS(t, ctx, ws, `{"type":"ack","seq":1}`)
		f := readControl(t, ctx, ws)
		if f.Type != wire.StreamError || f.Error.Code != wire.CodeInvalid || f.Error.Field != "type" || !strings.Contains(f.Error.Message, "consumer") {
			t.Fatalf("ack on INBOX: %+v %+v", f, f.Error)
		}
		e.fill(t, "inbox", 1)
		if m := readWSRaw(t, ctx, ws); m["type"] != nil || m["record"] == nil {
			t.Fatalf("after the refused ack the INBOX stream sent %v, want the next record", m)
		}
	})

	t.Run("an ack for a deleted consumer ends the stream", func(t *testing.T) {
		ws := dialWS(t, ctx, e, path, e.alice, nil)
		if f := readWSFrame(t, ctx, ws); f.Seq != 6 {
			t.Fatalf("first frame %+v", f)
		}
		if r := e.do(t, "DELETE", consumerPath(didAlice, "feed", ""), e.alice, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete: %s", r)
		}
		writeWS(t, ctx, ws, `{"type":"ack","seq":6}`)
		// Records fanned out before the delete may still come first.
		var b []byte
		var err error
		for err == nil {
			_, b, err = ws.Read(ctx)
			if err == nil && strings.Contains(string(b), `"type"`) {
				t.Fatalf("after an ack of a deleted consumer: %s", b)
			}
		}
		var ce websocket.CloseError
		// Closed by the refused ack, or by the stream's next read of a box
		// whose consumer is gone, whichever comes first.
		if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation ||
			!strings.HasPrefix(ce.Reason, "ack refused: not_found") && ce.Reason != `consumer "feed" of `+didAlice+` not found` {
			t.Fatalf("after an ack of a deleted consumer: %s, %v; want close 1008 for the consumer not found", b, err)
		}
	})
}

var errStop = errors.New("stop")

// readWSFrameRawKeys is a guard on the frame shape: record frames never
// carry "type", which is how clients tell them from control frames.
func readWSFrameRawKeys(frames []wire.StreamFrame) string {
	for _, f := range frames {
		b, _ := json.Marshal(f)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if _, ok := m["type"]; ok {
			return fmt.Sprintf("record frame %s has a type member", b)
		}
	}
	return ""
}

// TestHTTPConsumerStreamAckEveryFrame: a client on one goroutine acks
// each record as it reads it, so its acks reach the server while the
// pump is writing pages and the answers share the connection with the
// records: every record and every answer arrives, in order, and the
// stored cursor ends at the last record.
func TestHTTPConsumerStreamAckEveryFrame(t *testing.T) {
	t.Parallel()
	const total = 1200 // more than two pages
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e.createConsumer(t, e.alice, wire.ConsumerRequest{Name: "feed", SourceOwner: didAlice, SourceBox: "INBOX"})
	e.produce(t, "m", total, 8, 2000).Wait()
	e.pump(t)
	ws := dialWS(t, ctx, e, boxPath(didAlice, model.ConsumerBox("feed"), "stream"), e.alice, nil)
	var seq, acked int64
	for seq < total || acked < total {
		m := readWSRaw(t, ctx, ws)
		if m["type"] != nil {
			var f wire.StreamControlFrame
			b, _ := json.Marshal(m)
			if err := json.Unmarshal(b, &f); err != nil || f.Type != wire.StreamAcked || f.Seq <= acked {
				t.Fatalf("answer %s after cursor %d (%v)", b, acked, err)
			}
			acked = f.Seq
			continue
		}
		var s int64
		if err := json.Unmarshal(m["seq"], &s); err != nil || s != seq+1 {
			t.Fatalf("record seq %s after %d (%v)", m["seq"], seq, err)
		}
		seq = s
		writeWS(t, ctx, ws, fmt.Sprintf(`{"type":"ack","seq":%d}`, seq))
	}
	if c := e.consumer(t, e.alice, didAlice, "feed"); c.AckedSeq != total {
		t.Fatalf("consumer after %d acks: %+v", total, c)
	}
}

// TestHTTPStreamOfNoConsumer: a stream of a consumer's box whose consumer
// does not exist is 404 at once, with or without a position, rather than
// a stream that waits for ever on a box nothing will fill.
func TestHTTPStreamOfNoConsumer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, q := range []string{"", "?after_seq=0"} {
		path := boxPath(didAlice, model.ConsumerBox("nobody"), "stream") + q
		s, resp, err := openSSE(ctx, e, path, e.alice, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s != nil {
			s.close()
			t.Fatalf("stream of a consumer that does not exist (%q) opened", q)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"code":"not_found"`) {
			t.Fatalf("stream of a consumer that does not exist (%q): %d %s", q, resp.StatusCode, b)
		}
	}
}
