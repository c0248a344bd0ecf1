package studio

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// The detail page's Evals section (docs/API.md, "Evals"): every action one SDK call.

// evalListSize is how many of the endpoint's evals the section lists; evalResultsMax how many results
// an opened eval reads (pages of evalResultsPage) and evalPairsShown how many pairs it shows.
const (
	evalListSize    = 20
	evalResultsPage = 200
	evalResultsMax  = 1000
	evalPairsShown  = 50
)

// evalsView is the Evals section of deployment d: the form (its candidate the request's candidate, else
// the canary's target), the evals, and the eval the request opens (eval=) with its pairs' filters
// (verdict=, check=: the hash route keeps them).
func (s *Server) evalsView(c echo.Context, cl *cloudapi.Client, d *cloudapi.Deployment) (views.Evals, error) {
	ctx := c.Request().Context()
	form := views.EvalForm{EndpointID: d.ID, Candidate: c.QueryParam("candidate"), Since: "168", Status: "ok",
		Limit: strconv.Itoa(100)}
	if form.Candidate == "" && d.Canary != nil {
		form.Candidate = d.Canary.Target.Shorthand()
	}
	var err error
	if form.Models, err = judgeModels(ctx, cl); err != nil {
		return views.Evals{}, err
	}
	v := views.Evals{EndpointID: d.ID, Form: form}
	if v.List, err = evalRows(ctx, cl, d.ID); err != nil {
		return v, err
	}
	if id := c.QueryParam("eval"); id != "" {
		e, err := cl.GetEval(ctx, d.ID, id)
		if err != nil {
			return v, err
		}
		open, err := evalDetail(ctx, cl, e, c.QueryParam("verdict"), c.QueryParam("check"))
		if err != nil {
			return v, err
		}
		v.Open = &open
	}
	return v, nil
}

