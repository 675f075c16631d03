package api

// Streams push a box's records, or the event log, to a connected client
// over Server-Sent Events or WebSocket. Both are the same loop over the
// core's paged reads:
//
//	for {
//		changed := watch()          // taken BEFORE the read: no lost wake-up
//		page := read(after cursor)  // replay, and later the live tail
//		send(page); cursor = last sent
//		if page was full { continue } else { wait for changed / heartbeat / end }
//	}
//
// The cursor only moves past what was handed to the client, and the next read
// starts exactly there, so the switch from replay to live can neither skip
// nor repeat a record. Nothing is buffered beyond one page, and every write
// has a deadline: a client that does not keep up is disconnected and
// resumes from its own cursor later.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

const (
	defaultHeartbeat          = 15 * time.Second
	defaultStreamWriteTimeout = 10 * time.Second
	// streamPage is how many records one read of the replay fetches.
	streamPage = 500
	// eventsRecheck is the event stream's fallback re-read (see eventStream).
	eventsRecheck = time.Second
)

// Stream kinds, the label of the connection gauge.
const (
	streamKindBox    = "box"
	streamKindEvents = "events"
)

var (
	// errClosing ends a stream because the server is shutting down.
	errClosing = errors.New("server shutting down")
	// errTooSlow ends a stream whose client did not take a frame in time.
	errTooSlow = errors.New("client too slow")
)

// frame is one item for the client: its cursor value and its JSON.
type frame struct {
	id   int64
	data []byte
}

// source is what a stream reads: a change notification and a paged read.
type source struct {
	kind  string
	watch func() <-chan struct{}
	fetch func(ctx context.Context, after int64) ([]frame, error)
	// recheck, when set, reads again that often even without a notification.
	recheck time.Duration
	// ack, when set, takes a WebSocket client's {"type":"ack","seq":N}: a
	// durable consumer's box stream advances the consumer's cursor. It
	// returns the cursor after the ack.
	ack func(ctx context.Context, seq int64) (int64, error)
	// check, when set, runs at every heartbeat: an error ends the stream.
	check func(ctx context.Context) error
}

// sink writes frames to one client. send gets one page at a time.
// interrupted is a channel closed when the sink cannot go on even though
// nothing is being sent (nil if that cannot happen); cause is then the error
// to end with.
type sink interface {
	send(ctx context.Context, frames []frame) error
	heartbeat(ctx context.Context) error
	interrupted() <-chan struct{}
	cause() error
}

// streamMode is how the client asked to be served.
type streamMode int

const (
	modeNone streamMode = iota
	modeSSE
	modeWebSocket
)

func negotiate(r *http.Request) streamMode {
	for _, v := range strings.Split(r.Header.Get("Upgrade"), ",") {
		if strings.EqualFold(strings.TrimSpace(v), "websocket") {
			return modeWebSocket
		}
	}
	for _, v := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(v, ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			return modeSSE
		}
	}
	return modeNone
}

// startCursor is the cursor to resume after: the Last-Event-ID header (an
// EventSource reconnecting to the same URL sends it) wins over the
// lastEventId parameter (a polyfill's way of sending it), which wins over
// the query parameter. from names where it came from, for errors about
// it; "" when the client sent none.
func startCursor(r *http.Request, param string) (after int64, from string, err error) {
	for _, p := range []string{param, lastEventIDParam} {
		n, err := queryInt(r, p)
		if err != nil {
			return 0, "", err
		}
		if r.URL.Query().Get(p) != "" {
			after, from = n, p
		}
	}
	if v := strings.TrimSpace(r.Header.Get(lastEventID)); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, "", model.Invalid(lastEventID, "must be an integer, got "+strconv.Quote(v))
		}
		from = lastEventID
	}
	if after < 0 {
		return 0, "", model.Invalid(from, "must not be negative")
	}
	return after, from, nil
}

const (
	lastEventID      = "Last-Event-ID"
	lastEventIDParam = "lastEventId"
)

