package cloudapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Eval states (docs/API.md, "Evals").
const (
	EvalQueued   = "queued"
	EvalRunning  = "running"
	EvalDone     = "done"
	EvalFailed   = "failed"
	EvalCanceled = "canceled"
)

// ArmEval is the arm of the runs an eval's replays record.
const ArmEval = "eval"

// The verdicts of a judged pair.
const (
	VerdictCandidate = "candidate"
	VerdictBaseline  = "baseline"
	VerdictTie       = "tie"
)

// DefaultEvalConcurrency is the replays an eval has under way at once when it names none.
const DefaultEvalConcurrency = 4

// Eval is a replay eval: a deployment's stored runs (Runs) sent again to a Candidate target and
// compared with what the Baseline target answered (docs/API.md, "Evals").
type Eval struct {
	ID           string       `json:"id"`
	DeploymentID string       `json:"deploymentId"`
	State        string       `json:"state"` // EvalQueued, EvalRunning, EvalDone, EvalFailed or EvalCanceled
	Candidate    Target       `json:"candidate"`
	Baseline     Target       `json:"baseline"`
	Runs         EvalRuns     `json:"runs"`
	Judge        *EvalJudge   `json:"judge"`
	Concurrency  int          `json:"concurrency"`
	Progress     EvalProgress `json:"progress"`
	Summary      *EvalSummary `json:"summary"` // null until done
	CreatedAt    time.Time    `json:"createdAt"`
	StartedAt    *time.Time   `json:"startedAt"`
	FinishedAt   *time.Time   `json:"finishedAt"`
	Error        string       `json:"error,omitempty"` // why a failed eval failed
}

// Finished reports whether the eval has ended (done, failed or canceled).
func (e *Eval) Finished() bool {
	return e.State == EvalDone || e.State == EvalFailed || e.State == EvalCanceled
}

