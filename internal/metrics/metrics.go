// Package metrics defines svc's Prometheus metrics (docs/OPERATIONS.md lists them) on a registry of its
// own, with the Go runtime and process collectors, and serves them in the Prometheus text format.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Label sets stay bounded: deployments are named by slug (and only once the slug is known to be a
// deployment, so that requests for random host names cannot grow them), never by key or request id.

// Metrics holds every metric svc exports.
type Metrics struct {
	reg *prometheus.Registry

	edgeRequests   *prometheus.CounterVec
	edgeDuration   *prometheus.HistogramVec
	edgeTTFT       *prometheus.HistogramVec
	edgeTokens     *prometheus.CounterVec
	upstreamErrors *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec
	apiRequests    *prometheus.CounterVec

	mu     sync.RWMutex
	series map[seriesKey]*edgeSeries // per deployment and route: the hot path's counters, resolved once

	admissionOnce    sync.Once // WatchAdmission
	admissionWait    *prometheus.HistogramVec
	admissionRefused *prometheus.CounterVec
}

type seriesKey struct{ deployment, route string }

type edgeSeries struct {
	mu       sync.Mutex
	codes    map[int]prometheus.Counter
	duration prometheus.Observer
	ttft     prometheus.Observer
	prompt   prometheus.Counter
	compl    prometheus.Counter
}

// New returns the metrics, registered with the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), series: map[seriesKey]*edgeSeries{}}
	m.edgeRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_edge_requests_total",
		Help: "Edge requests answered, by deployment slug, route and HTTP status."}, []string{"deployment", "route", "code"})
	m.edgeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "svc_edge_request_duration_seconds",
		Help:    "Time from an edge request's arrival to the end of its answer.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"deployment", "route"})
	m.edgeTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "svc_edge_time_to_first_token_seconds",
		Help:    "Time from a streamed request's arrival to its first event.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"deployment"})
	m.edgeTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_edge_tokens_total",
		Help: "Tokens served by the edge, by deployment and kind (prompt or completion)."}, []string{"deployment", "kind"})
	m.upstreamErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_upstream_errors_total",
		Help: "Failed calls to inference upstreams, by catalog model and kind (unavailable, timeout, status code class, cut)."}, []string{"model", "kind"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_edge_rate_limited_total",
		Help: "Edge requests refused by a rate limit, by deployment and scope (deployment or key)."}, []string{"deployment", "scope"})
	m.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_api_requests_total",
		Help: "Management API requests, by route pattern and HTTP status."}, []string{"route", "code"})
	m.reg.MustRegister(m.edgeRequests, m.edgeDuration, m.edgeTTFT, m.edgeTokens, m.upstreamErrors, m.rateLimited, m.apiRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where other packages register their own collectors (the recorder's queue depth).
func (m *Metrics) Registry() prometheus.Registerer { return m.reg }

// Handler serves the metrics in the Prometheus text format. It leaves compression to the server it is
// mounted in (the management API compresses what the client accepts), so nothing is compressed twice.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, DisableCompression: true})
}

// Edge is one finished edge request as the metrics see it.
type Edge struct {
	Deployment string // slug; "" when the request never reached a deployment
	Route      string // the route pattern, e.g. "/v1/chat/completions"; "other" for unknown paths
	Status     int
	Duration   time.Duration
	TTFT       time.Duration // 0 unless streamed
	Prompt     int
	Completion int
}

// ObserveEdge counts one edge request. Its series are resolved once per deployment and route, so the
// hot path does no label hashing.
func (m *Metrics) ObserveEdge(e Edge) {
	if m == nil {
		return
	}
	s := m.edgeSeries(e.Deployment, e.Route)
	s.counter(m, e.Deployment, e.Route, e.Status).Inc()
	s.duration.Observe(e.Duration.Seconds())
	if e.TTFT > 0 {
		s.ttft.Observe(e.TTFT.Seconds())
	}
	if e.Prompt > 0 {
		s.prompt.Add(float64(e.Prompt))
	}
	if e.Completion > 0 {
		s.compl.Add(float64(e.Completion))
	}
}

func (m *Metrics) edgeSeries(deployment, route string) *edgeSeries {
	k := seriesKey{deployment, route}
	m.mu.RLock()
	s := m.series[k]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.series[k]; s == nil {
		s = &edgeSeries{codes: map[int]prometheus.Counter{},
			duration: m.edgeDuration.WithLabelValues(deployment, route),
			ttft:     m.edgeTTFT.WithLabelValues(deployment),
			prompt:   m.edgeTokens.WithLabelValues(deployment, "prompt"),
			compl:    m.edgeTokens.WithLabelValues(deployment, "completion")}
		m.series[k] = s
	}
	return s
}

func (s *edgeSeries) counter(m *Metrics, deployment, route string, status int) prometheus.Counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.codes[status]
	if c == nil {
		c = m.edgeRequests.WithLabelValues(deployment, route, strconv.Itoa(status))
		s.codes[status] = c
	}
	return c
}

// UpstreamError counts a failed upstream call.
func (m *Metrics) UpstreamError(model, kind string) {
	if m != nil {
		m.upstreamErrors.WithLabelValues(model, kind).Inc()
	}
}

// RateLimited counts a request refused by a limit of scope "deployment" or "key".
func (m *Metrics) RateLimited(deployment, scope string) {
	if m != nil {
		m.rateLimited.WithLabelValues(deployment, scope).Inc()
	}
}

// APIRequest counts a management API request.
func (m *Metrics) APIRequest(route string, status int) {
	if m != nil {
		m.apiRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	}
}

// RecorderStats is what the run recorder reports.
type RecorderStats interface {
	QueueDepth() int
	Dropped() int64
}

// WatchLeader exports whether this svc server runs the background work (1) or another replica on the
// same PostgreSQL database does (0).
func (m *Metrics) WatchLeader(leading func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_leader",
		Help: "1 while this replica runs the background work (the sweeper), else 0."}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	}))
}

// WatchRecorder exports the recorder's queue depth, dropped runs and, for the store's recorder, the
// runs the store refused and those waiting in its spool.
func (m *Metrics) WatchRecorder(r RecorderStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_recorder_queue_depth",
			Help: "Runs waiting to be written."}, func() float64 { return float64(r.QueueDepth()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_recorder_runs_dropped_total",
			Help: "Runs dropped: the recorder's buffer was full, or the store did not take their batch and there is no spool."}, func() float64 { return float64(r.Dropped()) }),
	)
	if f, ok := r.(interface{ Failed() int64 }); ok { // the store's recorder, not an edge's shipper
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_recorder_runs_failed_total",
			Help: "Runs the store refused or could not write, set aside and logged with their ids."},
			func() float64 { return float64(f.Failed()) }))
	}
	if s, ok := r.(interface{ SpoolWriteErrors() int64 }); ok {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "svc_spool_write_errors_total",
			Help: "Appends to the spool that failed (a full disk, say); their runs were dropped or wait in memory."},
			func() float64 { return float64(s.SpoolWriteErrors()) }))
	}
	if s, ok := r.(interface{ Spooled() int64 }); ok {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_recorder_spooled_runs",
			Help: "Runs waiting in the recorder's spool for the database: above 0, the store is behind."},
			func() float64 { return float64(s.Spooled()) }))
	}
}
