package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// runDetail is the JSON of one run: the management API's Run plus the label of its key.
type runDetail struct {
	cloudapi.Run
	KeyLabel string `json:"keyLabel,omitempty"`
}

// runGet is GET /api/deployments/{id}/runs/{runId}: one run with its request and response, opened
// from the runs card. The key is named by its label, looked up among the endpoint's keys.
func (s *Server) runGet(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	r, err := cl.GetRun(ctx, id, c.Param("runId"))
	if err != nil {
		return err
	}
	keys, err := cl.ListDeploymentKeys(ctx, id)
	if err != nil {
		return err
	}
	v := runDetailView(id, r, keys)
	return render(c, http.StatusOK, views.RunDetailView(v), runDetail{Run: *r, KeyLabel: v.Key.Label})
}
