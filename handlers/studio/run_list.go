package studio

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// runPageSize is how many runs one page of the "Recent runs" card shows.
const runPageSize = 20

// runList is GET /api/deployments/{id}/runs?cursor=, the detail page's "Recent runs" card.
func (s *Server) runList(c echo.Context) error {
	ctx := c.Request().Context()
	id, cursor := c.Param("id"), c.QueryParam("cursor")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	page, err := cl.ListRuns(ctx, id, cloudapi.ListRunsOptions{Limit: runPageSize, Cursor: cursor})
	if err != nil {
		return err
	}
	if page.Runs == nil {
		page.Runs = []cloudapi.RunSummary{}
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, page)
	}
	// Runs carry the key's id; the card names keys by their labels, as the key table does.
	keys, err := cl.ListDeploymentKeys(ctx, id)
	if err != nil {
		return err
	}
	v := runsView(id, page, keys)
	if cursor != "" {
		v.Append = true
		return renderHTML(c, http.StatusOK, views.RunsPage(v))
	}
	// The first page says what the retention is (the empty state, and "Don't store"), which the
	// run listing does not carry.
	d, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return err
	}
	v.Retention = runRetentionText(d.RunRetentionMode, d.RunRetentionDays)
	v.NotStored = d.RunRetentionMode == cloudapi.RetentionNone
	return renderHTML(c, http.StatusOK, views.RunsPage(v))
}
