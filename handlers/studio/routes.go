package studio

import (
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/static"
)

// routes is the studio's one route table (docs/API.md, "Studio loopback routes"). Every /api route
// answers htmx with a
// templ fragment and everyone else with JSON (see render).
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError

	// Before routing, so that even unknown paths from a foreign Host are refused.
	e.Pre(s.requireLoopbackHost)
	e.Use(readForm)

	e.GET("/", s.page)
	e.StaticFS("/static", static.FS)

	// The deployments routes all require the CSRF token, reads included (every /api/deployments*
	// call carries it).
	d := e.Group("/api/deployments", s.requireCSRF)
	d.GET("", s.deploymentList)
	d.POST("", s.deploymentCreate)
	d.GET("/:id", s.deploymentGet)
	d.PATCH("/:id", s.deploymentUpdate)
	d.DELETE("/:id", s.deploymentDelete)
	d.POST("/:id/keys", s.keyIssue)
	d.PATCH("/:id/keys/:keyId", s.keyUpdate)
	d.POST("/:id/keys/:keyId/revoke", s.keyRevoke)
	d.GET("/:id/runs", s.runList)
	d.GET("/:id/runs/:runId", s.runGet)
	d.PUT("/:id/runs/:runId/feedback", s.runFeedback)
	d.DELETE("/:id/runs/:runId/feedback", s.runFeedbackClear)
	d.POST("/:id/runs/export", s.runExportStart)
	d.GET("/:id/runs/export/:download", s.runExportResult)
	d.GET("/:id/usage", s.usageGet)
	d.POST("/:id/canary", s.canarySet)
	d.POST("/:id/canary/promote", s.canaryPromote)
	d.DELETE("/:id/canary", s.canaryEnd)
	d.GET("/:id/canary/history", s.canaryHistory)
	d.POST("/:id/evals", s.evalCreate)
	d.GET("/:id/evals/:evalId", s.evalGet)
	d.POST("/:id/evals/:evalId/cancel", s.evalCancel)

	// The download links (the runs' Export, an eval's judged pairs): reads that a link cannot send the
	// token with, so they ask for the session cookie the page set instead (runExport, evalExport).
	e.GET("/api/deployments/:id/runs/export", s.runExport)
	e.GET("/api/deployments/:id/evals/:evalId/export", s.evalExport)

	// Reads that reveal nothing secret go without the token; every state-changing call needs it.
	e.GET("/api/jobs", s.jobList)
	e.GET("/api/models", s.modelList)
	e.GET("/api/fleet", s.fleetList)
	e.POST("/api/inference/chat", s.chat, s.requireCSRF)
	e.GET("/api/credentials", s.credentialsGet)
	e.POST("/api/credentials", s.credentialsMint, s.requireCSRF)

	return e
}
