// Package api is msgcenter's HTTP layer: it decodes requests, finds out who
// is calling, calls the core and encodes the answer. It holds no message
// logic of its own; the routes it serves are listed once, in routes(), and
// documented in openapi.yaml (a test keeps the two equal).
package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// Options configure the HTTP layer.
type Options struct {
	Logger *slog.Logger
	// Metrics, when set, serves /metrics and times requests.
	Metrics *Metrics
	// MaxBodyBytes bounds request bodies (default: the core's message limit
	// plus room for the envelope).
	MaxBodyBytes int64
	// StreamHeartbeat is how often an idle stream sends a heartbeat (SSE
	// comment, WebSocket ping) to keep proxies from closing it (default 15 s).
	StreamHeartbeat time.Duration
	// StreamWriteTimeout bounds every write to a stream client; a client
	// that does not take data for that long is disconnected (default 10 s).
	StreamWriteTimeout time.Duration
}

// API serves the /v1 HTTP API over a core.Service.
type API struct {
	svc     *core.Service
	log     *slog.Logger
	metrics *Metrics
	maxBody int64
	mux     *http.ServeMux

	heartbeat    time.Duration
	writeTimeout time.Duration
	streams      *streamRegistry
	pages        pageShare // box streams' shared reads

	closeOnce sync.Once
	closing   chan struct{}
	// contention turns block and mutex profiling on at the first request
	// for such a profile.
	contention sync.Once
}

// Route is one method and path pattern the API serves, with the query
// parameters it takes: any other is refused, so a misspelt filter is a
// 400, not a page of everything. (Stream routes also take access_token.)
type Route struct {
	Method, Pattern string
	Query           []string
	// AnyQuery passes the query through unchecked: the profiles (whose
	// parameters net/http/pprof reads), the streams and the public routes.
	AnyQuery bool
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, who model.Identity) error

type route struct {
	Route
	public bool
	// stream routes also take the token as an access_token query
	// parameter: browsers cannot set headers on EventSource or WebSocket.
	stream bool
	h      handlerFunc
}

// New builds the HTTP handler.
func New(svc *core.Service, opts Options) *API {
	a := &API{svc: svc, log: opts.Logger, metrics: opts.Metrics, maxBody: opts.MaxBodyBytes,
		mux: http.NewServeMux(), closing: make(chan struct{}),
		heartbeat: opts.StreamHeartbeat, writeTimeout: opts.StreamWriteTimeout, streams: newStreamRegistry(opts.Metrics)}
	if a.heartbeat <= 0 {
		a.heartbeat = defaultHeartbeat
	}
	if a.writeTimeout <= 0 {
		a.writeTimeout = defaultStreamWriteTimeout
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.maxBody <= 0 {
		a.maxBody = int64(svc.Config().MaxMessageBytes) + 64<<10
	}
	for _, rt := range a.routes() {
		a.mux.Handle(rt.Method+" "+rt.Pattern, a.wrap(rt))
	}
	return a
}

// ServeHTTP implements http.Handler. Requests no route takes get the mux's
// own verdict — 404, or 405 with an Allow header when the path exists under
// other methods — as the API's JSON error instead of plain text.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := a.mux.Handler(r)
	if pattern != "" {
		a.mux.ServeHTTP(w, r) // it, not h, fills in the path values
		return
	}
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); probe.status == http.StatusMethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeMethodNotAllowed,
			Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + allow}})
		return
	}
	a.writeError(w, r, model.NotFound("route "+r.Method+" "+r.URL.Path))
}

// probeWriter records what the mux's fallback handler would answer.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header         { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) { return len(b), nil }
func (p *probeWriter) WriteHeader(code int)        { p.status = code }

// Close ends long polls in flight (they answer 204) and open streams
// (WebSocket: close 1001 going away; SSE: the response ends) so a graceful
// shutdown does not wait for them.
func (a *API) Close() { a.closeOnce.Do(func() { close(a.closing) }) }

