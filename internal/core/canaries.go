package core

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// Canary history (docs/API.md, "Canary history"): every canary a deployment had, with its outcome and
// its compare, which counts only the calls made under its id (the runs of both its arms record it).

// CanaryRecord is one canary of a deployment's history: the canary as last set, when and by whom it
// started and ended, its outcome (CanaryRunning, CanaryPromoted, CanaryEnded, CanaryReplaced) and its
// compare: an entry per arm and target with its totals (the buckets left out).
type CanaryRecord struct {
	Canary
	StartedBy string
	EndedAt   *time.Time
	EndedBy   string
	Outcome   string
	// OverrideReason is why a promotion passed over the promotion gate ("" when it did not).
	OverrideReason string
	Compare        []ArmUsage
}

func canaryRecordOf(c dbsqlc.Canary) CanaryRecord {
	r := CanaryRecord{
		Canary: Canary{ID: c.ID, Target: edgemodel.Target{Kind: c.Kind, JobID: c.JobID.String, Step: c.Step.Int64, Model: c.Model.String},
			Percent: int(c.Percent), Mode: c.Mode, StartedAt: fromMs(c.StartedAt)},
		StartedBy: c.StartedBy, EndedBy: c.EndedBy, Outcome: c.Outcome, OverrideReason: c.OverrideReason,
	}
	if c.Outcome == "" {
		r.Outcome = CanaryRunning
	}
	if c.EndedAt.Valid {
		t := fromMs(c.EndedAt.Int64)
		r.EndedAt = &t
	}
	return r
}

// ListCanaries returns a deployment's canaries, the newest first, each with its compare.
func (s *Service) ListCanaries(ctx context.Context, pr Project, deploymentID string) ([]CanaryRecord, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.CanaryList(ctx, s.db, d.ID)
	if err != nil {
		return nil, err
	}
	out := make([]CanaryRecord, 0, len(rows))
	for _, row := range rows {
		r := canaryRecordOf(row)
		if r.Compare, err = s.canaryCompare(ctx, d.ID, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// GetCanary returns one canary of a deployment with its compare; 404 not_found for an id the
// deployment never had.
func (s *Service) GetCanary(ctx context.Context, pr Project, deploymentID, canaryID string) (*CanaryRecord, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	row, err := s.q.CanaryGet(ctx, s.db, dbsqlc.CanaryGetParams{ID: canaryID, DeploymentID: d.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) || errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("canary")
		}
		return nil, err
	}
	r := canaryRecordOf(row)
	if r.Compare, err = s.canaryCompare(ctx, d.ID, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// canaryCompare sums the arm rows of one canary, from the hour it started to now (its calls end when
// it does, but shadow copies still draining are its own): its totals per arm and target.
func (s *Service) canaryCompare(ctx context.Context, deploymentID string, c *CanaryRecord) ([]ArmUsage, error) {
	all := UsageRange{From: c.StartedAt.Truncate(time.Hour), To: s.now().UTC().Truncate(time.Hour).Add(time.Hour)}
	if !all.To.After(all.From) {
		all.To = all.From.Add(time.Hour)
	}
	all.Step = all.To.Sub(all.From) // one bucket: the totals are what a compare shows
	arms, err := s.armUsage(ctx, deploymentID, c.ID, all)
	if err != nil {
		return nil, err
	}
	for i := range arms {
		arms[i].Buckets = nil
	}
	return arms, nil
}
