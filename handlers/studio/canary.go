package studio

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// The detail page's Canary section (docs/API.md, "Canary"): every action one SDK call, the page
// re-rendered in the section it was made in.

// canarySet is POST /api/deployments/{id}/canary: the canary form (kind, jobId, step, model, percent,
// mode), or a cloudapi.Canary as JSON.
func (s *Server) canarySet(c echo.Context) error {
	ctx := c.Request().Context()
	var cn cloudapi.Canary
	if sentJSON(c) {
		if err := decodeJSON(c, &cn); err != nil {
			return err
		}
	} else {
		// The create form's own target rules (an empty picker, a step that is no number); slug and auth
		// mode are the create form's, not the canary's.
		form := createForm{Slug: "-", AuthMode: cloudapi.AuthFixedAPIKey, Kind: formValue(c, "kind"), JobID: strings.TrimSpace(formValue(c, "jobId")),
			Step: strings.TrimSpace(formValue(c, "step")), Model: strings.TrimSpace(formValue(c, "model"))}
		req, fieldErr := form.request()
		if fieldErr != nil {
			return fieldErr.apiError
		}
		percent, err := strconv.Atoi(strings.TrimSpace(formValue(c, "percent")))
		if err != nil {
			return badRequest("invalid_request", "Enter the share of sessions: a whole number from 1 to 99.")
		}
		cn = cloudapi.Canary{Target: req.Target, Percent: percent, Mode: formValue(c, "mode")}
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.SetCanary(ctx, c.Param("id"), cn)
	if err != nil {
		return err
	}
	return s.canaryDone(c, cl, d)
}

// canaryPromote is POST /api/deployments/{id}/canary/promote.
func (s *Server) canaryPromote(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.PromoteCanary(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	return s.canaryDone(c, cl, d)
}

// canaryEnd is DELETE /api/deployments/{id}/canary.
func (s *Server) canaryEnd(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.EndCanary(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	return s.canaryDone(c, cl, d)
}

func (s *Server) canaryDone(c echo.Context, cl *cloudapi.Client, d *cloudapi.Deployment) error {
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, d)
	}
	return s.renderDetail(c, cl, d)
}

// usageByArm is GET /api/deployments/{id}/usage?groupBy=arm: the canary card's comparison of the last
// 24 hours.
func (s *Server) usageByArm(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	opts := cloudapi.UsageWindow(time.Now(), 24, cloudapi.GranularityHour)
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	u, err := cl.GetDeploymentUsageByArm(ctx, id, opts)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, u)
	}
	return renderHTML(c, http.StatusOK, views.ArmsBody(armsView(id, u)))
}

func armsView(id string, u *cloudapi.UsageByArm) views.Arms {
	v := views.Arms{EndpointID: id}
	for i, a := range u.Arms {
		col := views.ArmColumn{Arm: a.Arm, Target: a.Target, Requests: a.Totals.Requests, Errors: a.Totals.Errors,
			PromptTokens: a.Totals.PromptTokens, CompletionTokens: a.Totals.CompletionTokens,
			P50: msText(a.Totals.LatencyP50Ms), P95: msText(a.Totals.LatencyP95Ms), TTFT50: msText(a.Totals.TTFTP50Ms), TTFT95: msText(a.Totals.TTFTP95Ms),
			FeedbackUp: a.Totals.Feedback.Up, FeedbackDown: a.Totals.Feedback.Down, FeedbackNeutral: a.Totals.Feedback.Neutral}
		for _, b := range a.Buckets {
			col.PerBucket = append(col.PerBucket, b.Requests)
			if i == 0 {
				v.Labels = append(v.Labels, b.Start.UTC())
			}
		}
		v.Columns = append(v.Columns, col)
	}
	return v
}

func msText(p *int64) string {
	if p == nil {
		return "-"
	}
	return views.Count(*p)
}

// canaryView is a deployment's canary for the list and the detail view.
func canaryView(c *cloudapi.Canary) views.Canary {
	if c == nil {
		return views.Canary{}
	}
	return views.Canary{Set: true, TargetSummary: c.Target.Summary(), Percent: c.Percent, Mode: c.Mode}
}