// EvalRuns selects the stored runs an eval replays: created in [Since, Until), of an arm and status
// (as the run listing's filters), scored MinScore or more (a run without feedback counts as 0), at
// most Limit of them, the newest first (default 100, at most 10,000).
type EvalRuns struct {
	Since    *time.Time `json:"since,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	Arm      string     `json:"arm,omitempty"`
	Status   string     `json:"status,omitempty"`
	MinScore *int       `json:"minScore,omitempty"`
	Limit    int        `json:"limit,omitempty"`
}

// EvalJudge is a model served by svc that compares each pair, with the rubric it is given.
type EvalJudge struct {
	Model  string `json:"model"`
	Rubric string `json:"rubric"`
}

// EvalProgress counts an eval's source runs: replayed (Done) and given up (Failed) of Total.
type EvalProgress struct {
	Total  int `json:"total"`
	Done   int `json:"done"`
	Failed int `json:"failed"`
}

// EvalSummary is an eval's outcome once done: checks summed over both sides (Checks) and per check
// (ByCheck), the checks the candidate regressed on, the judge's tally and its agreement with recorded
// feedback (null without a judge), and whether it passed (docs/API.md, "Evals").
type EvalSummary struct {
	Pairs     int              `json:"pairs"`
	Identical int              `json:"identical"`
	Checks    EvalSideChecks   `json:"checks"`
	ByCheck   []EvalNamedCheck `json:"byCheck"`
	Regressed []string         `json:"regressed"`
	Judged    *EvalJudged      `json:"judged"`
	Agreement *EvalAgreement   `json:"agreement"`
	Passed    bool             `json:"passed"`
}

// EvalNamedCheck is one check's outcomes on both sides.
type EvalNamedCheck struct {
	Name string `json:"name"`
	EvalSideChecks
}

// EvalSideChecks are the checks passed and failed by each side over every pair.
type EvalSideChecks struct {
	Baseline  EvalCheckCount `json:"baseline"`
	Candidate EvalCheckCount `json:"candidate"`
}

// EvalCheckCount counts checks passed and failed.
type EvalCheckCount struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// EvalJudged is the judge's tally from the candidate's side, with the 95% Wilson interval of its win
// rate (ties counted as half a win).
type EvalJudged struct {
	Wins        int     `json:"wins"`
	Ties        int     `json:"ties"`
	Losses      int     `json:"losses"`
	WinRate     float64 `json:"winRate"`
	WinRateLow  float64 `json:"winRateLow"`
	WinRateHigh float64 `json:"winRateHigh"`
}

// EvalAgreement is how often the judge agreed with the feedback recorded on the source runs.
type EvalAgreement struct {
	Runs  int `json:"runs"`
	Agree int `json:"agree"`
}

// EvalResult is one replayed run: its recorded answer and the candidate's, the checks of both, and the
// judge's verdict (null without a judge).
type EvalResult struct {
	RunID           string      `json:"runId"`
	EvalRunID       string      `json:"evalRunId"`
	Identical       bool        `json:"identical"`
	Checks          []EvalCheck `json:"checks"`
	Verdict         *string     `json:"verdict"`
	BaselineAnswer  string      `json:"baselineAnswer"`
	CandidateAnswer string      `json:"candidateAnswer"`
	Error           string      `json:"error,omitempty"` // why the run could not be replayed
}

// EvalCheck is one check on both answers of a pair.
type EvalCheck struct {
	Name      string `json:"name"`
	Baseline  bool   `json:"baseline"`
	Candidate bool   `json:"candidate"`
}

// CreateEvalRequest is the body of CreateEval.
type CreateEvalRequest struct {
	Candidate   Target     `json:"candidate"`
	Runs        EvalRuns   `json:"runs"`
	Judge       *EvalJudge `json:"judge,omitempty"`
	Concurrency int        `json:"concurrency,omitempty"`
}

// EvalPage is one page of a deployment's evals, newest first; NextCursor is empty on the last page.
type EvalPage struct {
	Evals      []Eval `json:"evals"`
	NextCursor string `json:"nextCursor"`
}

// EvalResultPage is one page of an eval's results, in the order the runs were selected.
type EvalResultPage struct {
	Results    []EvalResult `json:"results"`
	NextCursor string       `json:"nextCursor"`
}

// PromoteGate is a deployment's promotion gate: a promote needs a done eval of the candidate newer
// than MaxAgeHours whose win rate's lower bound is MinWinRate or more, with no check regression.
type PromoteGate struct {
	MinWinRate  float64 `json:"minWinRate"`
	MaxAgeHours float64 `json:"maxAgeHours"`
}

// GateUpdate is the promoteGate field of an UpdateDeploymentRequest: Gate sets one, Remove removes it
// ("promoteGate": null); the zero value leaves the gate as it is.
type GateUpdate struct {
	Gate   *PromoteGate
	Remove bool
}

// IsZero reports whether the update leaves the gate (the field is then left out).
func (u GateUpdate) IsZero() bool { return u.Gate == nil && !u.Remove }

// MarshalJSON writes the gate, or null to remove it.
func (u GateUpdate) MarshalJSON() ([]byte, error) {
	if u.Gate == nil {
		return []byte("null"), nil
	}
	return json.Marshal(u.Gate)
}

// Override promotes past the gate; the reason is recorded with who and when.
type Override struct {
	Reason string `json:"reason"`
}

// CreateEval starts a replay eval of a deployment's stored runs against a candidate target (202: it
// runs in the background; GetEval follows it).
func (c *Client) CreateEval(ctx context.Context, deploymentID string, req CreateEvalRequest) (*Eval, error) {
	p, err := c.projectPath("deployments", deploymentID, "evals")
	if err != nil {
		return nil, err
	}
	var out Eval
	if err := c.do(ctx, http.MethodPost, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListEvals lists a deployment's evals, newest first.
func (c *Client) ListEvals(ctx context.Context, deploymentID string, opts ListOptions) (*EvalPage, error) {
	p, err := c.projectPath("deployments", deploymentID, "evals")
	if err != nil {
		return nil, err
	}
	var out EvalPage
	if err := c.do(ctx, http.MethodGet, p, pageQuery(opts.Limit, opts.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetEval returns one eval with its progress and, once done, its summary.
func (c *Client) GetEval(ctx context.Context, deploymentID, evalID string) (*Eval, error) {
	p, err := c.projectPath("deployments", deploymentID, "evals", evalID)
	if err != nil {
		return nil, err
	}
	var out Eval
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EvalResults returns a page of an eval's results (the runs replayed so far).
func (c *Client) EvalResults(ctx context.Context, deploymentID, evalID string, opts ListOptions) (*EvalResultPage, error) {
	p, err := c.projectPath("deployments", deploymentID, "evals", evalID, "results")
	if err != nil {
		return nil, err
	}
	var out EvalResultPage
	if err := c.do(ctx, http.MethodGet, p, pageQuery(opts.Limit, opts.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelEval stops an eval: no more of its runs are replayed; the replays under way finish.
func (c *Client) CancelEval(ctx context.Context, deploymentID, evalID string) (*Eval, error) {
	p, err := c.projectPath("deployments", deploymentID, "evals", evalID, "cancel")
	if err != nil {
		return nil, err
	}
	var out Eval
	if err := c.do(ctx, http.MethodPost, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PromoteCanaryOverride promotes a deployment's canary past its promotion gate, recording why.
func (c *Client) PromoteCanaryOverride(ctx context.Context, deploymentID, reason string) (*Deployment, error) {
	p, err := c.projectPath("deployments", deploymentID, "canary", "promote")
	if err != nil {
		return nil, err
	}
	var out Deployment
	body := struct {
		Override Override `json:"override"`
	}{Override{Reason: reason}}
	if err := c.do(ctx, http.MethodPost, p, nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// pageQuery is the query of a paged listing.
func pageQuery(limit int, cursor string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}
