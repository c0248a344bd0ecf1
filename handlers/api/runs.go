package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/core"
)

func (h *Handler) runList(c echo.Context) error {
	limit := 0
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return &core.Error{Code: core.CodeInvalidRequest, Message: "limit must be a whole number"}
		}
		limit = n
	}
	page, err := h.svc.ListRuns(c.Request().Context(), project(c), c.Param("id"), limit, c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (h *Handler) runGet(c echo.Context) error {
	run, err := h.svc.GetRun(c.Request().Context(), project(c), c.Param("id"), c.Param("runId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}
