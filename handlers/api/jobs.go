package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func (h *Handler) jobList(c echo.Context) error {
	limit, cursor, err := pageQuery(c)
	if err != nil {
		return err
	}
	page, err := h.svc.ListJobs(c.Request().Context(), project(c), limit, cursor)
	if err != nil {
		return err
	}
	out := cloudapi.JobPage{Jobs: make([]cloudapi.Job, len(page.Items)), NextCursor: page.NextCursor}
	for i := range page.Items {
		out.Jobs[i] = jobWire(&page.Items[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) jobCreate(c echo.Context) error {
	var req createJobBody
	if err := decode(c, &req); err != nil {
		return err
	}
	j, err := h.svc.CreateJob(c.Request().Context(), project(c), core.NewJob{
		ID: req.ID, BaseModel: req.BaseModel, Status: req.Status, Checkpoints: checkpoints(req.Checkpoints), FinalAdapter: req.FinalAdapter,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, jobWire(j))
}

func (h *Handler) jobGet(c echo.Context) error {
	j, err := h.svc.GetJob(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, jobWire(j))
}

func (h *Handler) jobUpdate(c echo.Context) error {
	var req updateJobBody
	if err := decode(c, &req); err != nil {
		return err
	}
	j, err := h.svc.UpdateJob(c.Request().Context(), project(c), c.Param("id"), core.JobChange{
		Status: req.Status, FinalAdapter: req.FinalAdapter, Checkpoints: checkpoints(req.Checkpoints),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, jobWire(j))
}
