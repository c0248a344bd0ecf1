package api

import (
	"fmt"
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func (h *Handler) anonymousMint(c echo.Context) error {
	tok, err := h.svc.MintAnonymous(c.Request().Context(), h.ip.Key(c.Request()))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, cloudapi.AnonymousToken{Token: tok.Token, Identity: cloudapi.Identity{ID: tok.IdentityID, Kind: core.KindAnonymous}})
}

func (h *Handler) anonymousScope(c echo.Context) error {
	scope, err := h.svc.AnonymousScope(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, scopeWire(scope))
}

func (h *Handler) anonymousClaim(c echo.Context) error {
	var body struct {
		AnonymousToken string `json:"anonymousToken"`
	}
	if err := decode(c, &body); err != nil {
		return err
	}
	scope, kept, err := h.svc.ClaimAnonymous(c.Request().Context(), principal(c), body.AnonymousToken)
	if err != nil {
		return err
	}
	out := cloudapi.Claim{Endpoints: kept}
	if scope != nil {
		out.OrgSlug, out.ProjectSlug, out.ProjectID = scope.OrgSlug, scope.Slug, scope.ID
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) me(c echo.Context) error {
	me, err := h.svc.Me(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	out := cloudapi.Me{Identity: cloudapi.Identity{ID: me.Identity.ID, Kind: me.Identity.Kind, Email: me.Identity.Email}, Orgs: make([]cloudapi.Org, len(me.Orgs))}
	for i, o := range me.Orgs {
		out.Orgs[i] = orgWire(o)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) modelList(c echo.Context) error {
	models := h.svc.Catalog().Models()
	out := make([]cloudapi.Model, 0, len(models))
	for _, m := range models {
		out = append(out, h.modelWire(m))
	}
	return c.JSON(http.StatusOK, map[string]any{"models": out})
}

// modelGet is GET /v1/models/{id}: one model of the catalog, with its replicas' state.
func (h *Handler) modelGet(c echo.Context) error {
	m, ok := h.svc.Catalog().Model(c.Param("id"))
	if !ok {
		return &edgemodel.Error{Code: edgemodel.CodeNotFound, Message: fmt.Sprintf("the catalog has no model %q; svc models list shows those it has", c.Param("id"))}
	}
	return c.JSON(http.StatusOK, h.modelWire(m))
}

// modelWire is a catalog model on the wire, with its fleet when it has replicas.
func (h *Handler) modelWire(m edgemodel.ModelInfo) cloudapi.Model {
	out := cloudapi.Model{ID: m.ID, Public: m.Public, Default: m.Default, SupportsMessages: m.SupportsMessages, Runtime: m.Runtime, Simulated: m.Simulated}
	if f, ok := h.svc.ModelFleet(m.ID); ok {
		out.Fleet = fleetWire(f)
	}
	return out
}

// oneClick creates a multi-model endpoint: in the caller's anonymous project, or, for signed-in
// callers, in the project the body names.
func (h *Handler) oneClick(c echo.Context) error {
	ctx := c.Request().Context()
	p := principal(c)
	var body struct {
		OrgSlug     string `json:"orgSlug"`
		ProjectSlug string `json:"projectSlug"`
	}
	if err := decode(c, &body); err != nil {
		return err
	}
	var pr core.Project
	if body.OrgSlug == "" && p.Kind == core.KindAnonymous {
		scope, err := h.svc.AnonymousScope(ctx, p)
		if err != nil {
			return err
		}
		pr = *scope
	} else {
		if body.OrgSlug == "" || body.ProjectSlug == "" {
			return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "orgSlug and projectSlug are required for signed-in callers"}
		}
		var err error
		if pr, err = h.svc.Project(ctx, p, body.OrgSlug, body.ProjectSlug); err != nil {
			return err
		}
	}
	d, err := h.svc.OneClick(ctx, p, pr)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, deploymentWire(d))
}
