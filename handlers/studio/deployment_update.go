package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
)

// deploymentUpdate is PATCH /api/deployments/{id}: the enable toggle and the auth-mode switch from
// the page, the rate-limits, budget, target and run retention cards, or any partial update (SDK's UpdateDeploymentRequest) from JSON
// callers.
func (s *Server) deploymentUpdate(c echo.Context) error {
	if isHTMX(c) {
		switch targetID(c) {
		case "limits":
			return s.deploymentLimitsUpdate(c)
		case "target-card":
			return s.deploymentTargetUpdate(c)
		case "retention-card":
			return s.deploymentRetentionUpdate(c)
		case "budget-card":
			return s.deploymentBudgetUpdate(c)
		}
	}
	ctx := c.Request().Context()
	var req cloudapi.UpdateDeploymentRequest
	if sentJSON(c) {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	} else if err := updateFromForm(c, &req); err != nil {
		return err
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.UpdateDeployment(ctx, c.Param("id"), req)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, d)
	}
	return s.renderDetail(c, cl, d)
}

// updateFromForm reads the two settings the page changes: enabled and authMode.
func updateFromForm(c echo.Context, req *cloudapi.UpdateDeploymentRequest) error {
	switch v := formValue(c, "enabled"); v {
	case "":
	case "true", "false":
		on := v == "true"
		req.Enabled = &on
	default:
		return badRequest("invalid_request", "enabled must be true or false.")
	}
	switch v := formValue(c, "authMode"); v {
	case "":
	case cloudapi.AuthFixedAPIKey, cloudapi.AuthNone:
		req.AuthMode = &v
	default:
		return badRequest("invalid_request", "authMode must be fixed_api_key or none.")
	}
	if req.Enabled == nil && req.AuthMode == nil {
		return badRequest("invalid_request", "Nothing to change: send enabled or authMode.")
	}
	return nil
}
