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
// /readyz stays 200 while the process can serve its endpoints and keep their runs: when runs wait in
// the recorder's spool it says the recorder is "behind", and while the database does not answer at all
// it says so ("degraded") as long as the recorder spools (a slow or absent database never takes every
// replica out of rotation at once, as an svc edge stays ready within --max-stale). Without a spool
// runs would be lost, so then it is 503. A recorder that dropped runs or failed to write its spool in
// the last minute makes it "degraded" too, naming why under checks.recorder.
func health(e *echo.Echo, sqldb *sql.DB, rec recorderState, m *metrics.Metrics, metricsHere bool) {
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		checks := map[string]string{"database": "ok", "recorder": "ok"}
		body := map[string]any{"status": "ok", "checks": checks}
		if n := rec.Spooled(); n > 0 {
			checks["recorder"] = "behind"
			body["spooledRuns"] = n
		}
		if why := rec.Degraded(); why != "" {
			checks["recorder"] = why
			body["status"] = "degraded"
		}
		if err := ping(ctx, sqldb); err != nil {
			checks["database"] = "not answering"
			if !rec.Spools() {
				body["status"] = "unavailable"
				return c.JSON(http.StatusServiceUnavailable, body)
			}
			body["status"] = "degraded"
		}
		return c.JSON(http.StatusOK, body)
	})
	if metricsHere {
		e.GET("/metrics", echo.WrapHandler(m.Handler()))
	}
}

// recorderState is what /readyz reads of the recorder.
type recorderState interface {
	Spooled() int64
	Spools() bool
	Degraded() string // why runs are being lost ("" when they are not)
}

// ping checks that the database answers a query.
func ping(ctx context.Context, sqldb *sql.DB) error {
	if err := sqldb.PingContext(ctx); err != nil {
		return err
	}
	_, err := sqldb.ExecContext(ctx, "SELECT 1")
	return err
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
