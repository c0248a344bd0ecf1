package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/apierr"
	"github.com/svcdev/svc/internal/core"
)

func (h *Handler) deploymentList(c echo.Context) error {
	limit, cursor, err := pageQuery(c)
	if err != nil {
		return err
	}
	page, err := h.svc.ListDeployments(c.Request().Context(), project(c), limit, cursor)
	if err != nil {
		return err
	}
	out := cloudapi.DeploymentPage{Deployments: make([]cloudapi.Deployment, len(page.Items)), NextCursor: page.NextCursor}
	for i := range page.Items {
		out.Deployments[i] = deploymentWire(&page.Items[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) deploymentCreate(c echo.Context) error {
	var req createDeploymentBody
	if err := decode(c, &req, budgetNullable); err != nil {
		return err
	}
	d, err := h.svc.CreateDeployment(c.Request().Context(), principal(c), project(c), core.NewDeployment{
		Slug: req.Slug, Target: req.Target.core(), AuthMode: req.AuthMode,
		RetentionMode: req.RunRetentionMode, RetentionDays: req.RunRetentionDays, Budget: req.Budget.change.Value,
		QueueTimeoutMs: req.QueueTimeoutMs,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, deploymentWire(d))
}

func (h *Handler) deploymentGet(c echo.Context) error {
	d, err := h.svc.GetDeployment(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deploymentWire(d))
}

func (h *Handler) deploymentUpdate(c echo.Context) error {
	var req updateDeploymentBody
	if err := decode(c, &req, append(limitsNullable, canaryNullable, gateNullable, budgetNullable, queueTimeoutNullable)...); err != nil {
		return err
	}
	change := core.DeploymentChange{AuthMode: req.AuthMode, Enabled: req.Enabled, RetentionMode: req.RunRetentionMode, RetentionDays: req.RunRetentionDays,
		Limits: req.Limits.change, Budget: req.Budget.change, QueueTimeoutMs: req.QueueTimeoutMs.change, Canary: req.Canary.change,
		PromoteGate: req.PromoteGate.change, Override: req.Override.core(principal(c).IdentityID)}
	if change.Canary != nil {
		change.Canary.By = principal(c).IdentityID
	}
	if req.Target != nil {
		t := req.Target.core()
		change.Target = &t
	}
	d, err := h.svc.UpdateDeployment(c.Request().Context(), project(c), c.Param("id"), change)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deploymentWire(d))
}

func (h *Handler) deploymentDelete(c echo.Context) error {
	if err := h.svc.DeleteDeployment(c.Request().Context(), project(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handler) deploymentBulk(c echo.Context) error {
	var req bulkBody
	if err := decode(c, &req); err != nil {
		return err
	}
	results, err := h.svc.BulkDeployments(c.Request().Context(), project(c), req.Action, req.IDs)
	if err != nil {
		return err
	}
	out := make([]cloudapi.BulkResult, len(results))
	for i, r := range results {
		out[i] = cloudapi.BulkResult{ID: r.ID, OK: r.Err == nil}
		if r.Err != nil {
			b := cloudapi.ErrorBody(apierr.APIError(r.Err))
			out[i].Error = &b
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"results": out})
}
