// Package api serves the management API (docs/API.md) over core.Service: it reads requests strictly,
// maps the SDK's wire types to core's and back, and writes every error in the API's one envelope.
package api

import (
	"log/slog"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/svcdev/svc/internal/clientip"
	"github.com/svcdev/svc/internal/core"
)

// Options are the management API's dependencies.
type Options struct {
	Service *core.Service
	Logger  *slog.Logger
	// ClientIP decides the client address that limits count against (nil trusts no proxy).
	ClientIP *clientip.Resolver
}

// Handler holds what the management API's handlers need.
type Handler struct {
	svc *core.Service
	log *slog.Logger
	ip  *clientip.Resolver
}

// New returns the management API handler set.
func New(o Options) *Handler {
	h := &Handler{svc: o.Service, log: o.Logger, ip: o.ClientIP}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

// gzipMinLength is the smallest answer worth compressing; shorter ones would grow.
const gzipMinLength = 1024

// isExport tells the export routes (a deployment's runs, an eval's pairs: streamed, with trailers)
// from the others.
func isExport(c echo.Context) bool { return strings.HasSuffix(c.Request().URL.Path, "/export") }

// Register mounts every route of the management API on e: the one route table of this surface.
func (h *Handler) Register(e *echo.Echo) {
	e.HTTPErrorHandler = h.ErrorHandler
	// JSON answers are compressed for clients that accept gzip (the Go SDK asks for it by itself). The
	// edge is served beside this Echo instance, not through it, so its streams are never buffered here.
	// An export's JSONL is streamed with its counts in trailers, flushed a page at a time: not compressed.
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{MinLength: gzipMinLength, Skipper: isExport}))
	e.Use(limitBody)

	// Middleware is attached per route, not per group: Echo groups with middleware add catch-all
	// routes, which would turn "wrong method" (405) into "not found" (404).
	auth := []echo.MiddlewareFunc{h.authenticate}
	scoped := []echo.MiddlewareFunc{h.authenticate, h.project}
	const p = "/v1/orgs/:org/projects/:project"

	e.POST("/v1/auth/anonymous", h.anonymousMint)
	e.POST("/v1/auth/anonymous/scope", h.anonymousScope, auth...)
	e.POST("/v1/auth/anonymous/claim", h.anonymousClaim, auth...)
	e.GET("/v1/me", h.me, auth...)
	e.GET("/v1/models", h.modelList, auth...)
	e.GET("/v1/models/:id", h.modelGet, auth...)
	e.POST("/v1/one-click", h.oneClick, auth...)
	e.POST("/v1/orgs", h.orgCreate, auth...)
	e.POST("/v1/orgs/:org/projects", h.projectCreate, auth...)

	e.GET(p+"/deployments", h.deploymentList, scoped...)
	e.POST(p+"/deployments", h.deploymentCreate, scoped...)
	e.POST(p+"/deployments/bulk", h.deploymentBulk, scoped...)
	e.GET(p+"/deployments/:id", h.deploymentGet, scoped...)
	e.PATCH(p+"/deployments/:id", h.deploymentUpdate, scoped...)
	e.DELETE(p+"/deployments/:id", h.deploymentDelete, scoped...)
	e.POST(p+"/deployments/:id/canary/promote", h.canaryPromote, scoped...)
	e.GET(p+"/deployments/:id/canaries", h.canaryList, scoped...)
	e.GET(p+"/deployments/:id/canaries/:canaryId", h.canaryGet, scoped...)
	e.POST(p+"/deployments/:id/evals", h.evalCreate, scoped...)
	e.GET(p+"/deployments/:id/evals", h.evalList, scoped...)
	e.GET(p+"/deployments/:id/evals/:evalId", h.evalGet, scoped...)
	e.GET(p+"/deployments/:id/evals/:evalId/results", h.evalResults, scoped...)
	e.GET(p+"/deployments/:id/evals/:evalId/export", h.evalExport, scoped...)
	e.POST(p+"/deployments/:id/evals/:evalId/cancel", h.evalCancel, scoped...)
	e.GET(p+"/deployments/:id/keys", h.keyList, scoped...)
	e.POST(p+"/deployments/:id/keys", h.keyIssue, scoped...)
	e.GET(p+"/deployments/:id/keys/:keyId", h.keyGet, scoped...)
	e.PATCH(p+"/deployments/:id/keys/:keyId", h.keyUpdate, scoped...)
	e.POST(p+"/deployments/:id/keys/:keyId/revoke", h.keyRevoke, scoped...)
	e.GET(p+"/deployments/:id/runs", h.runList, scoped...)
	e.GET(p+"/deployments/:id/runs/:runId", h.runGet, scoped...)
	e.GET(p+"/deployments/:id/runs/export", h.runExport, scoped...)
	e.PUT(p+"/deployments/:id/runs/:runId/feedback", h.runFeedback, scoped...)
	e.DELETE(p+"/deployments/:id/runs/:runId/feedback", h.runFeedbackClear, scoped...)
	e.GET(p+"/deployments/:id/usage", h.usageGet, scoped...)
	e.GET(p+"/jobs", h.jobList, scoped...)
	e.POST(p+"/jobs", h.jobCreate, scoped...)
	e.GET(p+"/jobs/:id", h.jobGet, scoped...)
	e.PATCH(p+"/jobs/:id", h.jobUpdate, scoped...)
}
