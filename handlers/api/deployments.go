package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

func (h *Handler) deploymentList(c echo.Context) error {
	list, err := h.svc.ListDeployments(c.Request().Context(), project(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deployments": list})
}

func (h *Handler) deploymentCreate(c echo.Context) error {
	var req cloudapi.CreateDeploymentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	d, err := h.svc.CreateDeployment(c.Request().Context(), project(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, d)
}

func (h *Handler) deploymentGet(c echo.Context) error {
	d, err := h.svc.GetDeployment(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (h *Handler) deploymentUpdate(c echo.Context) error {
	var req cloudapi.UpdateDeploymentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	d, err := h.svc.UpdateDeployment(c.Request().Context(), project(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (h *Handler) deploymentDelete(c echo.Context) error {
	if err := h.svc.DeleteDeployment(c.Request().Context(), project(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handler) deploymentBulk(c echo.Context) error {
	var req cloudapi.BulkRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	results, err := h.svc.BulkDeployments(c.Request().Context(), project(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"results": results})
}
