package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

func (h *Handler) jobList(c echo.Context) error {
	jobs, err := h.svc.ListJobs(c.Request().Context(), project(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": jobs})
}

func (h *Handler) jobCreate(c echo.Context) error {
	var req cloudapi.CreateJobRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	j, err := h.svc.CreateJob(c.Request().Context(), project(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, j)
}

func (h *Handler) jobGet(c echo.Context) error {
	j, err := h.svc.GetJob(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}

func (h *Handler) jobUpdate(c echo.Context) error {
	var req cloudapi.UpdateJobRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	j, err := h.svc.UpdateJob(c.Request().Context(), project(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, j)
}
