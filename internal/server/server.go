// Package server assembles the processes that serve: `svc server` (the management API, the internal
// API of edge processes and the edge on one guarded listener, dispatched on the Host header, with the
// run recorder and the background sweeper) and `svc edge` (an edge alone, kept in step with a control
// plane by edgesync).
package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"database/sql"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/handlers/api"
	"github.com/svcdev/svc/handlers/edge"
	"github.com/svcdev/svc/handlers/internalapi"
	"github.com/svcdev/svc/handlers/oauth"
	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/inference"
	"github.com/svcdev/svc/internal/listen"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/ratelimit"
	"github.com/svcdev/svc/internal/recorder"
	"github.com/svcdev/svc/internal/tracing"
)

// Config configures a server. Zero values take the defaults (docs/ARCHITECTURE.md, "Processes").
type Config struct {
	Addr           string // listen address; default 127.0.0.1:8080
	DataDir        string // folder of the SQLite file and of session.key; default ./data
	BaseURL        string // default http://localhost:<port>
	EndpointDomain string // default localhost:<port>
	ModelsFile     string // optional models file (README, "Models file")
	// ArtifactsDir is the only folder file:// and plain-path artifacts may be in; default
	// <DataDir>/artifacts, created 0700 when missing.
	ArtifactsDir string
	// Database is --database: "" (svc.db in DataDir), the path of a SQLite file, or a postgres:// URL,
	// on which any number of replicas may run (docs/DEPLOY.md, "Replicas on PostgreSQL").
	Database string
	// SpoolDir is the folder of the recorder's spool, which keeps runs while the store does not take
	// them (docs/OPERATIONS.md, "The recorder's spool"); default <DataDir>/recorder-spool.
	SpoolDir string
	// SpoolMaxBytes is --spool-max-mb: the spool's size at most (default 1 GiB); beyond it runs are
	// dropped and counted.
	SpoolMaxBytes int64
	// TrustedProxies decides when X-Forwarded-For is believed, for limits and logs (nil: never).
	TrustedProxies *clientip.Resolver
	Logger         *slog.Logger
	SweepInterval  time.Duration // default 1 minute
	// EvalLease is how long an eval worker's claim on a work item holds unrenewed (core.DefaultEvalLease
	// when 0): a replica that dies leaves its items to the others after it.
	EvalLease time.Duration
	// MetricsAddr, when set, serves /metrics on a listener of its own instead of on the base URL host.
	MetricsAddr string
	// EdgeCORSOrigins are the origins browsers may call endpoints from ("*" for any); none: CORS off.
	EdgeCORSOrigins []string
	// BodyReadTimeout is how long a request body may take to arrive (default 60 s; negative: none).
	BodyReadTimeout time.Duration
	// MaxConnsPerAddr caps the connections open at once from one client address (default 256;
	// negative: no cap). Trusted proxies are exempt.
	MaxConnsPerAddr int
	// EdgeFeedHeartbeat is how often the change feed of svc edge processes says it is alive when idle
	// (default 5 s).
	EdgeFeedHeartbeat time.Duration
	// LogEvery is the interval of the count lines of repeated edge failures (default 10 s).
	LogEvery time.Duration
	// ShutdownGrace is how long Close waits for the requests in flight and then for the shadow
	// canaries' copies (default 10 s); what is still under way then is cut.
	ShutdownGrace time.Duration
	// Tracer exports spans of edge requests, their upstream calls and API calls; nil: tracing off.
	Tracer *tracing.Tracer
	// Redis, a redis:// URL, counts the rate limits and the mint and sign-in throttles there, shared
	// with every other process given the same (--redis); empty: in this process.
	Redis string
}

// Server is a running `svc server`.
type Server struct {
	BaseURL        string
	EndpointDomain string
	Addr           net.Addr
	Service        *core.Service
	MetricsAddr    net.Addr // the metrics listener's address, when it has its own
	// ArtifactsDir is the folder that local adapter artifacts must be in.
	ArtifactsDir string

	db          *sql.DB
	shared      *ratelimit.Redis // nil without --redis
	registry    *inference.Registry
	recorder    *recorder.Recorder
	http        *http.Server
	metricsHTTP *http.Server
	cancel      context.CancelFunc
	background  sync.WaitGroup // the sweeper and FollowReplicas
	done        chan struct{}
	log         *slog.Logger
	edge        *edge.Handler
	grace       time.Duration // Config.ShutdownGrace
}

