// Package tunnel is what a connector between msgcenter and an outside
// platform (a chat service, a webhook, mail) is built on, over the Go SDK:
//
//   - Outbox drains the tunnel's TUNNEL_OUTBOX through a Sender: it claims
//     each record with a lease, keeps the lease alive while the platform
//     takes its time, and reports the outcome, so that the server's
//     retries, backoff and dead letters do the rest.
//   - Inbound turns the platform's events into dispatches that are safe to
//     repeat (the platform's own message id makes the idempotency key) and
//     keeps a route to each outside sender, so that an agent's reply finds
//     its way back.
//
// A connector supplies the platform's half: a Sender, and a loop or an HTTP
// handler that feeds Inbound (see tunnel/webhook).
package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Sender delivers one message to the outside platform and returns the
// platform's id for it (may be empty). A *Error says how the platform
// refused it; any other error counts as a retryable failure (the network,
// a timeout).
type Sender interface {
	Send(ctx context.Context, d *Delivery) (externalID string, err error)
}

// SenderFunc makes a function a Sender.
type SenderFunc func(ctx context.Context, d *Delivery) (string, error)

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, d *Delivery) (string, error) { return f(ctx, d) }

// Delivery is one claimed TUNNEL_OUTBOX record and its message.
type Delivery struct {
	Record model.Record
	Msg    *message.Message
	// Route is the record's route: where on the platform it goes
	// (address, chat_id, account) and to whom (target_did). Never nil.
	Route *model.Route
}

// Heading says who wrote a group's message and where, for a delivery to
// one of the group's people in their own chat (a members group reaches
// its people so when it has no chat of its own): that chat shows only the
// tunnel's bot. It is "" for any other delivery, the group's chat
// included.
func (d *Delivery) Heading() string {
	m := d.Msg
	if m == nil || d.Route == nil || m.Source == "" || m.Source == m.From || d.Route.TargetDID == m.From {
		return ""
	}
	return m.Source + " in " + m.From + ":"
}

// Error is a send the platform refused, with its advice on retrying.
type Error struct {
	// Code is the platform's error code or HTTP status, for the record's
	// delivery.error_code.
	Code    string
	Message string
	// Retryable failures go back to WAIT with backoff until the server's
	// max attempts; the others are DEAD at once.
	Retryable bool
	// RetryAfter, when the platform said how long to wait (HTTP
	// Retry-After, a rate limit), is the least the server waits.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "send failed: " + e.Code
	}
	return fmt.Sprintf("send failed: %s: %s", e.Code, e.Message)
}

// Permanent is a failure that no retry will fix (a bad address, a
// message the platform rejects).
func Permanent(code, msg string) error { return &Error{Code: code, Message: msg} }

// Retry is a failure worth retrying, after at least after (0: the
// server's backoff alone).
func Retry(code, msg string, after time.Duration) error {
	return &Error{Code: code, Message: msg, Retryable: true, RetryAfter: after}
}

// Outbox drains a tunnel's TUNNEL_OUTBOX through a Sender with Workers
// concurrent claims. Delivery is at least once: a send whose outcome
// could not be reported (the connector died, the server was unreachable
// until the lease ran out) is claimed and sent again, so a Sender that can
// should pass Delivery.Record.RecordID to the platform as a dedupe key.
type Outbox struct {
	Client *client.Client
	// DID is the tunnel's DID; Client's token must be the tunnel's (or an
	// admin's).
	DID    string
	Sender Sender
	// Workers is the number of records in flight at once (default 4).
	Workers int
	// Lease is how long a claim holds a record before the server may give
	// it to another (default 60 s); it is extended while a send lasts.
	Lease time.Duration
	// SendTimeout bounds one Send (default 60 s).
	SendTimeout time.Duration
	// Wait is how long an idle worker's claim waits for a record (default
	// 30 s): a long poll, so new records go out at once.
	Wait time.Duration
	// Holder names this process in leases (default host:pid).
	Holder string
	Logger *slog.Logger
}

