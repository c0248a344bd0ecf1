package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// deploymentDelete is DELETE /api/deployments/{id}. The page asked for confirmation before sending
// it; afterwards it goes back to the list and says what was deleted (svc:navigate). The page sends the
// slug along (?slug=) only to word that notice.
func (s *Server) deploymentDelete(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	if err := cl.DeleteDeployment(ctx, c.Param("id")); err != nil {
		return endpointNotFound(c, err)
	}
	if isHTMX(c) {
		notice := "Deleted the endpoint."
		if slug := c.QueryParam("slug"); slug != "" {
			notice = "Deleted endpoint " + slug + "."
		}
		trigger(c, "svc:navigate", navigateEvent{Hash: "#/endpoints", Notice: notice})
		noSwap(c)
		return c.NoContent(http.StatusOK)
	}
	return c.NoContent(http.StatusNoContent)
}

// navigateEvent is the detail of svc:navigate: the view to show and what to tell the user there.
type navigateEvent struct {
	Hash   string `json:"hash"`
	Notice string `json:"notice,omitempty"`
}