// Routes lists every route the API serves.
func Routes() []Route {
	var out []Route
	for _, rt := range (&API{}).routes() {
		out = append(out, rt.Route)
	}
	return out
}

func (a *API) routes() []route {
	r := func(method, pattern string, h handlerFunc, query ...string) route {
		return route{Route: Route{Method: method, Pattern: pattern, Query: query}, h: h}
	}
	// A stream also takes what EventSource clients add: the polyfills'
	// lastEventId on reconnect (a 400 would end the stream for good) and a
	// cache buster. Any other parameter is refused, as on every route: a
	// mistyped cursor would replay the log from its start.
	stream := func(pattern string, h handlerFunc, query ...string) route {
		query = append(query, lastEventIDParam, "_")
		return route{Route: Route{Method: "GET", Pattern: pattern, Query: query}, stream: true, h: h}
	}
	return []route{
		// Probes and scrapers may add parameters of their own (cache
		// busters, a scrape config's params): the public routes ignore them.
		{Route: Route{Method: "GET", Pattern: "/healthz", AnyQuery: true}, public: true, h: a.healthz},
		{Route: Route{Method: "GET", Pattern: "/metrics", AnyQuery: true}, public: true, h: a.serveMetrics},
		r("POST", "/v1/dispatch", a.dispatch),
		r("POST", "/v1/post_send", a.postSend),
		r("GET", "/v1/messages/{msg_id}", a.getMessage),
		r("POST", "/v1/boxes/{owner}/{box}/next", a.next),
		r("GET", "/v1/boxes/{owner}/{box}/records", a.listRecords,
			"state", "tag", "order", "cursor_sort_key", "cursor_record_id", "limit", "with_object"),
		r("GET", "/v1/boxes/{owner}/{box}/sync", a.sync, "after_seq", "limit", "thread_key", "with_object"),
		stream("/v1/boxes/{owner}/{box}/stream", a.boxStream, "after_seq"),
		r("POST", "/v1/boxes/{owner}/{box}/redrive", a.redriveBox),
		r("GET", "/v1/records/{record_id}", a.getRecord, "with_object"),
		r("POST", "/v1/records/{record_id}/state", a.setState),
		r("POST", "/v1/records/{record_id}/delivery", a.reportDelivery),
		r("POST", "/v1/records/{record_id}/lease", a.extendLease),
		r("POST", "/v1/records/{record_id}/redrive", a.redrive),
		r("POST", "/v1/read_receipts", a.setReceipt),
		r("GET", "/v1/read_receipts", a.listReceipts, "msg_id", "group_id", "reader", "limit", "cursor_at_ms", "cursor_msg_id", "cursor_reader"),
		r("PUT", "/v1/groups/{group}/subscribers", a.setSubscribers),
		r("GET", "/v1/groups/{group}/subscribers", a.getSubscribers),
		r("DELETE", "/v1/groups/{group}", a.deleteGroup),
		r("GET", "/v1/contacts/{owner}/blocks", a.listBlocks, "limit"),
		r("PUT", "/v1/contacts/{owner}/blocks/{did}", a.block),
		r("DELETE", "/v1/contacts/{owner}/blocks/{did}", a.unblock),
		r("PUT", "/v1/routes/{did}", a.setRoutes),
		r("GET", "/v1/routes/{did}", a.getRoutes),
		r("GET", "/v1/owners/{owner}/conversations", a.conversations, "limit", "cursor_updated_at_ms", "cursor_thread_key"),
		r("POST", "/v1/owners/{owner}/conversations/read", a.readConversation),
		r("GET", "/v1/owners/{owner}/presence", a.presence),
		r("GET", "/v1/whoami", a.whoami),
		r("GET", "/v1/events", a.events, "after", "owner", "limit"),
		stream("/v1/events/stream", a.eventStream, "after", "owner"),
		r("POST", "/v1/consumers", a.createConsumer),
		r("GET", "/v1/consumers", a.listConsumers, "owner"),
		r("GET", "/v1/consumers/{owner}/{name}", a.getConsumer),
		r("DELETE", "/v1/consumers/{owner}/{name}", a.deleteConsumer),
		r("POST", "/v1/consumers/{owner}/{name}/ack", a.ackConsumer),
		r("GET", "/v1/scheduled", a.scheduled, "sender", "recipient", "limit"),
		r("POST", "/v1/scheduled/flush", a.flushScheduled),
		r("DELETE", "/v1/scheduled/{id}", a.cancelScheduled),
		r("GET", "/v1/mail/pending", a.pendingMail, "sender", "limit"),
		r("POST", "/v1/mail/flush", a.flushMail),
		r("POST", "/v1/tokens", a.createToken),
		r("GET", "/v1/tokens", a.listTokens, "did", "limit"),
		r("DELETE", "/v1/tokens/{token_id}", a.revokeToken),
		r("GET", "/v1/admin/retention", a.retentionPolicy),
		r("POST", "/v1/admin/retention/run", a.runRetention),
		{Route: Route{Method: "GET", Pattern: "/debug/pprof/{profile}", Query: []string{"seconds"}, AnyQuery: true}, h: a.debugPprof},
	}
}

