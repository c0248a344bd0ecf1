package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// deploymentDelete is DELETE /api/deployments/{id}. The page asked for confirmation before sending
// it; afterwards it goes back to the list (svc:navigate).
func (s *Server) deploymentDelete(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	if err := cl.DeleteDeployment(ctx, c.Param("id")); err != nil {
		return err
	}
	if isHTMX(c) {
		trigger(c, "svc:navigate", "#/endpoints")
		noSwap(c)
		return c.NoContent(http.StatusOK)
	}
	return c.NoContent(http.StatusNoContent)
}
