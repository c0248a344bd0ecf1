package studio

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// deploymentsBody is the JSON of the list, shaped like the management API's.
type deploymentsBody struct {
	Deployments []cloudapi.Deployment `json:"deployments"`
}

// deploymentList is GET /api/deployments. Without a state file there is no project, so the list is
// empty and nothing is sent upstream (docs/API.md, "Studio loopback routes"); a signed-in user also
// learns which file
// to write.
func (s *Server) deploymentList(c echo.Context) error {
	ctx := c.Request().Context()
	if !s.local.HasState() {
		l := views.List{}
		var ce *cloudapi.Error
		if err := s.stateMissing(ctx); errors.As(err, &ce) {
			l.Notice = ce.Message
		}
		return render(c, http.StatusOK, views.EndpointList(l), deploymentsBody{Deployments: []cloudapi.Deployment{}})
	}
	ds, err := s.listDeployments(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.EndpointList(listView(ds)), deploymentsBody{Deployments: ds})
}

func (s *Server) listDeployments(c echo.Context) ([]cloudapi.Deployment, error) {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := cl.ListDeployments(ctx)
	if ds == nil {
		ds = []cloudapi.Deployment{}
	}
	return ds, err
}
