package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

// orgCreate creates an org whose member is the signed-in caller (docs/API.md, "Orgs and projects").
func (h *Handler) orgCreate(c echo.Context) error {
	var body struct {
		Slug string `json:"slug"`
	}
	if err := decode(c, &body); err != nil {
		return err
	}
	org, err := h.svc.CreateOrg(c.Request().Context(), principal(c), body.Slug)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, orgWire(*org))
}

// projectCreate creates a project in an org of which the caller is a member.
func (h *Handler) projectCreate(c echo.Context) error {
	var body struct {
		Slug string `json:"slug"`
	}
	if err := decode(c, &body); err != nil {
		return err
	}
	pr, err := h.svc.CreateProject(c.Request().Context(), principal(c), c.Param("org"), body.Slug)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, cloudapi.Project{ID: pr.ID, Slug: pr.Slug})
}
