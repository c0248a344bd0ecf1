package studio

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// runPageSize is how many runs one page of the "Recent runs" card shows.
const runPageSize = 20

// runList is GET /api/deployments/{id}/runs?cursor=&limit=, the detail page's "Recent runs" card.
// limit (1 to runPageSize) asks for only the latest runs and no next page: the overview's glance.
func (s *Server) runList(c echo.Context) error {
	ctx := c.Request().Context()
	id, cursor := c.Param("id"), c.QueryParam("cursor")
	limit := runPageSize
	glance := c.QueryParam("limit") != ""
	if glance {
		n, err := strconv.Atoi(c.QueryParam("limit"))
		if err != nil || n < 1 || n > runPageSize {
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_limit",
				Message: "limit must be a whole number from 1 to " + strconv.Itoa(runPageSize) + "."}
		}
		limit = n
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	page, err := cl.ListRuns(ctx, id, cloudapi.ListRunsOptions{Limit: limit, Cursor: cursor})
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
	if glance {
		v.NextCursor = "" // the Runs section pages; the glance links there
	}
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
