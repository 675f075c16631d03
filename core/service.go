// Package core is msgcenter's message domain: dispatch and post_send
// planning, boxes with claims and leases, retries with backoff and dead
// letters, delayed delivery, groups, read receipts, contacts, conversations,
// events and tokens. It knows nothing of SQL or HTTP: it runs on a
// store.Store and is called by the api package (and by tests) directly.
package core

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Config tunes the service. Zero values take the defaults of DESIGN.md.
type Config struct {
	// MaxMessageBytes bounds a message's canonical JSON (default 1 MiB).
	MaxMessageBytes int
	// DefaultLease is the lease of a claim that names none (default 300 s).
	DefaultLease time.Duration
	// MaxLease bounds a requested lease (default 12 h).
	MaxLease time.Duration
	// MaxAttempts is how many failed attempts make a record DEAD (default 3).
	MaxAttempts int
	// TunnelMaxAttempts is MaxAttempts for TUNNEL_OUTBOX records (default:
	// MaxAttempts; serve's default is 10): the far side of a tunnel (a mail relay that greylists,
	// a rate-limited chat API) is often away longer than a few seconds.
	TunnelMaxAttempts int
	// BackoffBase and BackoffMax shape the retry delay: base·2^(n-1),
	// capped (defaults 1 s and 5 min).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxWait bounds a long poll (default 300 s).
	MaxWait time.Duration
	// MaxDelay bounds delayed delivery (default 10 years; never below 1 year).
	MaxDelay time.Duration
	// IdleRecheck is how long background loops sleep at most when they know
	// of no upcoming work, as a safety net (default 5 s).
	IdleRecheck time.Duration
	// MailWindow and MailMaxWait are an aggregated burst's defaults: its
	// Mail is written once no part came for MailWindow, or MailMaxWait
	// after its first part (defaults 5 s and 30 s, as seed 002).
	MailWindow  time.Duration
	MailMaxWait time.Duration
	// MailMaxParts bounds a Mail's parts (default 100): a burst that
	// reaches it is written at once, and the next part starts another.
	MailMaxParts int
	// Retention is the retention policy.
	Retention RetentionConfig
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// Metrics receives counters (default: none).
	Metrics Metrics
}

func (c *Config) setDefaults() {
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = message.DefaultMaxBytes
	}
	if c.DefaultLease <= 0 {
		c.DefaultLease = 300 * time.Second
	}
	if c.MaxLease <= 0 {
		c.MaxLease = 12 * time.Hour
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.TunnelMaxAttempts <= 0 {
		c.TunnelMaxAttempts = c.MaxAttempts
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Minute
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 300 * time.Second
	}
	if c.MaxDelay < 366*24*time.Hour {
		c.MaxDelay = 10 * 365 * 24 * time.Hour
	}
	if c.IdleRecheck <= 0 {
		c.IdleRecheck = 5 * time.Second
	}
	if c.MailWindow <= 0 {
		c.MailWindow = 5 * time.Second
	}
	if c.MailMaxWait <= 0 {
		c.MailMaxWait = 30 * time.Second
	}
	c.MailMaxWait = max(c.MailMaxWait, c.MailWindow)
	if c.MailMaxParts <= 0 {
		c.MailMaxParts = 100
	}
	c.Retention.setDefaults()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
}

// Service is the message center. Create it with New, start its background
// work with Run, and call its operations from any goroutine.
type Service struct {
	st     store.Store
	cfg    Config
	log    *slog.Logger
	notify *notifier
	pump   *pump
	woken  *wakeGate // one woken claimer per box at a time (claimgate.go)

	// schedMu keeps materialization of delayed messages in due order when
	// the scheduler loop and an admin flush run at once.
	listenOnce sync.Once
	listening  chan struct{} // closed once this node hears other nodes' changes

	schedMu sync.Mutex
	// consumerMu makes an agent's count of its consumers and the creation
	// of one more a single step (CreateConsumer).
	consumerMu sync.Mutex
	schedKick  chan struct{}
	// mailMu keeps the flusher and an admin's flush from writing the same
	// Mail at once (the loser would only meet a conflict, but log it).
	mailMu     sync.Mutex
	mailKick   chan struct{}
	reaperKick chan struct{}
	reaperAt   wakeTime
	// eventsSeen is the highest event id this node knows was handed out:
	// a cursor at or below it needs no look at the store (Events).
	eventsSeen atomic.Int64
}

// New returns a service over st.
func New(st store.Store, cfg Config) *Service {
	cfg.setDefaults()
	return &Service{
		st:         st,
		cfg:        cfg,
		log:        cfg.Logger,
		notify:     newNotifier(),
		woken:      newWakeGate(),
		pump:       newPump(),
		schedKick:  make(chan struct{}, 1),
		mailKick:   make(chan struct{}, 1),
		reaperKick: make(chan struct{}, 1),
		listening:  make(chan struct{}),
	}
}

