package api

import (
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/internal/core"
)

const (
	ctxPrincipal = "principal"
	ctxProject   = "project"
)

// authenticate resolves the bearer token of every /v1 route but the anonymous mint.
func (h *Handler) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := h.svc.Authenticate(c.Request().Context(), bearer(c.Request()))
		if err != nil {
			return err
		}
		c.Set(ctxPrincipal, p)
		return next(c)
	}
}

// project resolves the org and project of a scoped route to a project the caller is a member of.
func (h *Handler) project(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		pr, err := h.svc.Project(c.Request().Context(), principal(c), c.Param("org"), c.Param("project"))
		if err != nil {
			return err
		}
		c.Set(ctxProject, pr)
		return next(c)
	}
}

func principal(c echo.Context) core.Principal { return c.Get(ctxPrincipal).(core.Principal) }

func project(c echo.Context) core.Project { return c.Get(ctxProject).(core.Project) }