// Start opens the database, loads the model catalog, listens and serves in the background.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Minute
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = listen.DefaultBodyReadTimeout
	}
	if cfg.MaxConnsPerAddr == 0 {
		cfg.MaxConnsPerAddr = listen.DefaultMaxConnsPerAddr
	}
	if cfg.ArtifactsDir == "" {
		cfg.ArtifactsDir = filepath.Join(cfg.DataDir, "artifacts")
	}
	registry, err := inference.LoadWith(cfg.ModelsFile, inference.Options{Logger: cfg.Logger, WrapTransport: cfg.Tracer.Transport})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s: the address is in use (is another svc running?); pass --addr with another port", cfg.Addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	// The defaults name the listener: its host (localhost for 127.0.0.1 and for no host) and its port.
	hostport := net.JoinHostPort(defaultHost(cfg.Addr), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://" + hostport
	}
	if cfg.EndpointDomain == "" {
		cfg.EndpointDomain = hostport
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	cfg.EndpointDomain = strings.ToLower(cfg.EndpointDomain)

	shared, err := ratelimit.Open(ctx, cfg.Redis, cfg.Logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	sqldb, err := db.OpenDatabase(ctx, cfg.Database, cfg.DataDir, cfg.Logger)
	if err != nil {
		shared.Close()
		ln.Close()
		return nil, err
	}
	if db.Shared(sqldb) {
		cfg.Logger.Info("store: PostgreSQL; replicas on the same database share the work", "database", db.Describe(cfg.Database))
	}
	if err := os.MkdirAll(cfg.ArtifactsDir, 0o700); err != nil {
		if !db.Shared(sqldb) {
			sqldb.Close()
			shared.Close()
			ln.Close()
			return nil, fmt.Errorf("create the artifacts folder: %w", err)
		}
		// On PostgreSQL --data holds nothing else, and replicas often run on a read-only file system:
		// local artifacts are then refused (a file on one replica is on none of the others anyway).
		cfg.Logger.Warn("no artifacts folder: file:// and plain-path adapter artifacts are refused", "err", err)
		cfg.ArtifactsDir = ""
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = filepath.Join(cfg.DataDir, "recorder-spool")
	}
	rec, err := recorder.Open(sqldb, recorder.Options{Logger: cfg.Logger, SpoolDir: cfg.SpoolDir, SpoolMaxBytes: cfg.SpoolMaxBytes})
	if err != nil {
		// A read-only --data (PostgreSQL replicas often run on one) still serves: runs the store does
		// not take are then dropped and counted, as without a spool.
		cfg.Logger.Warn("no recorder spool: runs the store does not take are lost", "dir", cfg.SpoolDir, "err", err)
		rec = recorder.New(sqldb, recorder.Options{Logger: cfg.Logger})
	}
	svc := core.New(core.Options{DB: sqldb, Catalog: registry, Logger: cfg.Logger, URLFor: EndpointURL(cfg.BaseURL, cfg.EndpointDomain),
		ArtifactsDir: cfg.ArtifactsDir, Runs: rec, SharedLimits: shared})
	svc.Prepare = registry.Prepare
	m := metrics.New()
	m.WatchRecorder(rec)
	m.WatchFleets(registry)
	m.WatchLeader(svc.Leading)
	var limiter ratelimit.Limiter // nil: the edge's own buckets
	budgets := ratelimit.NewBudgets(nil, 1)
	if shared != nil {
		shared.Register(m.Registry())
		limiter = shared.Limiter(ratelimit.NewLocal(), 1)
		budgets = ratelimit.NewBudgets(shared, 1)
	}
	// Counted in this process (no Redis, or while it is away), a budget's period starts from what the
	// store recorded, so that a restart does not give a key its day again.
	budgets.Seed = func(b ratelimit.BudgetScope, start, end time.Time) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return svc.BudgetUsed(ctx, b.Name, b.Deployment, b.ID, start, end)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// c.RealIP() follows --trusted-proxies, like the limits, instead of believing any X-Forwarded-For.
	e.IPExtractor = cfg.TrustedProxies.String
	e.Use(middleware.Recover())
	if cfg.Tracer != nil {
		e.Use(cfg.Tracer.Echo())
	}
	e.Use(apiObserver(m), accessLog(cfg.Logger))
	health(e, sqldb, rec, m, cfg.MetricsAddr == "")
	api.New(api.Options{Service: svc, Logger: cfg.Logger, ClientIP: cfg.TrustedProxies}).Register(e)
	// Sign-in: the OAuth authorization server that `svc login` talks to.
	// One process on SQLite keeps the key beside the database; replicas on PostgreSQL share one.
	var sessionKey []byte
	if db.Shared(sqldb) {
		sessionKey, err = oauth.SharedSessionKey(ctx, svc)
	} else {
		sessionKey, err = oauth.SessionKey(cfg.DataDir)
	}
	if err != nil {
		rec.Close()
		sqldb.Close()
		shared.Close()
		ln.Close()
		return nil, err
	}
	signIn := oauth.New(oauth.Options{Service: svc, BaseURL: cfg.BaseURL, SessionKey: sessionKey, Logger: cfg.Logger, ClientIP: cfg.TrustedProxies})
	signIn.Register(e)
	e.GET("/", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{
			"service": "svc", "api": cfg.BaseURL + "/v1", "endpointDomain": cfg.EndpointDomain,
			"docs": "https://github.com/svcdev/svc#readme",
		})
	})
	// One key signs thinking blocks here and, through the change feed's hello, on every svc edge.
	thinking := thinkingSecret(sessionKey)
	svc.ThinkingSecret = thinking
	edgeHandler := edge.New(edge.Options{Service: svc, Runtimes: registry, Recorder: rec, Logger: cfg.Logger, Metrics: m,
		CORSOrigins: cfg.EdgeCORSOrigins, ClientIP: cfg.TrustedProxies, ThinkingSecret: thinking, LogEvery: cfg.LogEvery,
		Tracer: cfg.Tracer, Limiter: limiter, Budgets: budgets})
	internal := internalapi.New(internalapi.Options{Service: svc, Logger: cfg.Logger, Metrics: m, Heartbeat: cfg.EdgeFeedHeartbeat,
		ThinkingSecret: thinking})

	runCtx, cancel := context.WithCancel(context.Background())
	s := &Server{
		BaseURL: cfg.BaseURL, EndpointDomain: cfg.EndpointDomain, Addr: ln.Addr(), Service: svc, ArtifactsDir: cfg.ArtifactsDir,
		db: sqldb, shared: shared, registry: registry, recorder: rec, cancel: cancel, done: make(chan struct{}), log: cfg.Logger, edge: edgeHandler,
		grace: cfg.ShutdownGrace,
	}
	s.http = listen.NewHTTPServer(&listen.Dispatcher{Domain: cfg.EndpointDomain, Edge: edgeHandler, Internal: internal, API: e}, cfg.BodyReadTimeout, cfg.Logger)
	// Change feeds never end by themselves: they end when shutdown begins, so that it need not wait.
	s.http.RegisterOnShutdown(internal.Close)
	if cfg.MetricsAddr != "" {
		var err error
		if s.metricsHTTP, s.MetricsAddr, err = listen.ServeMetrics(cfg.MetricsAddr, m); err != nil {
			cancel()
			rec.Close()
			sqldb.Close()
			shared.Close()
			ln.Close()
			return nil, err
		}
	}
	// Background work ends before the database closes (Close), so that a replica that stops hands the
	// lead over at once.
	s.background.Add(3)
	go func() {
		defer s.background.Done()
		svc.RunSweeper(runCtx, cfg.SweepInterval)
	}()
	go func() {
		defer s.background.Done()
		w := &core.EvalWorker{S: svc, Replayer: edgeHandler, ID: evalWorkerID(), Lease: cfg.EvalLease}
		w.Run(runCtx)
	}()
	go func() {
		defer s.background.Done()
		svc.FollowReplicas(runCtx)
	}()
	guarded := listen.NewGuardedListener(ln, cfg.MaxConnsPerAddr, cfg.TrustedProxies)
	go func() {
		defer close(s.done)
		if err := s.http.Serve(guarded); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("server stopped", "err", err)
		}
	}()
	return s, nil
}