// Listening is closed once the node hears changes made through other nodes
// (at once for a store only this node uses). A server should not take
// requests before, or a write made on another node meanwhile would not wake
// a long poll here.
func (s *Service) Listening() <-chan struct{} {
	if _, ok := s.st.(store.Notifier); !ok {
		s.listenOnce.Do(func() { close(s.listening) })
	}
	return s.listening
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

func (s *Service) nowMS() int64 { return s.cfg.Now().UnixMilli() }

// Run does the background work — materializing due delayed messages,
// writing Mails as their bursts end,
// returning records whose lease expired, feeding durable consumers and
// retention — until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); s.runScheduler(ctx) }()
	go func() { defer wg.Done(); s.runMailFlusher(ctx) }()
	go func() { defer wg.Done(); s.runReaper(ctx) }()
	go func() { defer wg.Done(); s.runPump(ctx) }()
	go func() { defer wg.Done(); s.runRetention(ctx) }()
	if n, ok := s.st.(store.Notifier); ok {
		wg.Add(1)
		go func() { defer wg.Done(); s.listen(ctx, n) }()
	}
	wg.Wait()
	return nil
}

// listen relays other nodes' changes to this node's waiters, listening
// again (after a pause) whenever the connection is lost.
func (s *Service) listen(ctx context.Context, n store.Notifier) {
	for again := false; ctx.Err() == nil; again = true {
		ready := func() {
			s.listenOnce.Do(func() { close(s.listening) })
			if again {
				// What changed between the loss and now was notified to
				// no one: wake everything once more now that nothing
				// will be missed (the wake at the loss came too early
				// for writes made while listening was down).
				s.wakeAll()
			}
		}
		err := n.Listen(ctx, ready, func(c store.Change) {
			if c.Scheduled {
				kick(s.schedKick)
				return
			}
			s.notify.Changed(c.Owner, c.Box)
			s.pump.unknownConsumer(c.Owner, c.Box)
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("lost the change notifications; listening again", "err", err)
		// Whatever changed meanwhile must not stay unnoticed: wake every
		// waiter to look again, now and once listening is back.
		s.wakeAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// wakeAll makes every waiter, stream, the scheduler and the consumer pump
// look again, as if everything had changed.
func (s *Service) wakeAll() {
	s.notify.ChangedAll()
	kick(s.schedKick)
	s.pump.mu.Lock()
	s.pump.reload = true
	s.pump.mu.Unlock()
	kick(s.pump.kick)
}

// Stats is a snapshot for gauges.
type Stats struct {
	Records   []store.BoxStateCount
	Scheduled int64
}

// Stats counts records by box and state and pending delayed messages.
func (s *Service) Stats(ctx context.Context) (Stats, error) {
	counts, err := s.st.CountRecords(ctx)
	if err != nil {
		return Stats{}, err
	}
	_, n, err := s.st.ListScheduled(ctx, store.ScheduleQuery{Limit: 1})
	if err != nil {
		return Stats{}, err
	}
	return Stats{Records: counts, Scheduled: n}, nil
}

// Metrics receives the service's counters. The api package backs it with
// Prometheus; the core only calls it.
type Metrics interface {
	Claimed(box model.BoxKind)
	Retried(box model.BoxKind)
	Dead(box model.BoxKind)
	LeaseExpired(box model.BoxKind)
	Created(box model.BoxKind, n int)
	Scheduled()
	// MailPartAdded counts a part stored for a Mail; MailFlushed a Mail of
	// parts parts written ("written") or dropped ("dropped").
	MailPartAdded()
	MailFlushed(parts int, outcome string)
	// Purged counts records retention deleted, by box family.
	Purged(box model.BoxKind, n int)
	PurgedMessages(n int)
	// ClaimWake counts what a claimer woken while it waited did: took a
	// record, looked and found none, or skipped the look because another
	// claimer had found none since the last change that could leave one.
	// A claimer back for more (after an ack) counts only when it skips.
	ClaimWake(box model.BoxKind, outcome WakeOutcome)
}

// WakeOutcome is what a woken claimer did (Metrics.ClaimWake).
type WakeOutcome string

const (
	WakeTaken   WakeOutcome = "taken"
	WakeEmpty   WakeOutcome = "empty"
	WakeSkipped WakeOutcome = "skipped"
)

type noMetrics struct{}

func (noMetrics) Claimed(model.BoxKind)                {}
func (noMetrics) Retried(model.BoxKind)                {}
func (noMetrics) Dead(model.BoxKind)                   {}
func (noMetrics) LeaseExpired(model.BoxKind)           {}
func (noMetrics) Created(model.BoxKind, int)           {}
func (noMetrics) Scheduled()                           {}
func (noMetrics) MailPartAdded()                       {}
func (noMetrics) MailFlushed(int, string)              {}
func (noMetrics) Purged(model.BoxKind, int)            {}
func (noMetrics) PurgedMessages(int)                   {}
func (noMetrics) ClaimWake(model.BoxKind, WakeOutcome) {}