func (o *Outbox) defaults() error {
	if o.Client == nil || o.Sender == nil {
		return errors.New("tunnel: Outbox needs a Client and a Sender")
	}
	if err := message.CheckDID("did", o.DID, true); err != nil {
		return fmt.Errorf("tunnel: %w", err)
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Lease <= 0 {
		o.Lease = 60 * time.Second
	}
	if o.Lease < 3*time.Second {
		return fmt.Errorf("tunnel: a lease of %v leaves no time to extend it; give at least 3s", o.Lease)
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 60 * time.Second
	}
	if o.Wait <= 0 {
		o.Wait = 30 * time.Second
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = host + ":" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Run works the outbox until ctx ends, then lets the sends in flight finish
// and report (each within SendTimeout) before it returns. It returns early
// only when the server refuses the tunnel's token.
func (o *Outbox) Run(ctx context.Context) error {
	if err := o.defaults(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errc := make(chan error, o.Workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.work(ctx); err != nil {
				errc <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// work is one worker: claim, send, report. (The API can claim the next
// record in the report's call; that is not used here: a report whose
// answer is lost would leave that record claimed by nobody until its lease
// ran out. A platform's send costs far more than the extra call.)
func (o *Outbox) work(ctx context.Context) error {
	var cur *wire.RecordWithMsg
	pause := newBackoff()
	for {
		if cur == nil {
			if ctx.Err() != nil {
				return nil
			}
			// The server answers a long poll within Wait; the margin
			// ends a claim lost on a half-open connection.
			cctx, cancel := context.WithTimeout(ctx, o.Wait+30*time.Second)
			next, err := o.Client.Next(cctx, o.DID, model.TunnelOutbox, o.claim(o.Wait))
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if fatal(err) {
					return fmt.Errorf("tunnel: claiming from %s's outbox: %w", o.DID, err)
				}
				o.Logger.Warn("tunnel: claim failed; trying again", "tunnel", o.DID, "err", err)
				pause.sleep(ctx)
				continue
			}
			pause.reset()
			if next == nil {
				continue
			}
			cur = next
		}
		o.report(ctx, cur, o.deliver(ctx, cur))
		cur = nil
	}
}

func (o *Outbox) claim(wait time.Duration) *wire.NextRequest {
	return &wire.NextRequest{LeaseMS: o.Lease.Milliseconds(), WaitMS: wait.Milliseconds(), Holder: o.Holder}
}

// deliver sends one record, keeping its lease alive meanwhile. The send
// does not end with ctx: a message handed to the platform is reported, or
// it would be sent again.
func (o *Outbox) deliver(ctx context.Context, rec *wire.RecordWithMsg) wire.DeliveryResult {
	d := &Delivery{Record: rec.Record, Route: rec.Record.Route}
	if d.Route == nil {
		d.Route = &model.Route{}
	}
	m, err := message.Decode(rec.Msg)
	if err != nil {
		return result(Permanent("bad_message", "the record's message does not decode: "+err.Error()))
	}
	d.Msg = m
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.SendTimeout)
	defer cancel()
	stop := o.keepLease(sendCtx, rec, cancel)
	ext, err := o.Sender.Send(sendCtx, d)
	stop()
	if err != nil {
		o.Logger.Info("tunnel: send failed", "tunnel", o.DID, "record_id", rec.Record.RecordID,
			"attempt", rec.Record.Delivery.Attempts+1, "err", err)
		return result(err)
	}
	return wire.DeliveryResult{OK: true, ExternalMsgID: ext}
}

// result turns a Sender's error into the report the server takes.
func result(err error) wire.DeliveryResult {
	var e *Error
	if errors.As(err, &e) {
		return wire.DeliveryResult{ErrorCode: e.Code, ErrorMessage: e.Message, Retryable: e.Retryable,
			// A platform asking for longer than msgcenter keeps a record
			// waiting gets the longest wait, not a refused report.
			RetryAfterMS: min(max(e.RetryAfter.Milliseconds(), 0), wire.MaxRetryAfterMS)}
	}
	code := "send_error"
	if errors.Is(err, context.DeadlineExceeded) {
		code = "timeout"
	}
	return wire.DeliveryResult{ErrorCode: code, ErrorMessage: err.Error(), Retryable: true}
}

// keepLease extends the record's lease every third of it until stop is
// called, so a slow platform does not hand the record to another worker
// mid-send. Once the lease is lost (another worker may be sending the
// record now) it ends the send through abort.
func (o *Outbox) keepLease(ctx context.Context, rec *wire.RecordWithMsg, abort func()) (stop func()) {
	if rec.Record.Lease == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				cctx, cancel := context.WithTimeout(ctx, o.Lease/3)
				_, err := o.Client.ExtendLease(cctx, rec.Record.RecordID,
					&wire.LeaseRequest{LeaseMS: o.Lease.Milliseconds(), LeaseID: rec.Record.Lease.ID})
				cancel()
				switch {
				case err == nil || ctx.Err() != nil:
				case errors.Is(err, model.ErrLeaseLost) || errors.Is(err, model.ErrNotFound) || errors.Is(err, model.ErrInvalidTransition):
					o.Logger.Warn("tunnel: lost the lease mid-send; abandoning the send", "record_id", rec.Record.RecordID, "err", err)
					abort()
					return
				default:
					o.Logger.Warn("tunnel: could not extend a lease", "record_id", rec.Record.RecordID, "err", err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// report tells the server how the send went. A report that cannot reach
// the server is tried again until the lease would have run out (the
// server answers a try repeating one it applied, whose answer was lost,
// as it answered that one); a report the server refuses because the
// lease was lost is logged: the record went back to its queue and will be
// sent again.
func (o *Outbox) report(ctx context.Context, rec *wire.RecordWithMsg, res wire.DeliveryResult) {
	req := &wire.DeliveryRequest{Result: &res, WithObject: new(bool)}
	if rec.Record.Lease != nil {
		req.LeaseID = rec.Record.Lease.ID
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Lease)
	defer cancel()
	pause := newBackoff()
	for {
		_, err := o.Client.ReportDelivery(rctx, rec.Record.RecordID, req)
		if err == nil {
			return
		}
		var api *client.APIError
		if errors.As(err, &api) && api.Status < 500 && api.Status != http.StatusTooManyRequests && api.Status != http.StatusRequestTimeout {
			o.Logger.Warn("tunnel: the server refused a delivery report; the record will be sent again when its lease ends",
				"record_id", rec.Record.RecordID, "ok", res.OK, "err", err)
			return
		}
		if rctx.Err() != nil {
			o.Logger.Error("tunnel: could not report a delivery before its lease ran out; it will be sent again",
				"record_id", rec.Record.RecordID, "ok", res.OK, "err", err)
			return
		}
		o.Logger.Warn("tunnel: delivery report failed; trying again", "record_id", rec.Record.RecordID, "err", err)
		pause.sleep(rctx)
	}
}

// fatal: will asking again never help? (The token is wrong or lacks the
// right; the tunnel's DID is malformed.)
func fatal(err error) bool {
	return errors.Is(err, model.ErrUnauthorized) || errors.Is(err, model.ErrForbidden) || errors.Is(err, model.ErrInvalid)
}

// backoff paces retries against an unreachable server: 100 ms doubling to
// 10 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

func (b *backoff) sleep(ctx context.Context) {
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	b.d = min(2*b.d, 10*time.Second)
}
