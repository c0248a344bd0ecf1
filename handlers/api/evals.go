package api

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/evalscore"
	"github.com/svcdev/svc/internal/strictjson"
)

// Replay evals and the promotion gate (docs/API.md, "Evals").

// gateNullable: "promoteGate": null removes a deployment's promotion gate.
const gateNullable = "promoteGate"

type createEvalBody struct {
	Candidate *targetBody  `json:"candidate"`
	Runs      evalRunsBody `json:"runs"`
	Judge     *struct {
		Model  string `json:"model"`
		Rubric string `json:"rubric"`
	} `json:"judge"`
	Concurrency int `json:"concurrency"`
}

type evalRunsBody struct {
	Since    *time.Time `json:"since"`
	Until    *time.Time `json:"until"`
	Arm      string     `json:"arm"`
	Status   string     `json:"status"`
	MinScore *int       `json:"minScore"`
	Limit    int        `json:"limit"`
}

func (h *Handler) evalCreate(c echo.Context) error {
	var b createEvalBody
	if err := decode(c, &b); err != nil {
		return err
	}
	if b.Candidate == nil {
		return &strictjson.Error{Field: "candidate", Reason: `is required: the target to replay the runs against, such as {"kind": "checkpoint", "jobId": "...", "step": 400}`}
	}
	req := core.NewEval{Candidate: b.Candidate.core(), Concurrency: b.Concurrency,
		Runs: core.EvalRuns{Arm: b.Runs.Arm, Status: b.Runs.Status, MinScore: b.Runs.MinScore, Limit: b.Runs.Limit,
			Since: b.Runs.Since, Until: b.Runs.Until}}
	if b.Judge != nil {
		req.Judge = &core.EvalJudge{Model: b.Judge.Model, Rubric: b.Judge.Rubric}
	}
	e, err := h.svc.CreateEval(c.Request().Context(), project(c), c.Param("id"), req, principal(c).IdentityID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, evalWire(e))
}

