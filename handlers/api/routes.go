// Package api serves the management API of DESIGN.md section 3 over core.Service.
package api

import (
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/core"
)

// Handler holds what the management API's handlers need.
type Handler struct {
	svc *core.Service
}

// New returns the management API handler set.
func New(svc *core.Service) *Handler { return &Handler{svc: svc} }

// Register mounts every route of the management API on e: the one route table of this surface.
func (h *Handler) Register(e *echo.Echo) {
	e.HTTPErrorHandler = ErrorHandler
	e.Use(limitBody)

	// Middleware is attached per route, not per group: Echo groups with middleware add catch-all
	// routes, which would turn "wrong method" (405) into "not found" (404).
	auth := []echo.MiddlewareFunc{h.authenticate}
	scoped := []echo.MiddlewareFunc{h.authenticate, h.project}
	const p = "/v1/orgs/:org/projects/:project"

	e.POST("/v1/auth/anonymous", h.anonymousMint)
	e.POST("/v1/auth/anonymous/scope", h.anonymousScope, auth...)
	e.GET("/v1/me", h.me, auth...)
	e.GET("/v1/models", h.modelList, auth...)
	e.POST("/v1/one-click", h.oneClick, auth...)
	e.POST("/v1/orgs", h.orgCreate, auth...)
	e.POST("/v1/orgs/:org/projects", h.projectCreate, auth...)

	e.GET(p+"/deployments", h.deploymentList, scoped...)
	e.POST(p+"/deployments", h.deploymentCreate, scoped...)
	e.POST(p+"/deployments/bulk", h.deploymentBulk, scoped...)
	e.GET(p+"/deployments/:id", h.deploymentGet, scoped...)
	e.PATCH(p+"/deployments/:id", h.deploymentUpdate, scoped...)
	e.DELETE(p+"/deployments/:id", h.deploymentDelete, scoped...)
	e.GET(p+"/deployments/:id/keys", h.keyList, scoped...)
	e.POST(p+"/deployments/:id/keys", h.keyIssue, scoped...)
	e.PATCH(p+"/deployments/:id/keys/:keyId", h.keyUpdate, scoped...)
	e.POST(p+"/deployments/:id/keys/:keyId/revoke", h.keyRevoke, scoped...)
	e.GET(p+"/deployments/:id/runs", h.runList, scoped...)
	e.GET(p+"/deployments/:id/runs/:runId", h.runGet, scoped...)
	e.GET(p+"/deployments/:id/usage", h.usageGet, scoped...)
	e.GET(p+"/jobs", h.jobList, scoped...)
	e.POST(p+"/jobs", h.jobCreate, scoped...)
	e.GET(p+"/jobs/:id", h.jobGet, scoped...)
	e.PATCH(p+"/jobs/:id", h.jobUpdate, scoped...)
}
