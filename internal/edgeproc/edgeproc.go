// Package edgeproc runs an `svc edge` process: the edge handler, the link to the control plane, the
// run shipper and the listener, wired without the database (docs/DEPLOY.md, "svc edge").
package edgeproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svcdev/svc/handlers/edge"
	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/edgesync"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/listen"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/ratelimit"
	"github.com/svcdev/svc/internal/reqid"
	"github.com/svcdev/svc/internal/tracing"
)

// Config configures `svc edge` (docs/DEPLOY.md, "svc edge"). Zero values take the defaults.
type Config struct {
	Addr           string // listen address; default 127.0.0.1:8081
	ControlPlane   string // base URL of the control plane (svc server); required
	EdgeToken      string // an edge token (svc edge-tokens create); required, and never logged
	EndpointDomain string // default localhost:<port>
	ModelsFile     string // the models file, the same as the control plane's
	// MaxStale is how long cached snapshots keep serving while the control plane is unreachable
	// (default 10 minutes); then 503.
	MaxStale time.Duration
	// RunBuffer is how many runs may wait to be shipped (default 100 000); beyond it they are dropped
	// and counted.
	RunBuffer int
	// EdgeCount is how many edges share the traffic: each enforces limit / EdgeCount of the rate
	// limits (default 1).
	EdgeCount int
	// SpoolDir keeps what the edge must survive a restart (--spool-dir): the run batches the control
	// plane has not acknowledged and the last confirmed snapshots. Empty: memory only.
	SpoolDir string
	// SpoolBytes caps the run spool (default 1 GiB).
	SpoolBytes int64
	// SpoolOptional: SpoolDir is only the default folder, not one the operator chose. When it cannot be
	// used (a read-only file system, another edge on the same host holding it), the edge runs without
	// a spool and says so in the log, rather than refusing to start.
	SpoolOptional bool
	// Redis, a redis:// URL, counts the rate limits there, one count shared by every edge (--redis);
	// while it cannot be reached, each edge enforces limit / EdgeCount on its own.
	Redis           string
	TrustedProxies  *clientip.Resolver
	EdgeCORSOrigins []string
	MetricsAddr     string // serve /metrics on a listener of its own instead of on the edge's
	Logger          *slog.Logger
	BodyReadTimeout time.Duration   // as svc server's
	MaxConnsPerAddr int             // as svc server's
	LogEvery        time.Duration   // as svc server's
	ShutdownGrace   time.Duration   // as svc server's (default 10 s)
	Tracer          *tracing.Tracer // as svc server's
	// Sync and Shipper tune the link to the control plane (tests shorten its intervals).
	Sync    edgesync.Options
	Shipper edgesync.ShipperOptions
}

// Edge is a running `svc edge`.
type Edge struct {
	Addr           net.Addr
	MetricsAddr    net.Addr
	EndpointDomain string
	EdgeCount      int
	// Cache holds the snapshots; its Status is what /readyz reports.
	Cache *edgesync.Cache

	client      *edgesync.Client
	shipper     *edgesync.Shipper
	registry    *inference.Registry
	shared      *ratelimit.Redis
	http        *http.Server
	metricsHTTP *http.Server
	cancel      context.CancelFunc
	done        chan struct{}
	log         *slog.Logger
	edge        *edge.Handler
	closeOnce   sync.Once
	closeErr    error
	grace       time.Duration // Config.ShutdownGrace
}

