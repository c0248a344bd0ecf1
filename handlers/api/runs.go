package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

func (h *Handler) runList(c echo.Context) error {
	limit, cursor, err := pageQuery(c)
	if err != nil {
		return err
	}
	page, err := h.svc.ListRuns(c.Request().Context(), project(c), c.Param("id"), limit, cursor)
	if err != nil {
		return err
	}
	out := cloudapi.RunPage{Runs: make([]cloudapi.RunSummary, len(page.Items)), NextCursor: page.NextCursor}
	for i, r := range page.Items {
		out.Runs[i] = runSummaryWire(r)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) runGet(c echo.Context) error {
	run, err := h.svc.GetRun(c.Request().Context(), project(c), c.Param("id"), c.Param("runId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runWire(run))
}
