package studio

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
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
	table, err := s.keyTable(ctx, cl, id)
	if err != nil {
		return err
	}
	return renderHTML(c, http.StatusOK, views.KeyTable(table, false))
}

// keyTable is the keys card of a deployment as it is now, with each key's calls of the last 24 h:
// what the page shows again after a key changed.
func (s *Server) keyTable(ctx context.Context, cl *cloudapi.Client, id string) (views.Keys, error) {
	d, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return views.Keys{}, err
	}
	ks, err := cl.ListDeploymentKeys(ctx, id)
	if err != nil {
		return views.Keys{}, err
	}
	table := keysView(*d, ks)
	table.Keys = s.withCalls(ctx, cl, id, table.Keys)
	return table, nil
}
