package core

import (
	"context"
	"database/sql"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// Canaries (docs/API.md, "Canary"): a deployment may serve a second target to a
// share of its sessions (split) or to copies of its calls (shadow), and promote it to be the target in
// one change. Which arm a session gets is the data plane's pure rule, edgemodel.SessionOf and
// edgemodel.ArmOf (the edge links no core); the rules of setting and promoting one are here.

// Canary is a deployment's second target: Percent (1-99) of its sessions in mode split, a copy of every
// call in mode shadow (whose Percent, 0 when left out, decides nothing). A canary set has an ID and a StartedAt (read back; ignored in a change): its
// compare counts the calls made since, under that id.
type Canary struct {
	ID        string
	Target    edgemodel.Target
	Percent   int
	Mode      string
	StartedAt time.Time
}

// CanaryChange is the canary field of a deployment change: Canary nil ends the canary, else sets it.
// By is who makes the change (an identity id), kept in the canary's history.
type CanaryChange struct {
	Canary *Canary
	By     string
}

// Canary outcomes (docs/API.md, "Canary history").
const (
	CanaryRunning  = "running"  // the deployment's canary now
	CanaryPromoted = "promoted" // its target became the deployment's
	CanaryEnded    = "ended"    // ended ("canary": null)
	CanaryReplaced = "replaced" // a canary of another target or mode took its place
)

// ValidateCanary applies the rules of a canary that need no database: a percent of 1 to 99 (or none, 0,
// in shadow mode, which copies every call), a mode of
// split or shadow, a single target (a multi_model canary, or a canary on a multi_model deployment whose
// kind is deploymentKind, is refused). Every message names the field.
func ValidateCanary(deploymentKind string, c Canary) error {
	if deploymentKind == edgemodel.TargetMultiModel {
		return errorf(edgemodel.CodeInvalidRequest, "canary: a multi_model deployment takes no canary (it serves every public model by name); canary a deployment with one target")
	}
	if (c.Percent < 1 || c.Percent > 99) && !(c.Mode == edgemodel.CanaryShadow && c.Percent == 0) {
		return errorf(edgemodel.CodeInvalidRequest, "canary.percent must be a whole number from 1 to 99 (got %d); a shadow canary copies every call and may leave it out", c.Percent)
	}
	if c.Mode != edgemodel.CanarySplit && c.Mode != edgemodel.CanaryShadow {
		return errorf(edgemodel.CodeInvalidRequest, "canary.mode must be %q or %q (got %q)", edgemodel.CanarySplit, edgemodel.CanaryShadow, c.Mode)
	}
	if c.Target.Kind == edgemodel.TargetMultiModel {
		return errorf(edgemodel.CodeInvalidTarget, "canary.target: a canary serves one target: final_adapter, checkpoint or base_model, not multi_model")
	}
	return nil
}

// resolveCanary validates a canary for a deployment of the project: its own rules, then its target
// exactly as a deployment's target is validated (resolveTarget: same project, artifact present, base
// model registered for inference, able to serve LoRA adapters), its errors naming canary.target.
func (s *Service) resolveCanary(ctx context.Context, q dbsqlc.DBTX, projectID, deploymentKind string, c Canary) (resolvedTarget, error) {
	if err := ValidateCanary(deploymentKind, c); err != nil {
		return resolvedTarget{}, err
	}
	t, err := s.resolveTarget(ctx, q, projectID, c.Target)
	if err != nil {
		if e, ok := err.(*edgemodel.Error); ok {
			return t, &edgemodel.Error{Code: e.Code, Message: "canary.target: " + e.Message}
		}
		return t, err
	}
	return t, nil
}

// canaryOf reads the canary columns of a row, nil when none.
func canaryOf(d dbsqlc.Deployment) *Canary {
	if !d.CanaryKind.Valid {
		return nil
	}
	return &Canary{
		ID:      d.CanaryID.String,
		Target:  edgemodel.Target{Kind: d.CanaryKind.String, JobID: d.CanaryJobID.String, Step: d.CanaryStep.Int64, Model: d.CanaryModel.String},
		Percent: int(d.CanaryPercent.Int64), Mode: d.CanaryMode.String, StartedAt: fromMs(d.CanaryStartedAt.Int64),
	}
}

// setCanary writes a deployment's canary columns: the canary's, or NULL everywhere when c is nil.
func (s *Service) setCanary(ctx context.Context, tx dbsqlc.DBTX, id string, c *Canary) error {
	p := dbsqlc.DeploymentCanarySetParams{ID: id, UpdatedAt: ms(s.now())}
	if c != nil {
		kind, job, step, model := targetColumns(c.Target)
		p.CanaryKind = sql.NullString{String: kind, Valid: true}
		p.CanaryJobID, p.CanaryStep, p.CanaryModel = job, step, model
		p.CanaryPercent = sql.NullInt64{Int64: int64(c.Percent), Valid: true}
		p.CanaryMode = sql.NullString{String: c.Mode, Valid: true}
		p.CanaryID = sql.NullString{String: c.ID, Valid: true}
		p.CanaryStartedAt = sql.NullInt64{Int64: ms(c.StartedAt), Valid: true}
	}
	return s.q.DeploymentCanarySet(ctx, tx, p)
}

// endCanary closes the history entry of a deployment's running canary with its outcome; nothing
// without one.
func (s *Service) endCanary(ctx context.Context, tx dbsqlc.DBTX, d dbsqlc.Deployment, outcome, by string) error {
	if !d.CanaryID.Valid {
		return nil
	}
	return s.q.CanaryEnd(ctx, tx, dbsqlc.CanaryEndParams{ID: d.CanaryID.String, Outcome: outcome, EndedBy: by,
		EndedAt: sql.NullInt64{Int64: ms(s.now()), Valid: true}})
}

// startCanary sets c as a deployment's canary. The running canary stays the same canary (its id, its
// start and its compare) when only its percent changes; a new target or mode ends it as replaced and
// starts a new one, whose compare starts at 0.
func (s *Service) startCanary(ctx context.Context, tx dbsqlc.DBTX, d dbsqlc.Deployment, c Canary, by string) error {
	if cur := canaryOf(d); cur != nil && cur.ID != "" && cur.Mode == c.Mode && sameTarget(cur.Target, c.Target) {
		c.ID, c.StartedAt = cur.ID, cur.StartedAt
		if err := s.q.CanaryPercentSet(ctx, tx, dbsqlc.CanaryPercentSetParams{ID: c.ID, Percent: int64(c.Percent)}); err != nil {
			return err
		}
		return s.setCanary(ctx, tx, d.ID, &c)
	}
	if err := s.endCanary(ctx, tx, d, CanaryReplaced, by); err != nil {
		return err
	}
	c.ID, c.StartedAt = newID("cny"), s.now()
	kind, job, step, model := targetColumns(c.Target)
	err := s.q.CanaryCreate(ctx, tx, dbsqlc.CanaryCreateParams{ID: c.ID, DeploymentID: d.ID, Kind: kind, JobID: job, Step: step,
		Model: model, Percent: int64(c.Percent), Mode: c.Mode, StartedAt: ms(c.StartedAt), StartedBy: by})
	if err != nil {
		return err
	}
	return s.setCanary(ctx, tx, d.ID, &c)
}

// applyCanaryChange validates and writes the canary of an update, inside its transaction; kind is the
// deployment's target kind after the update. A deployment retargeted to multi_model while its canary
// stays is refused, naming the field.
func (s *Service) applyCanaryChange(ctx context.Context, tx dbsqlc.DBTX, d dbsqlc.Deployment, kind string, ch *CanaryChange) error {
	if ch == nil {
		if kind == edgemodel.TargetMultiModel && d.CanaryKind.Valid {
			return errorf(edgemodel.CodeInvalidRequest, "canary: a multi_model deployment takes no canary; end the canary (\"canary\": null) before retargeting to multi_model")
		}
		return nil
	}
	if ch.Canary == nil {
		if err := s.endCanary(ctx, tx, d, CanaryEnded, ch.By); err != nil {
			return err
		}
		return s.setCanary(ctx, tx, d.ID, nil)
	}
	t, err := s.resolveCanary(ctx, tx, d.ProjectID, kind, *ch.Canary)
	if err != nil {
		return err
	}
	c := *ch.Canary
	c.Target = t.Target
	if c.Mode == edgemodel.CanaryShadow && c.Percent == 0 {
		c.Percent = shadowPercentLeftOut
	}
	return s.startCanary(ctx, tx, d, c, ch.By)
}

// shadowPercentLeftOut is the percent a shadow canary set without one is stored and read back with:
// the store keeps a percent of 1 to 99, and a shadow canary's decides nothing (every call is copied).
const shadowPercentLeftOut = 1

// PromoteCanary makes a deployment's canary its target in one change: the target becomes the canary's
// (validated again, as any new target is) and the canary is cleared, in one transaction and one event
// of the change feed, so every edge moves from one state to the other with nothing between. The
// canary's history keeps it as promoted, by by (an identity id).
//
// Under a promotion gate the canary's target needs a passing eval (checkGate), or an override, which
// its history records (recordOverride).
func (s *Service) PromoteCanary(ctx context.Context, pr Project, id, by string, override *Override) (*Deployment, error) {
	if override != nil {
		override.By = by
	}
	var out dbsqlc.Deployment
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, id)
		if err != nil {
			return err
		}
		c := canaryOf(d)
		if c == nil {
			return errorf(edgemodel.CodeInvalidRequest, "canary: this deployment has no canary to promote; set one with PATCH {\"canary\": {...}}")
		}
		t, err := s.resolveCanary(ctx, tx, d.ProjectID, d.TargetKind, *c)
		if err != nil {
			return err
		}
		if err := s.checkGate(ctx, tx, d, t.Target, override); err != nil {
			return err
		}
		if err := s.recordOverride(ctx, tx, d, d.CanaryID.String, t.Target, override); err != nil {
			return err
		}
		p := dbsqlc.DeploymentUpdateParams{
			ID: d.ID, AuthMode: d.AuthMode, Enabled: d.Enabled, RunRetentionMode: d.RunRetentionMode,
			RunRetentionDays: d.RunRetentionDays, UpdatedAt: ms(s.now()),
		}
		p.TargetKind, p.TargetJobID, p.TargetStep, p.TargetModel = targetColumns(t.Target)
		if err := s.q.DeploymentUpdate(ctx, tx, p); err != nil {
			return err
		}
		if err := s.endCanary(ctx, tx, d, CanaryPromoted, by); err != nil {
			return err
		}
		if err := s.setCanary(ctx, tx, d.ID, nil); err != nil {
			return err
		}
		if err := tx.changedDeployment(ctx, d.ID); err != nil {
			return err
		}
		out, err = s.getDeployment(ctx, tx, pr, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.prepare(ctx, out.Slug)
	return s.deploymentRead(ctx, out)
}

// edgeCanary builds the canary arm of an edge deployment from its row, nil when it has none. A canary
// whose target went bad after it was set (an artifact removed, a model unregistered) is left out with
// a warning: the endpoint keeps serving its primary.
func (s *Service) edgeCanary(ctx context.Context, q dbsqlc.DBTX, row dbsqlc.Deployment, d *edgemodel.EdgeDeployment) (*edgemodel.EdgeCanary, error) {
	c := canaryOf(row)
	if c == nil || row.TargetKind == edgemodel.TargetMultiModel {
		return nil, nil
	}
	t, err := s.resolveTarget(ctx, q, row.ProjectID, c.Target)
	if err != nil {
		if edgemodel.CodeOf(err) != "" {
			s.log.Warn("edge: canary target no longer valid; serving the primary alone", "slug", row.Slug, "err", err)
			return nil, nil
		}
		return nil, err
	}
	arm := *d
	arm.Canary = nil
	arm.Target, arm.BaseModel, arm.Adapter, arm.AdapterName = t.Target, t.BaseModel, t.Adapter, t.AdapterName
	return &edgemodel.EdgeCanary{ID: row.CanaryID.String, Percent: c.Percent, Mode: c.Mode, Deployment: &arm}, nil
}

// sameTarget reports whether two targets name the same thing, as their stored columns do.
func sameTarget(a, b edgemodel.Target) bool {
	ak, aj, as, am := targetColumns(a)
	bk, bj, bs, bm := targetColumns(b)
	return ak == bk && aj == bj && as == bs && am == bm
}
