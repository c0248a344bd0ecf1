package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/views"
)

// keyRevoke is POST /api/deployments/{id}/keys/{keyId}/revoke. The page gets the key table back.
func (s *Server) keyRevoke(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	k, err := cl.RevokeDeploymentKey(ctx, id, c.Param("keyId"))
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, k)
	}
	d, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return err
	}
	ks, err := cl.ListDeploymentKeys(ctx, id)
	if err != nil {
		return err
	}
	table := keysView(*d, ks)
	table.Keys = s.withCalls(ctx, cl, id, table.Keys)
	return renderHTML(c, http.StatusOK, views.KeyTable(table, false))
}
