// Package listen is the HTTP listener svc server and svc edge both serve on: the host dispatcher, the
// guard against slow and greedy clients, the server's timeouts, and metrics on a listener of their own.
package listen

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/svcdev/svc/internal/bodydeadline"
	"github.com/svcdev/svc/internal/metrics"
)

// Defaults of the listener's limits.
const (
	DefaultBodyReadTimeout = 60 * time.Second
	DefaultMaxConnsPerAddr = 256
	// maxHeaderBytes bounds request headers; Go answers 431 beyond it (plus 4 KiB of slack).
	maxHeaderBytes = 64 << 10
)

// NewHTTPServer is the listener setup shared by `svc server` and `svc edge`: an empty Host refused,
// bodies given bodyTimeout to arrive, headers 10 s and 64 KiB, idle connections closed after 2 min.
func NewHTTPServer(d http.Handler, bodyTimeout time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           requireHost(bodydeadline.Wrap(bodyTimeout, d)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// ServeMetrics serves /metrics on a listener of its own (--metrics-addr).
func ServeMetrics(addr string, m *metrics.Metrics) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s for metrics: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, ln.Addr(), nil
}
