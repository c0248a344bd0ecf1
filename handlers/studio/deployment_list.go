package studio

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/sentence"
	"github.com/svcdev/svc/views"
)

// deploymentsBody is the JSON of the list, shaped like the management API's.
type deploymentsBody struct {
	Deployments []cloudapi.Deployment `json:"deployments"`
	NextCursor  string                `json:"nextCursor,omitempty"`
}

// defaultListPageSize is how many endpoints the list shows at first and adds with each "Show more".
const defaultListPageSize = 50

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
			l.Notice = sentence.From(ce.Message)
		}
		return render(c, http.StatusOK, views.EndpointList(l), deploymentsBody{Deployments: []cloudapi.Deployment{}})
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	// One page of the cloud's list at a time; ?cursor= asks for a later page, which the page's "Show
	// more" row swaps in as rows alone.
	cursor := c.QueryParam("cursor")
	page, err := cl.ListDeploymentsPage(ctx, cloudapi.ListOptions{Limit: s.pageSize, Cursor: cursor})
	if err != nil {
		return err
	}
	if page.Deployments == nil {
		page.Deployments = []cloudapi.Deployment{}
	}
	l := listView(page.Deployments)
	l.NextCursor = page.NextCursor
	body := deploymentsBody{Deployments: page.Deployments, NextCursor: page.NextCursor}
	if cursor != "" {
		return render(c, http.StatusOK, views.EndpointRows(l), body)
	}
	return render(c, http.StatusOK, views.EndpointList(l), body)
}
