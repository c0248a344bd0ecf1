package studio

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/sentence"
	"github.com/svcdev/svc/views"
)

// The detail page's Canary section (docs/API.md, "Canary"): every action one SDK call, the page
// re-rendered in the section it was made in.

// canarySet is POST /api/deployments/{id}/canary: the canary form (kind, jobId, step, model, percent,
// mode), or a cloudapi.Canary as JSON.
func (s *Server) canarySet(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	var cn cloudapi.Canary
	var form views.TargetForm
	if sentJSON(c) {
		if err := decodeJSON(c, &cn); err != nil {
			return err
		}
	} else {
		// The create form's own target rules (an empty picker, a step that is no number); each error
		// comes back under its field.
		form = targetFormFrom(c, id)
		target, fe := targetOf(form)
		if fe != nil {
			return s.canaryFormError(c, fe, form)
		}
		// A shadow canary copies every call: its share may be left empty (the API's percent left out).
		percent := 0
		if form.Percent != "" || form.Mode != views.CanaryShadow {
			var err error
			if percent, err = strconv.Atoi(form.Percent); err != nil {
				return s.canaryFormError(c, &fieldError{field: "percent",
					apiError: badRequest("invalid_request", "Enter the share of sessions: a whole number from 1 to 99 (a shadow canary needs none).")}, form)
			}
		}
		cn = cloudapi.Canary{Target: target, Percent: percent, Mode: form.Mode}
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	d, err := cl.SetCanary(ctx, id, cn)
	if err != nil {
		if isHTMX(c) && !sentJSON(c) {
			return s.canaryFormError(c, err, form)
		}
		return err
	}
	if isHTMX(c) {
		retarget(c, "#main", "innerHTML") // the form asked for itself; a started canary is the whole card
	}
	return s.canaryDone(c, cl, d)
}

// canaryFormError sends the canary form back with the error under its field, or above it; an error
// that is not the form's to fix goes to the central handler.
func (s *Server) canaryFormError(c echo.Context, err error, f views.TargetForm) error {
	if !isHTMX(c) {
		var fe *fieldError
		if errors.As(err, &fe) {
			return fe.apiError
		}
		return err
	}
	status, mine := s.targetFormError(c, err, &f)
	if !mine {
		return err
	}
	return renderHTML(c, status, views.CanaryForm(f))
}

// canaryPromote is POST /api/deployments/{id}/canary/promote; a form's reason promotes past the
// promotion gate (an override, recorded). The gate's 409 eval_required goes under the Promote button
// with the override's reason field.
func (s *Server) canaryPromote(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	var d *cloudapi.Deployment
	if reason := c.FormValue("reason"); reason != "" {
		d, err = cl.PromoteCanaryOverride(ctx, id, reason)
	} else {
		d, err = cl.PromoteCanary(ctx, id)
	}
	var ce *cloudapi.Error
	if errors.As(err, &ce) && ce.Code == edgemodel.CodeEvalRequired && isHTMX(c) {
		cur, gerr := cl.GetDeployment(ctx, id)
		if gerr != nil || cur.Canary == nil {
			return err
		}
		// The gate's message is its reason, then the API's advice after "; " (POST …/evals, an override
		// body): the studio gives its own (a link to the evals, a reason field).
		reason, _, _ := strings.Cut(ce.Message, "; ")
		retarget(c, "#canary-promote-result", "innerHTML")
		return renderHTML(c, ce.Status, views.CanaryPromoteRefused(id, cur.Canary.Target.Shorthand(), sentence.From(reason)))
	}
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

// usageByArm is GET /api/deployments/{id}/usage?groupBy=arm[&canary=ID]: the canary card's
// comparison. With a canary id its numbers are that canary's compare (its own calls only); the chart is
// the last 24 hours' requests per arm.
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
	var cmp *cloudapi.CanaryRecord
	if cid := c.QueryParam("canary"); cid != "" {
		if cmp, err = cl.GetCanary(ctx, id, cid); err != nil {
			return err
		}
	}
	if !isHTMX(c) {
		if cmp != nil {
			return c.JSON(http.StatusOK, cmp)
		}
		return c.JSON(http.StatusOK, u)
	}
	return renderHTML(c, http.StatusOK, views.ArmsBody(armsView(id, u, cmp)))
}

// armsView is the canary card's comparison: the columns of the canary's compare when there is one
// (else the range's totals), and the range's requests per hour for the chart, per column.
func armsView(id string, u *cloudapi.UsageByArm, cmp *cloudapi.CanaryRecord) views.Arms {
	v := views.Arms{EndpointID: id}
	if cmp != nil {
		for _, a := range cmp.Compare {
			v.Columns = append(v.Columns, armColumn(a.Arm, a.Target, a.ArmStats))
		}
	} else {
		for _, a := range u.Arms {
			v.Columns = append(v.Columns, armColumn(a.Arm, a.Target, a.Totals))
		}
	}
	for i, a := range u.Arms {
		if i == 0 {
			for _, b := range a.Buckets {
				v.Labels = append(v.Labels, b.Start.UTC())
			}
		}
	}
	for _, col := range v.Columns {
		per := make([]int64, len(v.Labels))
		for _, a := range u.Arms {
			if a.Arm == col.Arm && a.Target == col.Target {
				for j, b := range a.Buckets {
					if j < len(per) {
						per[j] += b.Requests
					}
				}
			}
		}
		v.PerBucket = append(v.PerBucket, per)
	}
	return v
}

// armColumn is one arm's numbers as the card shows them, worded as every surface words them.
func armColumn(arm, target string, s cloudapi.ArmStats) views.ArmColumn {
	return views.ArmColumn{Arm: arm, Target: target, Requests: s.Requests, Errors: s.Errors,
		PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens,
		Latency: views.LatencyPair(s.LatencyP50Ms, s.LatencyP95Ms, s.LatencyErrorPct), P50: views.LatencyMs(s.LatencyP50Ms, s.LatencyErrorPct),
		TTFT:       views.LatencyPair(s.TTFTP50Ms, s.TTFTP95Ms, s.TTFTErrorPct),
		Estimated:  s.LatencyErrorPct != nil && *s.LatencyErrorPct > 1,
		FeedbackUp: s.Feedback.Up, FeedbackDown: s.Feedback.Down, FeedbackNeutral: s.Feedback.Neutral}
}

// canaryHistory is GET /api/deployments/{id}/canary/history: the canary card's history (the last
// canary's outcome and final compare when none runs, and the past canaries).
func (s *Server) canaryHistory(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	list, err := cl.ListCanaries(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, cloudapi.CanaryList{Canaries: list})
	}
	h := views.CanaryHistory{EndpointID: c.Param("id")}
	for i, r := range list {
		rec := views.CanaryRecord{ID: r.ID, Mode: r.Mode, TargetSummary: r.Target.Summary(), Started: whenText(r.StartedAt), Outcome: r.Outcome}
		if r.EndedAt != nil {
			rec.Ended = whenText(*r.EndedAt)
		}
		for _, a := range r.Compare {
			rec.Arms = append(rec.Arms, armColumn(a.Arm, a.Target, a.ArmStats))
		}
		if r.Outcome == cloudapi.CanaryRunning {
			continue // the card above shows it
		}
		if i == 0 {
			h.Last = &rec
		}
		h.Past = append(h.Past, rec)
	}
	return renderHTML(c, http.StatusOK, views.CanaryHistoryBody(h))
}

// whenText is a time as the studio says it: "Dec 2, 14:05 UTC".
func whenText(t time.Time) string { return views.WhenText(t) }

// canaryView is a deployment's canary for the list and the detail view.
func canaryView(c *cloudapi.Canary) views.Canary {
	if c == nil {
		return views.Canary{}
	}
	return views.Canary{Set: true, ID: c.ID, TargetSummary: c.Target.Summary(), Percent: c.Percent, Mode: c.Mode, Started: whenText(c.StartedAt),
		Shorthand: c.Target.Shorthand()}
}