// Start starts an edge process: it listens, follows the control plane's change feed in the
// background and serves at once (a slug is fetched on its first request; until the control plane
// answers, requests are 503 and /readyz says why).
func Start(ctx context.Context, cfg Config) (*Edge, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8081"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = listen.DefaultBodyReadTimeout
	}
	if cfg.MaxConnsPerAddr == 0 {
		cfg.MaxConnsPerAddr = listen.DefaultMaxConnsPerAddr
	}
	if cfg.EdgeCount <= 0 {
		cfg.EdgeCount = 1
	}
	if cfg.ControlPlane == "" {
		return nil, errors.New("an edge needs its control plane: --control-plane https://cp.internal:8080")
	}
	if cfg.EdgeToken == "" {
		return nil, errors.New("an edge needs an edge token (svc edge-tokens create NAME on the control-plane host), passed in the environment variable named by --edge-token-env")
	}
	client, err := edgesync.NewClient(cfg.ControlPlane, cfg.EdgeToken)
	if err != nil {
		return nil, err
	}
	registry, err := inference.LoadWith(cfg.ModelsFile, inference.Options{Logger: cfg.Logger, WrapTransport: cfg.Tracer.Transport})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		registry.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the address is in use; pass --addr with another port", cfg.Addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if cfg.EndpointDomain == "" {
		cfg.EndpointDomain = fmt.Sprintf("localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	}
	cfg.EndpointDomain = strings.ToLower(cfg.EndpointDomain)

	shared, err := ratelimit.Open(ctx, cfg.Redis, cfg.Logger)
	if err != nil {
		registry.Close()
		ln.Close()
		return nil, err
	}
	// The shipper first: it takes the spool folder's lock, so that no two edges share one.
	cfg.Shipper.Buffer = cfg.RunBuffer
	cfg.Shipper.Logger = cfg.Logger
	cfg.Shipper.SpoolDir, cfg.Shipper.SpoolBytes = cfg.SpoolDir, cfg.SpoolBytes
	shipper, err := edgesync.NewShipper(client, cfg.Shipper)
	if err != nil && cfg.SpoolOptional {
		cfg.Logger.Warn("edge: the default spool folder cannot be used; runs not yet shipped are kept in memory only (give each edge its own --spool-dir)",
			"err", err)
		cfg.SpoolDir, cfg.Shipper.SpoolDir = "", ""
		shipper, err = edgesync.NewShipper(client, cfg.Shipper)
	}
	if err != nil {
		shared.Close()
		registry.Close()
		ln.Close()
		return nil, err
	}
	cfg.Sync.MaxStale = cfg.MaxStale
	cfg.Sync.Logger = cfg.Logger
	cfg.Sync.StateDir = cfg.SpoolDir
	cache := edgesync.NewCache(client, cfg.Sync)
	m := metrics.New()
	m.WatchRecorder(shipper)
	m.WatchFleets(registry)
	cache.Register(m.Registry())
	shipper.Register(m.Registry())

	var limiter ratelimit.Limiter  // nil: this edge's own buckets, at its share of each limit
	var budgets *ratelimit.Budgets // nil: this edge's own counts, at its share of each budget
	handlerShare := cfg.EdgeCount
	if shared != nil {
		// One count per budget in Redis; this edge's share of it while Redis cannot be reached.
		budgets = ratelimit.NewBudgets(shared, cfg.EdgeCount)
		shared.Register(m.Registry())
		// The handler passes whole limits; the shared limiter falls back to the share itself.
		limiter, handlerShare = shared.Limiter(ratelimit.NewLocal(), cfg.EdgeCount), 1
	}
	// The cache is also the edge's RunReader (stored responses, read from the control plane) and gives
	// it the control plane's key of thinking signatures, so that the edge answers as svc server does.
	edgeHandler := edge.New(edge.Options{Service: cache, Runtimes: registry, Recorder: shipper, Logger: cfg.Logger, Metrics: m,
		CORSOrigins: cfg.EdgeCORSOrigins, ClientIP: cfg.TrustedProxies, EdgeCount: handlerShare, Edges: cfg.EdgeCount, LogEvery: cfg.LogEvery,
		Tracer: cfg.Tracer, Limiter: limiter, Budgets: budgets, ThinkingSecretFrom: cache.ThinkingSecret})
	runCtx, cancel := context.WithCancel(context.Background())
	e := &Edge{
		EndpointDomain: cfg.EndpointDomain, Addr: ln.Addr(), EdgeCount: cfg.EdgeCount, Cache: cache,
		client: client, shipper: shipper, registry: registry, shared: shared, cancel: cancel, done: make(chan struct{}), log: cfg.Logger,
		edge: edgeHandler, grace: cfg.ShutdownGrace,
	}
	if e.grace <= 0 {
		e.grace = 10 * time.Second
	}
	ops := edgeOps(cache, shipper, m, cfg.MetricsAddr == "")
	e.http = listen.NewHTTPServer(&listen.Dispatcher{Domain: cfg.EndpointDomain, Edge: edgeHandler, API: ops}, cfg.BodyReadTimeout, cfg.Logger)
	if cfg.MetricsAddr != "" {
		var err error
		if e.metricsHTTP, e.MetricsAddr, err = listen.ServeMetrics(cfg.MetricsAddr, m); err != nil {
			cancel()
			shared.Close()
			shipper.Close(context.Background())
			registry.Close()
			ln.Close()
			return nil, err
		}
	}
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		cache.Run(runCtx)
	}()
	guarded := listen.NewGuardedListener(ln, cfg.MaxConnsPerAddr, cfg.TrustedProxies)
	go func() {
		defer close(e.done)
		if err := e.http.Serve(guarded); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("edge stopped", "err", err)
		}
		<-feedDone
	}()
	cfg.Logger.Info("edge started", "addr", ln.Addr().String(), "control_plane", cfg.ControlPlane, "endpoint_domain", cfg.EndpointDomain,
		"max_stale", cache.MaxStale().String(), "edge_count", cfg.EdgeCount, "spool_dir", cfg.SpoolDir,
		"shared_limits", shared != nil)
	return e, nil
}