// judgeModels are the models a judge may be: the catalog's public ones.
func judgeModels(ctx context.Context, cl *cloudapi.Client) ([]string, error) {
	models, err := cl.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range models {
		if m.Public {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

func evalRows(ctx context.Context, cl *cloudapi.Client, id string) ([]views.EvalRow, error) {
	page, err := cl.ListEvals(ctx, id, cloudapi.ListOptions{Limit: evalListSize})
	if err != nil {
		return nil, err
	}
	rows := make([]views.EvalRow, 0, len(page.Evals))
	for _, e := range page.Evals {
		rows = append(rows, views.EvalRow{ID: e.ID, Candidate: e.Candidate.Shorthand(), State: e.State, Created: whenText(e.CreatedAt),
			Done: e.Progress.Done, Failed: e.Progress.Failed, Total: e.Progress.Total, Finished: e.Finished(),
			Passed: e.Summary != nil && e.Summary.Passed})
	}
	return rows, nil
}

// evalCreate is POST /api/deployments/{id}/evals: the eval form, or a cloudapi.CreateEvalRequest as
// JSON. A started eval opens in the section (its progress polls); a refused form comes back with its
// errors.
func (s *Server) evalCreate(c echo.Context) error {
	ctx := c.Request().Context()
	id := c.Param("id")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	var req cloudapi.CreateEvalRequest
	var form views.EvalForm
	if sentJSON(c) {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	} else {
		form = views.EvalForm{EndpointID: id, Candidate: strings.TrimSpace(c.FormValue("candidate")), Since: c.FormValue("since"),
			Until: c.FormValue("until"), Arm: c.FormValue("arm"), Status: c.FormValue("status"), Limit: c.FormValue("limit"),
			JudgeModel: c.FormValue("judgeModel"), Rubric: c.FormValue("rubric")}
		if form.Models, err = judgeModels(ctx, cl); err != nil {
			return err
		}
		d, err := cl.GetDeployment(ctx, id)
		if err != nil {
			return err
		}
		var fe *fieldError
		if req, fe = evalRequestOf(form, d.Target, time.Now()); fe != nil {
			return evalFormError(c, fe, form)
		}
	}
	e, err := cl.CreateEval(ctx, id, req)
	if err != nil {
		if isHTMX(c) && !sentJSON(c) {
			return evalFormError(c, err, form)
		}
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusAccepted, e)
	}
	d, err := cl.GetDeployment(ctx, id)
	if err != nil {
		return err
	}
	c.QueryParams().Set("eval", e.ID)
	c.QueryParams().Set("candidate", form.Candidate)
	v, err := s.evalsView(c, cl, d)
	if err != nil {
		return err
	}
	retarget(c, "#evals", "outerHTML")
	return renderHTML(c, http.StatusOK, views.EvalsCard(v))
}

// evalRequestOf reads the eval form: the candidate in the CLI's shorthand (checkpoint:<step> keeps the
// deployment's job), the runs' window, arm, status and limit, and the judge.
func evalRequestOf(f views.EvalForm, current cloudapi.Target, now time.Time) (cloudapi.CreateEvalRequest, *fieldError) {
	var req cloudapi.CreateEvalRequest
	if f.Candidate == "" {
		return req, &fieldError{field: "candidate", apiError: badRequest("invalid_target", "Name the candidate target, e.g. base:<model>.")}
	}
	t, err := cloudapi.ParseTarget(f.Candidate, current)
	if err != nil {
		var ce *cloudapi.Error
		msg := err.Error()
		if errors.As(err, &ce) {
			msg = ce.Message
		}
		return req, &fieldError{field: "candidate", apiError: badRequest("invalid_target", msg)}
	}
	req.Candidate = t
	if f.Since != "" {
		h, err := strconv.Atoi(f.Since)
		if err != nil || h <= 0 {
			return req, &fieldError{field: "since", apiError: badRequest("invalid_request", "Choose a window of runs.")}
		}
		since := now.Add(-time.Duration(h) * time.Hour)
		req.Runs.Since = &since
	}
	if f.Until != "" {
		day, err := time.ParseInLocation("2006-01-02", f.Until, time.Local)
		if err != nil {
			return req, &fieldError{field: "until", apiError: badRequest("invalid_request", "Until must be a date.")}
		}
		until := day.AddDate(0, 0, 1)
		req.Runs.Until = &until
	}
	req.Runs.Arm = f.Arm
	if f.Status != "all" {
		req.Runs.Status = "ok"
	}
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n < 1 {
			return req, &fieldError{field: "limit", apiError: badRequest("invalid_request", "At most: a whole number of runs, 1 or more.")}
		}
		req.Runs.Limit = n
	}
	if f.JudgeModel != "" {
		req.Judge = &cloudapi.EvalJudge{Model: f.JudgeModel, Rubric: strings.TrimSpace(f.Rubric)}
	}
	return req, nil
}

// evalFormError sends the eval form back with the error under its field, or above the form.
func evalFormError(c echo.Context, err error, f views.EvalForm) error {
	if !isHTMX(c) {
		var fe *fieldError
		if errors.As(err, &fe) {
			return fe.apiError
		}
		return err
	}
	var fe *fieldError
	status := http.StatusBadRequest
	f.Errors = map[string]string{}
	switch {
	case errors.As(err, &fe) && (fe.field == "candidate" || fe.field == "limit"):
		f.Errors[fe.field] = fe.apiError.Message
		status = fe.apiError.Status
	case errors.As(err, &fe):
		f.Message = fe.apiError.Message
		status = fe.apiError.Status
	default:
		var ce *cloudapi.Error
		if !errors.As(err, &ce) || ce.Status >= 500 {
			return err
		}
		status = ce.Status
		if strings.Contains(ce.Message, "candidate") || ce.Code == "invalid_target" {
			f.Errors["candidate"] = ce.Message
		} else {
			f.Message = ce.Message
		}
	}
	return renderHTML(c, status, views.EvalFormView(f))
}

// evalGet is GET /api/deployments/{id}/evals/{evalId}?verdict=&check=: one eval, its pairs filtered.
func (s *Server) evalGet(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	e, err := cl.GetEval(ctx, c.Param("id"), c.Param("evalId"))
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, e)
	}
	v, err := evalDetail(ctx, cl, e, c.QueryParam("verdict"), c.QueryParam("check"))
	if err != nil {
		return err
	}
	return s.renderEvalDetail(c, cl, v)
}

// renderEvalDetail answers with an eval's view and, out of band, the endpoint's evals (whose row of
// it changes as it runs).
func (s *Server) renderEvalDetail(c echo.Context, cl *cloudapi.Client, v views.EvalDetail) error {
	rows, err := evalRows(c.Request().Context(), cl, v.EndpointID)
	if err != nil {
		return err
	}
	return renderHTML(c, http.StatusOK, templ.Join(views.EvalDetailView(v), views.EvalList(views.Evals{EndpointID: v.EndpointID, List: rows}, true)))
}

// evalExport is GET /api/deployments/{id}/evals/{evalId}/export: the eval detail's link to its judged
// pairs as preference lines (docs/API.md, "Evals"), saved as <evalId>-preferences.jsonl as the API's
// export streams. A plain link cannot send the CSRF header, so it asks for the session cookie, as the
// runs' download does.
func (s *Server) evalExport(c echo.Context) error {
	ctx := c.Request().Context()
	if !s.hasSession(c) {
		return errNoSession
	}
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	x, err := cl.ExportEval(ctx, c.Param("id"), c.Param("evalId"))
	if err != nil {
		return err
	}
	return s.passExport(c, x, c.Param("evalId")+"-preferences.jsonl", nil)
}

