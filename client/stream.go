package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Reconnect backoff of the streams: a connection that delivered frames is
// replaced at once, then attempts wait from streamBackoffMin doubling up to
// streamBackoffMax.
const (
	streamBackoffMin = 100 * time.Millisecond
	streamBackoffMax = 5 * time.Second
	// streamIdle is how long a connection may stay silent (the server sends
	// a heartbeat every 15 s) before it is taken for dead and replaced.
	streamIdle = 45 * time.Second
)

// StreamBox follows a box over Server-Sent Events: fn gets every record with
// seq > afterSeq, in seq order, then every new one as it lands, until ctx
// ends or fn returns an error (which StreamBox returns). When the connection
// drops, or the server restarts, it reconnects with backoff and resumes after
// the last seq fn accepted, so fn sees every record exactly once. Errors the
// server answers with (401, 403, 404, 400) end it: retrying cannot help.
//
// A negative afterSeq leaves the start to the server: after a durable
// consumer's acknowledged cursor on a consumer's box (see StreamConsumer),
// from the beginning on any other box.
func (c *Client) StreamBox(ctx context.Context, owner string, box model.BoxKind, afterSeq int64, fn func(wire.StreamFrame) error) error {
	return c.stream(ctx, boxPath(owner, box, "stream"), "after_seq", afterSeq, func(id int64, data []byte) error {
		var f wire.StreamFrame
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("msgcenter: decode stream frame %d: %w", id, err)
		}
		return fn(f)
	})
}

// StreamEvents follows the event log like StreamBox follows a box: events
// with event_id > after, then live ones. owner (admins only; empty for all)
// narrows it to one owner's events.
func (c *Client) StreamEvents(ctx context.Context, after int64, owner string, fn func(model.Event) error) error {
	path := "/v1/events/stream"
	if owner != "" {
		path += "?owner=" + url.QueryEscape(owner)
	}
	return c.stream(ctx, path, "after", after, func(id int64, data []byte) error {
		var ev model.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("msgcenter: decode event %d: %w", id, err)
		}
		return fn(ev)
	})
}

// WhoAmI returns whom the client's token speaks for (GET /v1/whoami).
func (c *Client) WhoAmI(ctx context.Context) (*wire.WhoAmI, error) {
	var out wire.WhoAmI
	if _, err := c.call(ctx, http.MethodGet, "/v1/whoami", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Presence reports whether owner holds open streams on the server asked.
func (c *Client) Presence(ctx context.Context, owner string) (*wire.PresenceResult, error) {
	var out wire.PresenceResult
	if _, err := c.call(ctx, http.MethodGet, "/v1/owners/"+seg(owner)+"/presence", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// fnError marks an error returned by the caller's callback: it ends the
// stream as is.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

func (c *Client) stream(ctx context.Context, path, param string, after int64, fn func(id int64, data []byte) error) error {
	backoff := streamBackoffMin
	for {
		got, err := c.streamOnce(ctx, path, param, &after, fn)
		var fe *fnError
		var ae *APIError
		switch {
		case errors.As(err, &fe):
			return fe.err
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &ae) && ae.Status < 500:
			return err
		}
		// A connection that delivered frames is replaced at once; failing
		// attempts (the server restarting, say) back off.
		delay := backoff
		if got {
			delay, backoff = 0, streamBackoffMin
		} else {
			backoff = min(2*backoff, streamBackoffMax)
		}
		if c.streamRetry != nil {
			c.streamRetry(err, delay)
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}

// streamOnce runs one connection, advancing *after past every id fn
// accepted, and reports whether any frame arrived.
func (c *Client) streamOnce(ctx context.Context, path, param string, after *int64, fn func(int64, []byte) error) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := c.base + path
	// A negative cursor (nothing seen yet, start where the server says)
	// sends none.
	if *after >= 0 {
		sep := "?"
		if bytes.ContainsRune([]byte(path), '?') {
			sep = "&"
		}
		u += sep + param + "=" + strconv.FormatInt(*after, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("msgcenter: build stream request: %w", err)
	}
	// The cursor goes as the parameter only: a Last-Event-ID header would
	// win over it and name itself in an error about a cursor the user
	// gave as a parameter.
	req.Header.Set("Accept", "text/event-stream")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("msgcenter: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, decodeAPIError(resp.StatusCode, data)
	}
	// A connection that stays silent past several heartbeats is dead (a
	// node gone without a FIN): drop it and reconnect.
	idle := time.AfterFunc(streamIdle, cancel)
	defer idle.Stop()

	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var (
		got   bool
		id    int64
		hasID bool
		event string
		data  []byte
	)
	for {
		line, err := readLine(br)
		if err != nil {
			return got, fmt.Errorf("msgcenter: stream %s: %w", path, err)
		}
		idle.Reset(streamIdle)
		switch {
		case len(line) == 0: // end of an event
			if event == "error" {
				return got, decodeAPIError(http.StatusInternalServerError, data)
			}
			if hasID && data != nil && id > *after {
				if err := fn(id, data); err != nil {
					return got, &fnError{err}
				}
				*after, got = id, true
			}
			hasID, event, data = false, "", nil
		case line[0] == ':': // comment: heartbeat
		default:
			field, val, _ := bytes.Cut(line, []byte(":"))
			val = bytes.TrimPrefix(val, []byte(" "))
			switch string(field) {
			case "id":
				n, err := strconv.ParseInt(string(val), 10, 64)
				if err != nil {
					return got, fmt.Errorf("msgcenter: stream %s: bad event id %q", path, val)
				}
				id, hasID = n, true
			case "data":
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, val...)
			case "event":
				event = string(val)
			}
		}
	}
}

// readLine reads one line of any length, without its line ending.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		out = append(out, chunk...)
		if !isPrefix {
			if out == nil {
				out = []byte{}
			}
			return out, nil
		}
	}
}
