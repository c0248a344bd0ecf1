package studio

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// deploymentDetail is the JSON of the detail route: the deployment with its keys (a superset of the
// management API's Deployment, so SDK types decode it).
type deploymentDetail struct {
	cloudapi.Deployment
	Keys []cloudapi.Key `json:"keys"`
}

// deploymentGet is GET /api/deployments/{id}, the #/endpoints/<id> view.
func (s *Server) deploymentGet(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.GetDeployment(ctx, c.Param("id"))
	if err != nil {
		return endpointNotFound(c, err)
	}
	return s.renderDetail(c, cl, d)
}

// endpointNotFound words the cloud's 404 for the endpoint of the route the way a studio user meets
// it: a bookmark or the back button to an endpoint that was deleted. The page gets that wording with
// the upstream status and code; JSON callers get the upstream error as it came.
func endpointNotFound(c echo.Context, err error) error {
	var ce *cloudapi.Error
	if !isHTMX(c) || !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		return err
	}
	return &apiError{Status: http.StatusNotFound, Code: ce.Code, Cause: err,
		Message: "There is no endpoint " + c.Param("id") + " in this project: it may have been deleted."}
}

// renderDetail answers with the detail view (which also needs the keys) or the deployment as JSON.
func (s *Server) renderDetail(c echo.Context, cl *cloudapi.Client, d *cloudapi.Deployment) error {
	ctx := c.Request().Context()
	ks, err := cl.ListDeploymentKeys(ctx, d.ID)
	if err != nil {
		return err
	}
	if ks == nil {
		ks = []cloudapi.Key{}
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, deploymentDetail{Deployment: *d, Keys: ks})
	}
	v := s.detailView(*d, ks)
	v.Keys = s.withCalls(ctx, cl, d.ID, v.Keys)
	return renderHTML(c, http.StatusOK, views.EndpointDetail(v))
}