// evalCancel is POST /api/deployments/{id}/evals/{evalId}/cancel.
func (s *Server) evalCancel(c echo.Context) error {
	ctx := c.Request().Context()
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	e, err := cl.CancelEval(ctx, c.Param("id"), c.Param("evalId"))
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, e)
	}
	v, err := evalDetail(ctx, cl, e, "", "")
	if err != nil {
		return err
	}
	return s.renderEvalDetail(c, cl, v)
}

// evalDetail is an eval for its view: progress, and once it has a summary, its summary and the pairs
// that pass the filters (verdict: candidate, baseline or tie; check: a check either side failed).
func evalDetail(ctx context.Context, cl *cloudapi.Client, e *cloudapi.Eval, verdict, check string) (views.EvalDetail, error) {
	v := views.EvalDetail{EndpointID: e.DeploymentID, ID: e.ID, Candidate: e.Candidate.Shorthand(), Baseline: e.Baseline.Shorthand(),
		State: e.State, Created: whenText(e.CreatedAt), Error: e.Error, Done: e.Progress.Done, Failed: e.Progress.Failed,
		Total: e.Progress.Total, Finished: e.Finished(), Verdict: verdict, Check: check}
	if e.Summary == nil {
		return v, nil
	}
	v.HasSummary, v.Summary = true, summaryView(e.Summary)
	for _, c := range e.Summary.ByCheck {
		v.CheckNames = append(v.CheckNames, c.Name)
	}
	cursor := ""
	for read := 0; read < evalResultsMax; {
		page, err := cl.EvalResults(ctx, e.DeploymentID, e.ID, cloudapi.ListOptions{Limit: evalResultsPage, Cursor: cursor})
		if err != nil {
			return v, err
		}
		for _, r := range page.Results {
			read++
			v.PairsReplayed++
			if !pairPasses(r, verdict, check) {
				continue
			}
			v.PairsShown++
			if len(v.Pairs) < evalPairsShown {
				v.Pairs = append(v.Pairs, pairView(r))
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	return v, nil
}

func pairPasses(r cloudapi.EvalResult, verdict, check string) bool {
	if verdict != "" && (r.Verdict == nil || *r.Verdict != verdict) {
		return false
	}
	if check == "" {
		return true
	}
	for _, c := range r.Checks {
		if c.Name == check && (!c.Baseline || !c.Candidate) {
			return true
		}
	}
	return false
}

func pairView(r cloudapi.EvalResult) views.EvalPair {
	p := views.EvalPair{RunID: r.RunID, Identical: r.Identical, Error: r.Error, Baseline: r.BaselineAnswer, Candidate: r.CandidateAnswer,
		Diff: views.WordDiff(r.BaselineAnswer, r.CandidateAnswer)}
	if r.Verdict != nil {
		p.Verdict = *r.Verdict
	}
	for _, c := range r.Checks {
		if !c.Baseline {
			p.Failed = append(p.Failed, c.Name+" (recorded)")
		}
		if !c.Candidate {
			p.Failed = append(p.Failed, c.Name+" (candidate)")
		}
	}
	return p
}

func summaryView(s *cloudapi.EvalSummary) views.EvalSummaryView {
	v := views.EvalSummaryView{Pairs: s.Pairs, Identical: s.Identical, Passed: s.Passed, Regressed: s.Regressed}
	regressed := map[string]bool{}
	for _, r := range s.Regressed {
		regressed[r] = true
	}
	for _, c := range s.ByCheck {
		v.Checks = append(v.Checks, views.EvalCheckRow{Name: c.Name, Regressed: regressed[c.Name],
			Baseline:  views.PassRate(c.Baseline.Passed, c.Baseline.Failed),
			Candidate: views.PassRate(c.Candidate.Passed, c.Candidate.Failed)})
	}
	if j := s.Judged; j != nil {
		v.Judged, v.Wins, v.Ties, v.Losses = true, j.Wins, j.Ties, j.Losses
		v.WinRate, v.Low, v.High = views.Percent(j.WinRate), views.Percent(j.WinRateLow), views.Percent(j.WinRateHigh)
	}
	if a := s.Agreement; a != nil && a.Runs > 0 {
		v.Agreement = "the judge agreed with recorded feedback on " + strconv.Itoa(a.Agree) + " of " + strconv.Itoa(a.Runs) + " runs"
	}
	return v
}

// gateText is a deployment's promotion gate in words, "" without one.
func gateText(g *cloudapi.PromoteGate) string {
	if g == nil {
		return ""
	}
	s := "a done eval of the candidate with no check regressed"
	if g.MinWinRate > 0 {
		s = "a done eval of the candidate, judged, whose win rate's lower bound is " + views.Percent(g.MinWinRate) + " or more, with no check regressed"
	}
	if g.MaxAgeHours > 0 {
		s += ", at most " + strconv.FormatFloat(g.MaxAgeHours, 'f', -1, 64) + " h old"
	}
	return s
}