// wrap authenticates (unless the route is public), times the request and
// turns a returned error into the JSON error body.
func (a *API) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer a.recoverPanic(sw, r, rt, start)
		var who model.Identity
		var err error
		if !rt.public {
			token := bearer(r)
			if rt.stream {
				var q string
				r, q = withoutAccessToken(r)
				if token == "" {
					token = q
				}
			}
			who, err = a.svc.Authenticate(r.Context(), token)
			r = r.WithContext(core.WithCaller(r.Context(), token, who))
		}
		if err == nil && !rt.AnyQuery {
			err = checkQuery(r, rt.Query)
		}
		if err == nil {
			err = rt.h(sw, r, who)
		}
		if err != nil {
			a.writeError(sw, r, err)
		}
		if a.metrics != nil {
			a.metrics.observeRequest(rt.Method+" "+rt.Pattern, sw.status, time.Since(start))
		}
	})
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// withoutAccessToken takes the access_token query parameter out of r, so
// that nothing after authentication (handlers, error logs) can see it.
func withoutAccessToken(r *http.Request) (*http.Request, string) {
	q := r.URL.Query()
	if !q.Has("access_token") {
		return r, ""
	}
	tok := strings.TrimSpace(q.Get("access_token"))
	q.Del("access_token")
	u := *r.URL
	u.RawQuery = q.Encode()
	r = r.WithContext(r.Context())
	r.URL = &u
	r.RequestURI = u.RequestURI()
	return r, tok
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool // anything sent: a panic can no longer be answered
}

func (s *statusWriter) WriteHeader(code int) {
	s.status, s.wrote = code, true
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// recoverPanic turns a handler's panic into a logged 500 with the JSON
// error body, as any internal error is answered, instead of net/http's
// dropped connection. An answer already under way (a stream) cannot be
// turned into an error, so its connection is dropped (http.ErrAbortHandler,
// which net/http does not log again).
func (a *API) recoverPanic(sw *statusWriter, r *http.Request, rt route, start time.Time) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	a.log.Error("request handler panicked", "method", r.Method, "path", r.URL.Path,
		"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	if sw.wrote {
		panic(http.ErrAbortHandler)
	}
	writeJSON(sw, http.StatusInternalServerError, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeInternal, Message: "internal error"}})
	if a.metrics != nil {
		a.metrics.observeRequest(rt.Method+" "+rt.Pattern, sw.status, time.Since(start))
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (a *API) healthz(w http.ResponseWriter, r *http.Request, _ model.Identity) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// untilClosing derives a context that also ends when the API is closing.
func (a *API) untilClosing(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-a.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