// cursorErr names the header or parameter in an error the core found
// with a cursor that came from it: the core knows it only as param.
func cursorErr(err error, param, from string) error {
	var me *model.Error
	if from != "" && errors.As(err, &me) && me.Field == param {
		me.Field = from
	}
	return err
}

// boxStream is GET /v1/boxes/{owner}/{box}/stream. A durable consumer's
// box streamed without a cursor (neither after_seq nor Last-Event-ID)
// starts after the consumer's acknowledged cursor, and its WebSocket takes
// acks (see serveWebSocket).
func (a *API) boxStream(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	owner, box, err := pathBox(r)
	if err != nil {
		return err
	}
	after, from, err := startCursor(r, "after_seq")
	if err != nil {
		return err
	}
	given := from != ""
	name, isConsumer := box.ConsumerName()
	if isConsumer {
		cursor, _, err := a.svc.ConsumerCursor(r.Context(), who, owner, box)
		if err != nil {
			return err
		}
		if !given {
			after = cursor
		}
	}
	watch := func() <-chan struct{} { return a.svc.Watch(owner, box) }
	read := func(ctx context.Context, after int64) ([]frame, error) {
		res, err := a.svc.Sync(ctx, who, wire.SyncQuery{Owner: owner, Box: box, AfterSeq: after,
			Limit: streamPage, WithObject: true})
		if err != nil {
			return nil, err
		}
		out := make([]frame, 0, len(res.Items))
		for _, it := range res.Items {
			b, err := marshalFrame(&wire.StreamFrame{Seq: it.Record.Seq, Record: it.Record, Msg: it.Msg})
			if err != nil {
				return nil, err
			}
			out = append(out, frame{id: it.Record.Seq, data: b})
		}
		return out, nil
	}
	src := &source{
		kind:  streamKindBox,
		watch: watch,
		// Every stream on the box at this cursor reads the same page; they
		// share one read (stream_share.go), each with its access checked.
		fetch: func(ctx context.Context, after int64) ([]frame, error) {
			if err := a.svc.CanRead(ctx, who, owner, box); err != nil {
				return nil, err
			}
			return a.pages.get(ctx, pageKey{owner, box, after}, watch,
				func(ctx context.Context) ([]frame, error) { return read(ctx, after) })
		},
	}
	if isConsumer {
		src.ack = func(ctx context.Context, seq int64) (int64, error) {
			c, err := a.svc.AckConsumer(ctx, who, owner, name, seq)
			if err != nil {
				return 0, err
			}
			return c.AckedSeq, nil
		}
	}
	return cursorErr(a.serveStream(w, r, who, src, after), "after_seq", from)
}

// eventStream is GET /v1/events/stream.
func (a *API) eventStream(w http.ResponseWriter, r *http.Request, who model.Identity) error {
	after, from, err := startCursor(r, "after")
	if err != nil {
		return err
	}
	owner, err := queryDID(r, "owner")
	if err != nil {
		return err
	}
	src := &source{
		kind:  streamKindEvents,
		watch: a.svc.WatchEvents,
		fetch: func(ctx context.Context, after int64) ([]frame, error) {
			res, err := a.svc.Events(ctx, who, wire.EventQuery{After: after, Owner: owner, Limit: streamPage})
			if err != nil {
				return nil, err
			}
			out := make([]frame, 0, len(res.Items))
			for _, ev := range res.Items {
				b, err := marshalFrame(ev)
				if err != nil {
					return nil, err
				}
				out = append(out, frame{id: ev.EventID, data: b})
			}
			return out, nil
		},
		// Record writes wake the event stream, but not every event comes
		// with a notification this node sees: a claim (or a lease extension)
		// made on another PostgreSQL node is not announced over
		// LISTEN/NOTIFY. Reading again every second bounds how late such an
		// event can be.
		recheck: eventsRecheck,
	}
	return cursorErr(a.serveStream(w, r, who, src, after), "after", from)
}