// Close stops accepting requests, waits briefly for those in flight, stops following the change feed
// and ships the runs still buffered (for up to 10 seconds; what cannot reach the control plane by then
// is lost, and logged).
func (e *Edge) Close() error {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.grace)
		defer cancel()
		e.closeErr = e.http.Shutdown(ctx)
		e.cancel()
		<-e.done
		// The shadow copies finish within what is left of the grace; their runs are shipped below.
		e.edge.DrainShadows(ctx)
		e.edge.FlushLog()
		if e.metricsHTTP != nil {
			e.metricsHTTP.Close()
		}
		e.registry.Close()
		shipCtx, cancelShip := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelShip()
		e.shipper.Close(shipCtx)
		e.client.Close()
		e.shared.Close()
	})
	return e.closeErr
}

// edgeOps serves the edge's operating routes on any host that is not an endpoint's: liveness,
// readiness (synced with the control plane or not) and metrics. Everything else is 404. Readiness is
// "degraded" (still 200: the edge serves) while the shipper loses runs or cannot write its spool, named
// under checks.recorder as svc server's /readyz does.
func edgeOps(cache *edgesync.Cache, shipper recorderState, m *metrics.Metrics, metricsHere bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeOps(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		st := cache.Status()
		status, code := "ok", http.StatusOK
		if !st.Ready {
			status, code = "unavailable", http.StatusServiceUnavailable
		}
		link := "connected"
		switch {
		case st.TokenRefused:
			link = "refusing the edge token"
		case !st.Synced:
			link = "not synced yet"
		case !st.Connected:
			link = "change feed disconnected"
		}
		checks := map[string]string{"controlPlane": link, "recorder": "ok"}
		if why := shipper.Degraded(); why != "" {
			checks["recorder"] = why
			if code == http.StatusOK {
				status = "degraded"
			}
		}
		body := map[string]any{"status": status, "checks": checks, "synced": st.Synced, "snapshots": st.Snapshots}
		if !st.LastContact.IsZero() {
			body["lastContact"] = st.LastContact.UTC().Format(time.RFC3339Nano)
		}
		writeOps(w, code, body)
	})
	if metricsHere {
		mux.Handle("GET /metrics", m.Handler())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(reqid.Header, reqid.From(r.Header.Get(reqid.Header)))
		if _, pattern := mux.Handler(r); pattern == "" {
			apierr.WriteAPI(w, edgemodel.CodeNotFound, "this is an svc edge: endpoints are served on <slug>.<endpoint domain> (or /e/<slug>/v1); it also answers /healthz, /readyz and /metrics")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// recorderState is what /readyz asks the run shipper.
type recorderState interface {
	Degraded() string // why runs are at risk ("" when they are not)
}

func writeOps(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
