package core

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/conv"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/fieldmap"
	"github.com/svcdev/svc/internal/runs"
)

// The runs filter's arms (RunFilter.Arm): the export's two, and the shadow copies alone.
const RunArmShadow = "shadow"

// RunStatusRefused filters the runs of calls svc itself turned away with 429 (RunFilter.Status): over a
// rate limit or a token budget, or past their wait for a busy model. Calls refused before an endpoint
// and key are known (401, 404) are no runs; usage counts them.
const RunStatusRefused = "refused"

// RunFilter narrows a run listing (docs/API.md, "Management API", the runs listing); every field is off when zero.
type RunFilter struct {
	// Status is edgemodel.RunStatusOK ("ok"), "error", or "refused" (RunStatusRefused: the calls svc
	// itself turned away with 429: a rate limit, a token budget, a model that stayed busy).
	Status string
	KeyID  string // the key the calls were made with
	// Arm is "primary" (the calls clients made that the primary answered, with the runs of no canary),
	// "canary" (the canary's, its shadow copies included), "shadow" (the shadow copies alone) or "eval"
	// (the replays of evals).
	Arm string
	// Surface is the route the calls came in by: one of runs.Surfaces.
	Surface      string
	Since, Until time.Time // created in [Since, Until)
	// Preview is no filter: it asks for each run's prompt preview (RunSummary.Preview), read from its
	// request, in pages of at most MaxPreviewPageSize runs.
	Preview bool
}

// MaxPreviewPageSize bounds a page of runs with previews: each reads its run's whole request.
const MaxPreviewPageSize = 50

// previewRunes is how long a run's prompt preview is at most.
const previewRunes = 120

// Check refuses a filter value the listing does not know, naming the values it takes.
func (f RunFilter) Check() error {
	switch f.Status {
	case "", runStatusOK, runStatusError, RunStatusRefused:
	default:
		return errorf(edgemodel.CodeInvalidRequest, "status must be %q, %q or %q (got %q)", runStatusOK, runStatusError, RunStatusRefused, f.Status)
	}
	switch f.Arm {
	case "", edgemodel.ArmPrimary, edgemodel.ArmCanary, RunArmShadow, edgemodel.ArmEval:
	default:
		return errorf(edgemodel.CodeInvalidRequest, "arm must be %q, %q, %q or %q (got %q)", edgemodel.ArmPrimary, edgemodel.ArmCanary, RunArmShadow, edgemodel.ArmEval, f.Arm)
	}
	if f.Surface != "" && !slices.Contains(runs.Surfaces, f.Surface) {
		return errorf(edgemodel.CodeInvalidRequest, "surface must be one of %s (got %q)", strings.Join(runs.Surfaces, ", "), f.Surface)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return errorf(edgemodel.CodeInvalidRequest, "since must be before until")
	}
	return nil
}

// The statuses a run is recorded with.
const (
	runStatusOK    = "ok"
	runStatusError = "error"
)

// ListRuns returns a page of a deployment's runs that pass the filter, newest first. The cursor is
// opaque to callers; the next page must be asked with the same filter.
func (s *Service) ListRuns(ctx context.Context, pr Project, deploymentID string, f RunFilter, limit int, cursor string) (*Page[RunSummary], error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	maxLimit := MaxRunPageSize
	if f.Preview {
		maxLimit = MaxPreviewPageSize
	}
	if limit, err = pageLimit(limit, min(DefaultRunPageSize, maxLimit), maxLimit); err != nil {
		return nil, err
	}
	p := dbsqlc.RunListByDeploymentParams{DeploymentID: d.ID, Lim: int64(limit) + 1,
		StatusIs: f.Status, KeyIs: f.KeyID, ArmIs: f.Arm, SurfaceIs: f.Surface}
	if !f.Since.IsZero() {
		p.Since = ms(f.Since)
	}
	if !f.Until.IsZero() {
		p.Until = ms(f.Until)
	}
	if p.CursorAt, p.CursorID, err = decodeCursor(cursor); err != nil {
		return nil, err
	}
	rows, err := s.q.RunListByDeployment(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	page := &Page[RunSummary]{Items: make([]RunSummary, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.NextCursor = encodeCursor(last.CreatedAt, last.ID)
	}
	for i := range rows {
		var r RunSummary
		listedRun.Copy(&r.Run, &rows[i])
		r.Feedback = feedbackOf(rows[i].FeedbackScore, rows[i].FeedbackComment, rows[i].FeedbackAt)
		if f.Preview {
			req, err := s.q.RunRequest(ctx, s.db, dbsqlc.RunRequestParams{ID: r.ID, DeploymentID: d.ID})
			if err = db.Map(err); err != nil && !errors.Is(err, db.ErrNotFound) { // swept meanwhile: no preview
				return nil, err
			}
			r.Preview = conv.Preview([]byte(req), previewRunes)
		}
		page.Items = append(page.Items, r)
	}
	return page, nil
}

// GetRun returns one run with its request and response.
func (s *Service) GetRun(ctx context.Context, pr Project, deploymentID, runID string) (*Run, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	r, err := s.q.RunGet(ctx, s.db, dbsqlc.RunGetParams{ID: runID, DeploymentID: d.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, notFound("run")
		}
		return nil, err
	}
	out := &Run{}
	storedRun.Copy(&out.Run, &r)
	out.Feedback = feedbackOf(r.FeedbackScore, r.FeedbackComment, r.FeedbackAt)
	return out, nil
}

// A run as the store lists it and as it reads one, in the edge's shape (runs.Run). The feedback's
// columns are read into Feedback; UsageOnly is never stored.
var (
	listedRun = fieldmap.New[runs.Run, dbsqlc.RunListByDeploymentRow]()
	storedRun = fieldmap.New[runs.Run, dbsqlc.Run]()
)

// feedbackOf is a run's feedback, nil when none was given.
func feedbackOf(score sql.NullInt64, comment string, at sql.NullInt64) *Feedback {
	if !score.Valid {
		return nil
	}
	return &Feedback{Score: int(score.Int64), Comment: comment, At: fromMs(at.Int64)}
}
