package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/model"
)

// Metrics holds msgcenter's Prometheus metrics. It implements core.Metrics
// for the core's counters and reads gauges (records by box and state,
// scheduled messages) from the store at scrape time.
type Metrics struct {
	reg      *prometheus.Registry
	claims   *prometheus.CounterVec
	retries  *prometheus.CounterVec
	dead     *prometheus.CounterVec
	expired  *prometheus.CounterVec
	created  *prometheus.CounterVec
	purged   *prometheus.CounterVec
	purgedMs prometheus.Counter
	sched    prometheus.Counter
	mailPart *prometheus.CounterVec
	mails    *prometheus.CounterVec
	wakes    *prometheus.CounterVec
	requests *prometheus.HistogramVec

	streams      *prometheus.GaugeVec
	ownersOnline prometheus.Gauge
	streamsSlow  *prometheus.CounterVec
}

var _ core.Metrics = (*Metrics)(nil)

// NewMetrics creates the metrics on a fresh registry (with Go and process
// collectors).
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_claims_total",
			Help: "Records claimed with a lease (get_next)."}, []string{"box"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_retries_total",
			Help: "Failed attempts put back to wait for a retry."}, []string{"box"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_dead_total",
			Help: "Records that became DEAD."}, []string{"box"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_lease_expired_total",
			Help: "Leases that expired before an ack."}, []string{"box"}),
		created: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_records_created_total",
			Help: "Records created."}, []string{"box"}),
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_purged_records_total",
			Help: "Records deleted by retention, by box family."}, []string{"box"}),
		purgedMs: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgcenter_purged_messages_total",
			Help: "Message bodies deleted by retention once no record referred to them."}),
		sched: prometheus.NewCounter(prometheus.CounterOpts{Name: "msgcenter_scheduled_total",
			Help: "Delayed messages scheduled."}),
		mailPart: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_mail_parts_total",
			Help: "Parts of Mails (dispatches with aggregate), by stage: added (stored, waiting for the burst to end), written (delivered in their Mail), dropped (their Mail no longer validated)."},
			[]string{"stage"}),
		mails: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_mails_total",
			Help: "Mails whose burst ended, by outcome: written (delivered as one message) or dropped (no longer valid)."},
			[]string{"outcome"}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_claim_wakeups_total",
			Help: "Claimers woken while they waited (get_next with wait_ms), by what they did: taken (claimed a record), empty (looked and found none), skipped (did not look: another claimer had found none since the last change that could leave one; also counts claimers back for more after an ack)."},
			[]string{"box", "outcome"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "msgcenter_http_request_duration_seconds",
			Help: "HTTP request latency by route and status.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)},
			[]string{"route", "code"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "msgcenter_stream_connections",
			Help: "Open streams on this node by kind (box, events)."}, []string{"kind"}),
		ownersOnline: prometheus.NewGauge(prometheus.GaugeOpts{Name: "msgcenter_stream_owners_online",
			Help: "DIDs holding at least one open stream on this node."}),
		streamsSlow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "msgcenter_stream_slow_disconnects_total",
			Help: "Streams cut off because the client did not read in time."}, []string{"kind"}),
	}
	for _, k := range []string{streamKindBox, streamKindEvents} {
		m.streams.WithLabelValues(k)
	}
	reg.MustRegister(m.claims, m.retries, m.dead, m.expired, m.created, m.purged, m.purgedMs, m.sched, m.mailPart, m.mails, m.wakes, m.requests,
		m.streams, m.ownersOnline, m.streamsSlow,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Claimed implements core.Metrics.
func (m *Metrics) Claimed(b model.BoxKind) { m.claims.WithLabelValues(string(b.Family())).Inc() }

// Retried implements core.Metrics.
func (m *Metrics) Retried(b model.BoxKind) { m.retries.WithLabelValues(string(b.Family())).Inc() }

// Dead implements core.Metrics.
func (m *Metrics) Dead(b model.BoxKind) { m.dead.WithLabelValues(string(b.Family())).Inc() }

// LeaseExpired implements core.Metrics.
func (m *Metrics) LeaseExpired(b model.BoxKind) { m.expired.WithLabelValues(string(b.Family())).Inc() }

// Created implements core.Metrics.
func (m *Metrics) Created(b model.BoxKind, n int) {
	m.created.WithLabelValues(string(b.Family())).Add(float64(n))
}

// Purged implements core.Metrics.
func (m *Metrics) Purged(b model.BoxKind, n int) {
	m.purged.WithLabelValues(string(b.Family())).Add(float64(n))
}

// PurgedMessages implements core.Metrics.
func (m *Metrics) PurgedMessages(n int) { m.purgedMs.Add(float64(n)) }

// ClaimWake implements core.Metrics.
func (m *Metrics) ClaimWake(b model.BoxKind, o core.WakeOutcome) {
	m.wakes.WithLabelValues(string(b.Family()), string(o)).Inc()
}

// Scheduled implements core.Metrics.
func (m *Metrics) Scheduled() { m.sched.Inc() }

// MailPartAdded implements core.Metrics.
func (m *Metrics) MailPartAdded() { m.mailPart.WithLabelValues("added").Inc() }

// MailFlushed implements core.Metrics.
func (m *Metrics) MailFlushed(parts int, outcome string) {
	m.mails.WithLabelValues(outcome).Inc()
	m.mailPart.WithLabelValues(outcome).Add(float64(parts))
}

func (m *Metrics) observeRequest(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

func (m *Metrics) streamOpened(kind string, delta, ownersOnline int) {
	m.streams.WithLabelValues(kind).Add(float64(delta))
	m.ownersOnline.Set(float64(ownersOnline))
}

func (m *Metrics) streamSlow(kind string) { m.streamsSlow.WithLabelValues(kind).Inc() }

// WatchService registers the gauges read from svc at scrape time.
func (m *Metrics) WatchService(svc *core.Service) {
	m.reg.MustRegister(&statsCollector{svc: svc,
		records: prometheus.NewDesc("msgcenter_records", "Records by box kind and state.", []string{"box", "state"}, nil),
		sched:   prometheus.NewDesc("msgcenter_scheduled", "Delayed messages waiting to come due.", nil, nil),
	})
}

// statsCollector counts from the store, at most once per second however
// often it is scraped, so a busy scraper cannot load the database.
type statsCollector struct {
	svc     *core.Service
	records *prometheus.Desc
	sched   *prometheus.Desc

	mu    sync.Mutex
	at    time.Time
	stats core.Stats
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.records; ch <- c.sched }

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.at) > time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if st, err := c.svc.Stats(ctx); err == nil {
			c.stats, c.at = st, time.Now()
		}
		cancel()
	}
	st := c.stats
	c.mu.Unlock()
	// Every consumer has its own box; the gauge speaks of box families,
	// so its label set stays bounded however many consumers exist.
	type key struct{ box, state string }
	counts := make(map[key]int64, len(st.Records))
	var order []key
	for _, r := range st.Records {
		k := key{string(r.Box.Family()), string(r.State)}
		if _, ok := counts[k]; !ok {
			order = append(order, k)
		}
		counts[k] += r.Count
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(c.records, prometheus.GaugeValue, float64(counts[k]), k.box, k.state)
	}
	ch <- prometheus.MustNewConstMetric(c.sched, prometheus.GaugeValue, float64(st.Scheduled))
}

func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request, _ model.Identity) error {
	if a.metrics == nil {
		return model.NotFound("metrics (not enabled on this server)")
	}
	promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}
