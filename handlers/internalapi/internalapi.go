// Package internalapi serves the control plane's internal API for svc edge processes (docs/API.md,
// "Internal API for edge processes"): deployment snapshots, the change feed, shipped runs, and the
// stored runs that edges read back for the Responses API. It
// answers edge tokens only, and edge tokens reach nothing else.
package internalapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/metrics"
)

// DefaultHeartbeat is how often an idle change feed says it is alive; an edge that hears nothing for
// three heartbeats reconnects.
const DefaultHeartbeat = 5 * time.Second

// Options are the internal API's dependencies.
type Options struct {
	Service *core.Service
	Logger  *slog.Logger
	Metrics *metrics.Metrics // nil counts nothing
	// Heartbeat is the change feed's heartbeat interval (DefaultHeartbeat when zero).
	Heartbeat time.Duration
	// ThinkingSecret is the key of the thinking signatures of translated answers, the one the control
	// plane's own edge uses; the change feed's hello gives it to every edge. Never logged.
	ThinkingSecret []byte
}

// Handler serves every route under /internal/.
type Handler struct {
	svc       *core.Service
	log       *slog.Logger
	metrics   *metrics.Metrics
	heartbeat time.Duration
	secret    []byte // Options.ThinkingSecret

	// stop ends the change feeds held open, so that a server shutting down is not kept waiting by
	// streams that never end by themselves.
	stop     chan struct{}
	stopOnce sync.Once
}

// New returns the internal API handler.
func New(o Options) *Handler {
	h := &Handler{svc: o.Service, log: o.Logger, metrics: o.Metrics, heartbeat: o.Heartbeat, secret: o.ThinkingSecret, stop: make(chan struct{})}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.heartbeat <= 0 {
		h.heartbeat = DefaultHeartbeat
	}
	return h
}

// Close ends the change feeds in progress. Call it when the server starts shutting down.
func (h *Handler) Close() { h.stopOnce.Do(func() { close(h.stop) }) }

// ServeHTTP authenticates the edge token, then routes: the one route table of this surface.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	route := "/internal/other"
	defer func() { h.metrics.APIRequest(route, sw.status()) }()

	tok, err := h.svc.AuthenticateEdge(r.Context(), bearer(r))
	if err != nil {
		h.fail(sw, r, err)
		return
	}
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, edgewire.DeploymentsPath) && !strings.Contains(path[len(edgewire.DeploymentsPath):], "/") && len(path) > len(edgewire.DeploymentsPath):
		route = edgewire.DeploymentsPath + "{slug}"
		if h.method(sw, r, http.MethodGet) {
			h.snapshot(sw, r, path[len(edgewire.DeploymentsPath):])
		}
	case path == edgewire.ChangesPath:
		route = edgewire.ChangesPath
		if h.method(sw, r, http.MethodGet) {
			h.changes(sw, r, tok)
		}
	case path == edgewire.RunsPath:
		route = edgewire.RunsPath
		if h.method(sw, r, http.MethodPost) {
			h.runs(sw, r, tok)
		}
	case storedRunPath(path):
		route = edgewire.StoredRunsPath + "{deploymentId}/{runId}"
		if h.method(sw, r, http.MethodGet) {
			deploymentID, runID, _ := strings.Cut(path[len(edgewire.StoredRunsPath):], "/")
			h.storedRun(sw, r, deploymentID, runID)
		}
	case path == edgewire.FeedbackPath:
		route = edgewire.FeedbackPath
		if h.method(sw, r, http.MethodPost) {
			h.feedback(sw, r)
		}
	default:
		apierr.WriteAPI(sw, edgemodel.CodeNotFound, "no such route: "+r.Method+" "+path)
	}
}

// method answers 405 unless r uses the route's method.
func (h *Handler) method(w http.ResponseWriter, r *http.Request, want string) bool {
	if r.Method == want {
		return true
	}
	w.Header().Set("Allow", want)
	apierr.WriteAPI(w, apierr.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path+"; use "+want)
	return false
}

// fail writes an error in the API's envelope: a core rule with its status, anything else logged and
// answered as a bare internal error.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ce *edgemodel.Error
	if errors.As(err, &ce) {
		apierr.APIError(ce).Write(w)
		return
	}
	if !errors.Is(err, context.Canceled) {
		h.log.Error("internal API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	apierr.WriteAPI(w, apierr.CodeInternal, "internal error; the control plane's log has the details")
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// statusWriter remembers the status sent, for the metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of the change feed).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