// DefaultShutdownGrace is how long a stopping process waits for its requests in flight and its shadow
// copies, together.
const DefaultShutdownGrace = 10 * time.Second

// Close stops accepting requests, waits within the shutdown grace for those in flight and then for the
// shadow canaries' copies (recorded as they finish), flushes the run recorder and closes the database.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	err := s.http.Shutdown(ctx)
	<-s.done
	s.edge.DrainShadows(ctx)
	s.edge.FlushLog()
	if s.metricsHTTP != nil {
		s.metricsHTTP.Close()
	}
	s.cancel()
	s.background.Wait()
	s.registry.Close() // stops the adapter pools' background work
	if rerr := s.recorder.Close(); err == nil {
		err = rerr
	}
	if derr := s.db.Close(); err == nil {
		err = derr
	}
	s.shared.Close()
	return err
}

// defaultHost is the host of the default base URL and endpoint domain for a listen address: the host
// --addr names (docs/ARCHITECTURE.md, "Processes"), except localhost for 127.0.0.1 and for an address
// without a host or with an unspecified one (0.0.0.0, ::), which listen on localhost too.
func defaultHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "127.0.0.1" {
		return "localhost"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "localhost"
	}
	return host
}

// EndpointURL returns the function that names a deployment's public URL. Under a localhost domain, an
// address, or the base URL's own host (all of them the defaults of a server on a laptop or a LAN) the
// scheme follows the base URL; under a real domain endpoints are https. An address (127.0.0.13:8080)
// has no subdomains, so there an endpoint is the path form on it: http://127.0.0.13:8080/e/<slug>.
func EndpointURL(baseURL, domain string) func(slug string) string {
	scheme := "https"
	sameHost := strings.TrimPrefix(strings.TrimPrefix(baseURL, "http://"), "https://") == domain
	if (isLocalDomain(domain) || isAddress(domain) || sameHost) && strings.HasPrefix(baseURL, "http://") {
		scheme = "http"
	}
	if isAddress(domain) {
		return func(slug string) string { return scheme + "://" + domain + "/e/" + slug }
	}
	return func(slug string) string { return scheme + "://" + slug + "." + domain }
}

