package studio

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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

// deploymentGet is GET /api/deployments/{id}?section=&part=, the #/endpoints/<id>[/<section>] view;
// part=section answers with the section alone (a tab's swap into #detail-section).
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
	section, err := detailSection(c)
	if err != nil {
		return err
	}
	v := s.detailView(*d, ks)
	v.Section = section
	v.RunFilter = runFilterOf(c)
	if section == views.SectionKeys {
		v.Keys = s.withCalls(ctx, cl, d.ID, v.Keys)
	}
	v.Gate = gateText(d.PromoteGate)
	if section == views.SectionEvals {
		if v.Evals, err = s.evalsView(c, cl, d); err != nil {
			return err
		}
	}
	if section == views.SectionOverview {
		if v.QuickStart.Messages, err = servesMessages(ctx, cl, d.Target); err != nil {
			return err
		}
	}
	if c.QueryParam("part") == "section" {
		return renderHTML(c, http.StatusOK, views.DetailSection(v))
	}
	return renderHTML(c, http.StatusOK, views.EndpointDetail(v))
}

// detailSection is the section the detail view shows: the section query parameter when the request
// has one (a hash route's load), else the section of the page's own hash route (HX-Current-URL), so
// a change made in Settings re-renders Settings. A section that does not exist is a 404.
func detailSection(c echo.Context) (string, error) {
	q := c.QueryParams()
	if _, ok := q["section"]; ok {
		sec := q.Get("section")
		if !views.ValidSection(sec) {
			return "", &apiError{Status: http.StatusNotFound, Code: "section_not_found",
				Message: "The endpoint page has no section " + strconv.Quote(sec) + "."}
		}
		return sec, nil
	}
	return sectionOfPage(c.Request().Header.Get("HX-Current-URL")), nil
}

// sectionOfPage reads the section from a page URL whose hash is #/endpoints/<id>/<section>; anything
// else is the overview.
func sectionOfPage(page string) string {
	u, err := url.Parse(page)
	if err != nil {
		return views.SectionOverview
	}
	route, _, _ := strings.Cut(u.Fragment, "?") // the Runs section's filters follow its route
	parts := strings.Split(strings.TrimPrefix(route, "/"), "/")
	if len(parts) == 3 && parts[0] == "endpoints" && views.ValidSection(parts[2]) {
		return parts[2]
	}
	return views.SectionOverview
}

// servesMessages reports whether a target's model serves the Messages API (the catalog's
// supportsMessages), so that the quick start offers its samples and Claude Code: the base model of a
// base model, adapter or checkpoint target; for a multi-model endpoint, whether any model does (the
// caller names the model).
func servesMessages(ctx context.Context, cl *cloudapi.Client, t cloudapi.Target) (bool, error) {
	base := t.Model
	if t.Kind == cloudapi.TargetFinalAdapter || t.Kind == cloudapi.TargetCheckpoint {
		j, err := cl.GetJob(ctx, t.JobID)
		var ce *cloudapi.Error
		if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
			return false, nil // the job is gone: chat and Responses still answer, or say why
		}
		if err != nil {
			return false, err
		}
		base = j.BaseModel
	}
	models, err := cl.ListModels(ctx)
	if err != nil {
		return false, err
	}
	for _, m := range models {
		if m.SupportsMessages && (t.Kind == cloudapi.TargetMultiModel || m.ID == base) {
			return true, nil
		}
	}
	return false, nil
}
