package main

import (
	"context"
	"errors"
	"time"
)

// errSkip marks a peer that cannot be reached: reported as skipped, not as
// a failure.
var errSkip = errors.New("skipped")

// errUnsupported marks a phase a target has no equivalent for.
var errUnsupported = errors.New("not supported by this target")

// Config is what every target gets.
type Config struct {
	// Run is unique per run, so queues and recipients start empty.
	Run       string
	Producers int
	Consumers int
	// Size is the body size in bytes.
	Size int
	// MsgcenterURL, MsgcenterToken: the live msgcenter server.
	MsgcenterURL   string
	MsgcenterToken string
	// NATSURL is the NATS server with JetStream.
	NATSURL string
	// PostgresURL is the PostgreSQL database River uses.
	PostgresURL string
	// AckNext: msgcenter's consumers acknowledge and claim the next
	// message in one request (a state change with next).
	AckNext bool
}

// Target is one system under load. The harness calls Open once, then the
// phases; Send and ClaimAck are called from many goroutines at once
// (producer and consumer numbers are 0..Producers-1 and 0..Consumers-1;
// a target may keep per-worker connections by them).
type Target interface {
	Name() string
	// Open connects and prepares an empty queue. A peer that is not
	// reachable returns an error wrapping errSkip.
	Open(ctx context.Context, cfg Config) error
	// Send enqueues one message and returns once the system has
	// acknowledged it durably (msgcenter: post_send's 200; JetStream: the
	// PubAck; River: the committed insert).
	Send(ctx context.Context, producer int, body []byte) error
	// ClaimAck takes one message, waiting up to wait, calls received with
	// its body the moment it has it (before acknowledging), and returns
	// once the acknowledgement is confirmed by the system. ok is false when
	// nothing came within wait.
	ClaimAck(ctx context.Context, consumer int, wait time.Duration, received func(body []byte)) (ok bool, err error)
	Close() error
}

// Flusher is implemented by targets whose acknowledgements complete
// asynchronously (River's completer): Flush returns once the first n
// claimed messages are durably complete, and the phase's time includes it.
type Flusher interface {
	Flush(ctx context.Context, n int) error
}

// Releaser is implemented by targets whose consumers may end a phase
// holding a message they claimed but did not yet count (msgcenter with
// -ack-next): Release puts such messages back unacknowledged, so a later
// phase or run finds them.
type Releaser interface {
	Release(ctx context.Context) error
}

// Grouper is implemented by targets with group fan-out: SendGroup sends
// one message to a group of g subscribers (set up on first use, delivering
// as delivery says: "members" or "group") and returns when it is
// acknowledged and readable by every subscriber.
type Grouper interface {
	SendGroup(ctx context.Context, g int, delivery string, body []byte) error
}
