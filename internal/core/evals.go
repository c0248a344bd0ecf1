package core

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/evalscore"
)

// Replay evals (docs/API.md, "Evals"): an eval replays a deployment's stored runs against a candidate
// target. Creating one writes the eval and one work item per source run in one transaction; the
// control plane's eval workers (evalworker.go) replay the items, and the summary is written when the
// last item is done.

// Eval states.
const (
	EvalQueued   = "queued"
	EvalRunning  = "running"
	EvalDone     = "done"
	EvalFailed   = "failed"
	EvalCanceled = "canceled"
)

// Bounds of an eval.
const (
	DefaultEvalConcurrency = 4
	MaxEvalConcurrency     = 64
	DefaultEvalLimit       = 100
	MaxEvalLimit           = 10000
	MaxEvalRubric          = 4000
	// defaultMinWinRate is the win rate's lower bound a judged eval needs to pass without a gate.
	defaultMinWinRate = 0.5
)

// EvalRuns selects the stored runs an eval replays, as the export's filters do (ValidateExport):
// created in [Since, Until), of an arm, complete answers (status ok) or cut ones too (all), scored
// MinScore or more; at most Limit of them, the oldest first.
type EvalRuns struct {
	Since    *time.Time `json:"since,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	Arm      string     `json:"arm,omitempty"`
	Status   string     `json:"status,omitempty"`
	MinScore *int       `json:"minScore,omitempty"`
	Limit    int        `json:"limit"`
}

// EvalJudge is the model served by svc that compares each pair, and its rubric.
type EvalJudge struct {
	Model  string
	Rubric string
}

// NewEval asks for an eval.
type NewEval struct {
	Candidate   edgemodel.Target
	Runs        EvalRuns
	Judge       *EvalJudge
	Concurrency int
}

// EvalProgress counts an eval's items: replayed (Done) and given up (Failed) of Total.
type EvalProgress struct {
	Total, Done, Failed int
}

// Eval is a replay eval as the API shows it.
type Eval struct {
	ID           string
	DeploymentID string
	State        string
	Candidate    edgemodel.Target
	Baseline     edgemodel.Target
	Runs         EvalRuns
	Judge        *EvalJudge
	Concurrency  int
	Progress     EvalProgress
	Summary      *evalscore.Summary
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	Error        string
}

// EvalResult is one replayed run: the recorded answer and the candidate's, checks and verdict; Error
// says why a run could not be replayed.
type EvalResult struct {
	RunID           string            `json:"-"`
	EvalRunID       string            `json:"-"`
	Identical       bool              `json:"identical"`
	Checks          []evalscore.Check `json:"checks"`
	Verdict         evalscore.Verdict `json:"verdict,omitempty"`
	Feedback        int               `json:"feedback,omitempty"`
	BaselineAnswer  string            `json:"baselineAnswer"`
	CandidateAnswer string            `json:"candidateAnswer"`
	Error           string            `json:"-"`
}

// ValidateEval checks an eval's request, naming the field at fault, and fills in its defaults.
func ValidateEval(req *NewEval, now time.Time) error {
	if req.Candidate.Kind == "" || req.Candidate.Kind == edgemodel.TargetMultiModel {
		return errorf(edgemodel.CodeInvalidRequest, "candidate: an eval replays runs against one target (final_adapter, checkpoint or base_model)")
	}
	switch {
	case req.Concurrency == 0:
		req.Concurrency = DefaultEvalConcurrency
	case req.Concurrency < 1 || req.Concurrency > MaxEvalConcurrency:
		return errorf(edgemodel.CodeInvalidRequest, "concurrency must be between 1 and %d (got %d)", MaxEvalConcurrency, req.Concurrency)
	}
	switch {
	case req.Runs.Limit == 0:
		req.Runs.Limit = DefaultEvalLimit
	case req.Runs.Limit < 1 || req.Runs.Limit > MaxEvalLimit:
		return errorf(edgemodel.CodeInvalidRequest, "runs.limit must be between 1 and %d (got %d)", MaxEvalLimit, req.Runs.Limit)
	}
	ex := req.Runs.export()
	if err := ValidateExport(&ex, now); err != nil {
		return errorf(edgemodel.CodeInvalidRequest, "runs.%s", err.(*edgemodel.Error).Message)
	}
	req.Runs.Status = ex.Status
	if j := req.Judge; j != nil {
		if j.Model == "" {
			return errorf(edgemodel.CodeInvalidRequest, "judge.model is required: a model id svc serves")
		}
		if len(j.Rubric) > MaxEvalRubric {
			return errorf(edgemodel.CodeInvalidRequest, "judge.rubric must be at most %d characters", MaxEvalRubric)
		}
	}
	return nil
}

// export is the export request whose runs the eval replays.
func (r EvalRuns) export() ExportRequest {
	ex := ExportRequest{Format: ExportChat, Arm: r.Arm, Status: r.Status, MinScore: r.MinScore}
	if r.Since != nil {
		ex.Since = *r.Since
	}
	if r.Until != nil {
		ex.Until = *r.Until
	}
	return ex
}

// CreateEval starts an eval of a deployment's stored runs against a candidate target: the runs the
// filter selects that can be replayed (dataset.Check: a transcript, an answer) become its items, in one
// transaction with the eval, which the workers then take (queued).
func (s *Service) CreateEval(ctx context.Context, pr Project, deploymentID string, req NewEval, by string) (*Eval, error) {
	now := s.now()
	if err := ValidateEval(&req, now); err != nil {
		return nil, err
	}
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	if d.TargetKind == edgemodel.TargetMultiModel {
		return nil, errorf(edgemodel.CodeInvalidRequest, "evals replay the runs of a deployment with one target; this one is multi_model")
	}
	if _, err := s.resolveTarget(ctx, s.db, pr.ID, req.Candidate); err != nil {
		return nil, prefixed("candidate", err)
	}
	if req.Judge != nil {
		if _, err := s.resolveTarget(ctx, s.db, pr.ID, edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: req.Judge.Model}); err != nil {
			return nil, prefixed("judge.model", err)
		}
	}
	ids, err := s.evalSources(ctx, d.ID, req.Runs)
	if err != nil {
		return nil, err
	}
	candidate, _ := json.Marshal(req.Candidate)
	baseline, _ := json.Marshal(targetOf(d))
	filter, _ := json.Marshal(req.Runs)
	e := dbsqlc.EvalCreateParams{ID: newID("eval"), DeploymentID: d.ID, Candidate: string(candidate), Baseline: string(baseline),
		Filter: string(filter), Concurrency: int64(req.Concurrency), CreatedBy: by, CreatedAt: ms(now)}
	if req.Judge != nil {
		e.JudgeModel, e.JudgeRubric = req.Judge.Model, req.Judge.Rubric
	}
	err = db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		if err := s.q.EvalCreate(ctx, tx, e); err != nil {
			return err
		}
		for i, id := range ids {
			if err := s.q.EvalItemAdd(ctx, tx, dbsqlc.EvalItemAddParams{EvalID: e.ID, SourceRunID: id, Seq: int64(i + 1)}); err != nil {
				return err
			}
		}
		return s.q.EvalSetTotal(ctx, tx, dbsqlc.EvalSetTotalParams{Total: int64(len(ids)), ID: e.ID})
	})
	if err != nil {
		return nil, err
	}
	select {
	case s.evalCreated <- struct{}{}: // this process's worker takes it at once
	default:
	}
	return s.GetEval(ctx, pr, deploymentID, e.ID)
}

// prefixed names the field a target's error is about.
func prefixed(field string, err error) error {
	var e *edgemodel.Error
	if errors.As(err, &e) {
		return &edgemodel.Error{Code: e.Code, Message: field + ": " + e.Message}
	}
	return err
}

// evalSources are the ids of the runs an eval replays: the export's page of runs (RunExportPage, the
// same filters), oldest first, those it could write (an answer to compare with) up to the limit.
func (s *Service) evalSources(ctx context.Context, deploymentID string, r EvalRuns) ([]string, error) {
	ex := r.export()
	if err := ValidateExport(&ex, s.now()); err != nil {
		return nil, err
	}
	opt := dataset.Options{Cut: ex.Status == ExportStatusAll}
	p := dbsqlc.RunExportPageParams{DeploymentID: deploymentID, Since: ms(ex.Since), Until: ms(ex.Until),
		Now: sql.NullInt64{Int64: ms(s.now()), Valid: true}, Arm: ex.Arm, Lim: exportPage, CursorAt: ms(ex.Since) - 1}
	if ex.MinScore != nil {
		p.HasMinScore, p.MinScore = 1, int64(*ex.MinScore)
	}
	var ids []string
	for len(ids) < r.Limit {
		rows, err := s.q.RunExportPage(ctx, s.db, p)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if dataset.Check(dataset.Run{ID: row.ID, Status: row.Status, Request: []byte(row.Request), Response: []byte(row.Response)}, opt) == "" {
				ids = append(ids, row.ID)
				if len(ids) == r.Limit {
					break
				}
			}
		}
		if len(rows) < exportPage {
			break
		}
		last := rows[len(rows)-1]
		p.CursorAt, p.CursorID = last.CreatedAt, last.ID
	}
	return ids, nil
}

// GetEval returns an eval with its progress.
func (s *Service) GetEval(ctx context.Context, pr Project, deploymentID, evalID string) (*Eval, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	row, err := s.q.EvalGet(ctx, s.db, dbsqlc.EvalGetParams{ID: evalID, DeploymentID: d.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, errorf(edgemodel.CodeNotFound, "eval %q not found", evalID)
		}
		return nil, err
	}
	return s.evalOut(ctx, row)
}

func (s *Service) evalOut(ctx context.Context, row dbsqlc.Eval) (*Eval, error) {
	e := &Eval{ID: row.ID, DeploymentID: row.DeploymentID, State: row.State, Concurrency: int(row.Concurrency),
		CreatedAt: fromMs(row.CreatedAt), StartedAt: fromNullMs(row.StartedAt), FinishedAt: fromNullMs(row.FinishedAt), Error: row.Error}
	_ = json.Unmarshal([]byte(row.Candidate), &e.Candidate)
	_ = json.Unmarshal([]byte(row.Baseline), &e.Baseline)
	_ = json.Unmarshal([]byte(row.Filter), &e.Runs)
	if row.JudgeModel != "" {
		e.Judge = &EvalJudge{Model: row.JudgeModel, Rubric: row.JudgeRubric}
	}
	if row.Summary.Valid {
		e.Summary = &evalscore.Summary{}
		if err := json.Unmarshal([]byte(row.Summary.String), e.Summary); err != nil {
			return nil, fmt.Errorf("eval %s: summary: %w", row.ID, err)
		}
	}
	p, err := s.q.EvalProgress(ctx, s.db, row.ID)
	if err != nil {
		return nil, err
	}
	e.Progress = EvalProgress{Total: int(row.Total), Done: int(p.Done), Failed: int(p.Failed)}
	return e, nil
}

// ListEvals returns a page of a deployment's evals, newest first.
func (s *Service) ListEvals(ctx context.Context, pr Project, deploymentID string, limit int, cursor string) (*Page[Eval], error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	lim, err := PageLimit(limit)
	if err != nil {
		return nil, err
	}
	at, id, err := decodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.EvalPage(ctx, s.db, dbsqlc.EvalPageParams{DeploymentID: d.ID, CursorAt: at, CursorID: id, Lim: int64(lim + 1)})
	if err != nil {
		return nil, err
	}
	out := &Page[Eval]{Items: []Eval{}}
	if len(rows) > lim {
		rows = rows[:lim]
		last := rows[lim-1]
		out.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	for _, row := range rows {
		e, err := s.evalOut(ctx, row)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *e)
	}
	return out, nil
}

// EvalResults returns a page of an eval's results (the items done or given up), in their order; the
// cursor is the position of the last of the previous page.
func (s *Service) EvalResults(ctx context.Context, pr Project, deploymentID, evalID string, limit int, cursor string) (*Page[EvalResult], error) {
	e, err := s.GetEval(ctx, pr, deploymentID, evalID)
	if err != nil {
		return nil, err
	}
	lim, err := PageLimit(limit)
	if err != nil {
		return nil, err
	}
	var after int64
	if cursor != "" {
		if after, err = strconv.ParseInt(cursor, 10, 64); err != nil || after < 0 {
			return nil, errorf(edgemodel.CodeInvalidRequest, "cursor is not valid; pass the nextCursor of a previous page")
		}
	}
	rows, err := s.q.EvalItemPage(ctx, s.db, dbsqlc.EvalItemPageParams{EvalID: e.ID, After: after, Lim: int64(lim + 1)})
	if err != nil {
		return nil, err
	}
	out := &Page[EvalResult]{Items: []EvalResult{}}
	if len(rows) > lim {
		rows = rows[:lim]
		out.NextCursor = strconv.FormatInt(rows[lim-1].Seq, 10)
	}
	for _, row := range rows {
		out.Items = append(out.Items, resultOf(row))
	}
	return out, nil
}

func resultOf(row dbsqlc.EvalItemPageRow) EvalResult {
	var r EvalResult
	if row.Result.Valid {
		_ = json.Unmarshal([]byte(row.Result.String), &r)
	}
	r.RunID, r.EvalRunID, r.Error = row.SourceRunID, row.EvalRunID, row.Error
	if r.Checks == nil {
		r.Checks = []evalscore.Check{}
	}
	return r
}

// CancelEval stops an open eval: no item is taken any more; replays under way finish. An eval that
// ended already is returned as it is.
func (s *Service) CancelEval(ctx context.Context, pr Project, deploymentID, evalID string) (*Eval, error) {
	e, err := s.GetEval(ctx, pr, deploymentID, evalID)
	if err != nil {
		return nil, err
	}
	if _, err := s.q.EvalEnd(ctx, s.db, dbsqlc.EvalEndParams{State: EvalCanceled, ID: e.ID,
		Now: sql.NullInt64{Int64: ms(s.now()), Valid: true}}); err != nil {
		return nil, err
	}
	return s.GetEval(ctx, pr, deploymentID, evalID)
}

// evalRunID is the id of an item's eval run: made of the eval and the source run, so that a replay a
// replica recorded before it died is found again rather than made twice (the run id's form, runs.NewID:
// the eval's creation time, then 10 base62 characters of a hash).
func evalRunID(evalID string, createdAt int64, sourceRunID string) string {
	h := sha256.Sum256([]byte(evalID + "\x00" + sourceRunID))
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := []byte(fmt.Sprintf("run_%011x", createdAt))
	for i := range 10 {
		b = append(b, base62[int(h[i])%62])
	}
	return string(b)
}