// isAddress reports whether a domain (with or without its port) is an IP address.
func isAddress(domain string) bool {
	host := domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		host = h
	}
	return net.ParseIP(strings.Trim(host, "[]")) != nil
}

func isLocalDomain(domain string) bool {
	host := domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		host = h
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// Flush writes the buffered runs and key lastUsedAt times now instead of at the next batch.
func (s *Server) Flush() { s.recorder.Flush() }

// accessLog logs one line per management API request: the route pattern rather than the raw path, and
// never the query or headers, so that tokens and codes stay out of logs. The edge keeps its hot path
// free of per-request logging; it logs its failures.
func accessLog(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // write the error now, so that the status below is the one sent
			}
			route := c.Path()
			if route == "" {
				route = "(no route)"
			}
			attrs := []any{"method", c.Request().Method, "route", route, "status", c.Response().Status, "ms", time.Since(start).Milliseconds()}
			if id := tracing.TraceIDFrom(c.Request().Context()); id != "" {
				attrs = append(attrs, "trace_id", id)
			}
			log.Info("api", attrs...)
			return nil
		}
	}
}

// thinkingSecret derives the key of translated answers' thinking signatures from the data folder's
// session key: stable across restarts, so that a conversation goes on after one, and never the
// session key itself.
func thinkingSecret(sessionKey []byte) []byte {
	m := hmac.New(sha256.New, sessionKey)
	m.Write([]byte("svc thinking signatures"))
	return m.Sum(nil)
}

// evalWorkerID names this process's eval worker in its claims: host, process id and a random tail.
func evalWorkerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), b)
}
