package studio

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// runPageSize is how many runs one page of the "Recent runs" card shows.
const runPageSize = 20

// runList is GET /api/deployments/{id}/runs?cursor=&limit=&status=&key=&arm=&surface=&range=, the detail page's
// "Recent runs" card. limit (1 to runPageSize) asks for only the latest runs and no next page: the
// overview's glance. status, key, arm and surface are the API's filters; range (1h, 24h, 7d, 30d) its since.
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
	filter := runFilterOf(c)
	opts, err := runsOptions(filter, time.Now())
	if err != nil {
		return err
	}
	opts.Limit, opts.Cursor = limit, cursor
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	page, err := cl.ListRuns(ctx, id, opts)
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
	v.Filter = filter
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

// runFilterOf is the Runs filter of a request: the runs route's, or the detail view's from its hash route.
func runFilterOf(c echo.Context) views.RunFilter {
	return views.RunFilter{Status: c.QueryParam("status"), Key: c.QueryParam("key"), Arm: c.QueryParam("arm"), Surface: c.QueryParam("surface"), Range: c.QueryParam("range")}
}

// runRanges are the Runs filter's ranges (views.RunRanges) as durations.
var runRanges = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

// runsOptions is the SDK's listing of the runs that pass f, as of now, with their prompt previews. The API judges status, key,
// arm and surface; range is the studio's own, refused here when it is none of runRanges.
func runsOptions(f views.RunFilter, now time.Time) (cloudapi.ListRunsOptions, error) {
	opts := cloudapi.ListRunsOptions{Status: f.Status, KeyID: f.Key, Arm: f.Arm, Surface: f.Surface, Preview: true}
	if f.Range != "" {
		d, ok := runRanges[f.Range]
		if !ok {
			return opts, badRequest("invalid_request", "range must be 1h, 24h, 7d or 30d (got "+strconv.Quote(f.Range)+").")
		}
		opts.Since = now.Add(-d)
	}
	return opts, nil
}