func (h *Handler) evalList(c echo.Context) error {
	limit, cursor, err := pageQuery(c)
	if err != nil {
		return err
	}
	page, err := h.svc.ListEvals(c.Request().Context(), project(c), c.Param("id"), limit, cursor)
	if err != nil {
		return err
	}
	out := cloudapi.EvalPage{Evals: make([]cloudapi.Eval, len(page.Items)), NextCursor: page.NextCursor}
	for i := range page.Items {
		out.Evals[i] = evalWire(&page.Items[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) evalGet(c echo.Context) error {
	e, err := h.svc.GetEval(c.Request().Context(), project(c), c.Param("id"), c.Param("evalId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, evalWire(e))
}

func (h *Handler) evalResults(c echo.Context) error {
	limit, cursor, err := pageQuery(c)
	if err != nil {
		return err
	}
	page, err := h.svc.EvalResults(c.Request().Context(), project(c), c.Param("id"), c.Param("evalId"), limit, cursor)
	if err != nil {
		return err
	}
	out := cloudapi.EvalResultPage{Results: make([]cloudapi.EvalResult, len(page.Items)), NextCursor: page.NextCursor}
	for i, r := range page.Items {
		out.Results[i] = evalResultWire(r)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) evalCancel(c echo.Context) error {
	e, err := h.svc.CancelEval(c.Request().Context(), project(c), c.Param("id"), c.Param("evalId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, evalWire(e))
}

func evalWire(e *core.Eval) cloudapi.Eval {
	out := cloudapi.Eval{ID: e.ID, DeploymentID: e.DeploymentID, State: e.State, Candidate: targetWire(e.Candidate),
		Baseline: targetWire(e.Baseline), Concurrency: e.Concurrency,
		Runs:      cloudapi.EvalRuns{Since: e.Runs.Since, Until: e.Runs.Until, Arm: e.Runs.Arm, Status: e.Runs.Status, MinScore: e.Runs.MinScore, Limit: e.Runs.Limit},
		Progress:  cloudapi.EvalProgress{Total: e.Progress.Total, Done: e.Progress.Done, Failed: e.Progress.Failed},
		CreatedAt: e.CreatedAt, StartedAt: e.StartedAt, FinishedAt: e.FinishedAt, Error: e.Error}
	if e.Judge != nil {
		out.Judge = &cloudapi.EvalJudge{Model: e.Judge.Model, Rubric: e.Judge.Rubric}
	}
	if s := e.Summary; s != nil {
		sum := &cloudapi.EvalSummary{Pairs: s.Pairs, Identical: s.Identical, Checks: sideChecksWire(s.Checks),
			ByCheck: make([]cloudapi.EvalNamedCheck, len(s.ByCheck)), Regressed: append([]string{}, s.Regressed...), Passed: s.Passed}
		for i, n := range s.ByCheck {
			sum.ByCheck[i] = cloudapi.EvalNamedCheck{Name: n.Name, EvalSideChecks: sideChecksWire(n.SideChecks)}
		}
		if j := s.Judged; j != nil {
			sum.Judged = &cloudapi.EvalJudged{Wins: j.Wins, Ties: j.Ties, Losses: j.Losses, WinRate: j.WinRate, WinRateLow: j.WinRateLow, WinRateHigh: j.WinRateHigh}
		}
		if a := s.Agreement; a != nil {
			sum.Agreement = &cloudapi.EvalAgreement{Runs: a.Runs, Agree: a.Agree}
		}
		out.Summary = sum
	}
	return out
}

func sideChecksWire(s evalscore.SideChecks) cloudapi.EvalSideChecks {
	return cloudapi.EvalSideChecks{Baseline: cloudapi.EvalCheckCount(s.Baseline), Candidate: cloudapi.EvalCheckCount(s.Candidate)}
}

func evalResultWire(r core.EvalResult) cloudapi.EvalResult {
	out := cloudapi.EvalResult{RunID: r.RunID, EvalRunID: r.EvalRunID, Identical: r.Identical, Checks: make([]cloudapi.EvalCheck, len(r.Checks)),
		BaselineAnswer: r.BaselineAnswer, CandidateAnswer: r.CandidateAnswer, Error: r.Error}
	for i, ch := range r.Checks {
		out.Checks[i] = cloudapi.EvalCheck(ch)
	}
	if r.Verdict != "" {
		v := string(r.Verdict)
		out.Verdict = &v
	}
	return out
}

// gateBody is the "promoteGate" field of a PATCH: absent leaves the gate, null removes it, an object
// {minWinRate, maxAgeHours} sets it.
type gateBody struct {
	change *core.GateChange
}

func (b *gateBody) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		b.change = &core.GateChange{}
		return nil
	}
	var v struct {
		MinWinRate  *float64 `json:"minWinRate"`
		MaxAgeHours *float64 `json:"maxAgeHours"`
	}
	if err := strictjson.Decode(data, &v); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Field != "" {
			return &strictjson.Error{Field: "promoteGate." + se.Field, Reason: se.Reason}
		}
		return &strictjson.Error{Field: "promoteGate", Reason: `must be an object such as {"minWinRate": 0.5, "maxAgeHours": 72}, or null: ` + err.Error()}
	}
	if v.MinWinRate == nil {
		return &strictjson.Error{Field: "promoteGate.minWinRate", Reason: "is required: a number from 0 to 1"}
	}
	g := evalscore.Gate{MinWinRate: *v.MinWinRate}
	if v.MaxAgeHours != nil {
		g.MaxAgeHours = *v.MaxAgeHours
	}
	b.change = &core.GateChange{Gate: &g}
	return nil
}

// overrideBody is {"override": {"reason": "…"}}, which promotes past the gate.
type overrideBody struct {
	Reason string `json:"reason"`
}

func (o *overrideBody) core(by string) *core.Override {
	if o == nil {
		return nil
	}
	return &core.Override{Reason: o.Reason, By: by}
}