// endWithToken makes src check, after every read, before every ack and at
// every heartbeat, that the token the stream was opened with is still
// valid: revoking a token ends its open streams (a 401's error, as SSE's
// error event or the WebSocket's close reason), idle ones within a
// heartbeat, and none carries anything written after the revocation (a
// read that saw such a write ran after the revocation, so the check after
// it fails; core.Service.StillValid).
func (a *API) endWithToken(r *http.Request, src *source) {
	valid := func(context.Context) error { return a.svc.StillValid(r.Context()) }
	fetch := src.fetch
	src.fetch = func(ctx context.Context, after int64) ([]frame, error) {
		frames, err := fetch(ctx, after)
		if err == nil {
			err = valid(ctx)
		}
		if err != nil {
			return nil, err
		}
		return frames, nil
	}
	src.check = valid
	if ack := src.ack; ack != nil {
		src.ack = func(ctx context.Context, seq int64) (int64, error) {
			if err := valid(ctx); err != nil {
				return 0, err
			}
			return ack(ctx, seq)
		}
	}
}

// marshalFrame encodes v as one line of JSON.
func marshalFrame(v any) ([]byte, error) {
	return wire.Append(nil, v)
}

// serveStream negotiates the transport, reads the first page while errors
// can still be plain JSON answers (400, 403), then hands over to the
// transport's loop.
func (a *API) serveStream(w http.ResponseWriter, r *http.Request, who model.Identity, src *source, after int64) error {
	mode := negotiate(r)
	if mode == modeNone {
		writeJSON(w, http.StatusNotAcceptable, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNotAcceptable,
			Message: "this is a stream: open it as a WebSocket (Upgrade: websocket) or as Server-Sent Events (Accept: text/event-stream)"}})
		return nil
	}
	limit := MaxAgentStreams
	if who.Role == model.RoleAdmin {
		limit = 0
	}
	release, err := a.streams.open(who.DID, src.kind, limit)
	if err != nil {
		return err
	}
	defer release()
	a.endWithToken(r, src)
	changed := src.watch()
	first, err := src.fetch(r.Context(), after)
	if err != nil {
		return err
	}
	st := &streamState{src: src, after: after, changed: changed, first: first}
	if mode == modeWebSocket {
		a.serveWebSocket(w, r, st)
		return nil
	}
	a.serveSSE(w, r, st)
	return nil
}

// streamState is one stream's position: the cursor, the notification taken
// before the last read and that read's frames, not yet sent.
type streamState struct {
	src     *source
	after   int64
	changed <-chan struct{}
	first   []frame
}

// pump runs the stream until the client goes, falls behind, the server
// closes or a read fails, and says which.
func (a *API) pump(ctx context.Context, st *streamState, out sink) error {
	hb := time.NewTicker(a.heartbeat)
	defer hb.Stop()
	var recheck <-chan time.Time
	if st.src.recheck > 0 {
		t := time.NewTicker(st.src.recheck)
		defer t.Stop()
		recheck = t.C
	}
	broken := out.interrupted()
	frames := st.first
	for {
		if len(frames) > 0 {
			if err := out.send(ctx, frames); err != nil {
				return err
			}
			st.after = frames[len(frames)-1].id
		}
		if len(frames) < streamPage {
		wait:
			for {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-a.closing:
					return errClosing
				case <-broken:
					return out.cause()
				case <-st.changed:
					break wait
				case <-recheck:
					break wait
				case <-hb.C:
					if st.src.check != nil {
						if err := st.src.check(ctx); err != nil {
							return err
						}
					}
					if err := out.heartbeat(ctx); err != nil {
						return err
					}
				}
			}
		}
		select {
		case <-a.closing:
			return errClosing
		default:
		}
		st.changed = st.src.watch()
		var err error
		if frames, err = st.src.fetch(ctx, st.after); err != nil {
			return err
		}
	}
}
