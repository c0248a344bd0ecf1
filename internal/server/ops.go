package server

import (
	"context"
	"database/sql"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/reqid"
)

// Operating routes on the base URL host (never on slug hosts, which belong to users' endpoints):
// liveness, readiness and metrics (docs/OPERATIONS.md).

// health registers /healthz and /readyz, and /metrics unless metrics have a listener of their own.
// spooled is how many runs wait in the recorder's spool: /readyz says "behind" while any do, and
// stays 200, so that a slow database never takes the endpoints out of rotation.
func health(e *echo.Echo, sqldb *sql.DB, spooled func() int64, m *metrics.Metrics, metricsHere bool) {
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := sqldb.PingContext(ctx); err != nil {
			return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
				"checks": map[string]string{"database": "not answering"}})
		}
		if _, err := sqldb.ExecContext(ctx, "SELECT 1"); err != nil {
			return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
				"checks": map[string]string{"database": "not answering"}})
		}
		checks := map[string]string{"database": "ok", "recorder": "ok"}
		body := map[string]any{"status": "ok", "checks": checks}
		if n := spooled(); n > 0 {
			checks["recorder"] = "behind"
			body["spooledRuns"] = n
		}
		return c.JSON(http.StatusOK, body)
	})
	if metricsHere {
		e.GET("/metrics", echo.WrapHandler(m.Handler()))
	}
}

// apiObserver counts management API requests by route pattern and status, and gives each an
// X-Request-Id (the caller's when sane), like the edge.
func apiObserver(m *metrics.Metrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Header().Set(reqid.Header, reqid.From(c.Request().Header.Get(reqid.Header)))
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			route := c.Path()
			if route == "" {
				route = "other"
			}
			m.APIRequest(route, c.Response().Status)
			return nil
		}
	}
}
