package core

import (
	"context"
	"database/sql"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// Canaries (docs/API.md, "Canary"): a deployment may serve a second target to a
// share of its sessions (split) or to copies of its calls (shadow), and promote it to be the target in
// one change. Which arm a session gets is the data plane's pure rule, edgemodel.SessionOf and
// edgemodel.ArmOf (the edge links no core); the rules of setting and promoting one are here.

// Canary modes and arms (edgemodel's).
const (
	CanarySplit  = edgemodel.CanarySplit
	CanaryShadow = edgemodel.CanaryShadow
	ArmPrimary   = edgemodel.ArmPrimary
	ArmCanary    = edgemodel.ArmCanary
)

// EdgeCanary is a deployment's canary as the edge serves it (edgemodel.EdgeCanary).
type EdgeCanary = edgemodel.EdgeCanary

// Canary is a deployment's second target: Percent (1-99) of its sessions in mode split, a copy of every
// call in mode shadow.
type Canary struct {
	Target  Target
	Percent int
	Mode    string
}

// CanaryChange is the canary field of a deployment change: Canary nil ends the canary, else sets it.
type CanaryChange struct {
	Canary *Canary
}

// ValidateCanary applies the rules of a canary that need no database: a percent of 1 to 99, a mode of
// split or shadow, a single target (a multi_model canary, or a canary on a multi_model deployment whose
// kind is deploymentKind, is refused). Every message names the field.
func ValidateCanary(deploymentKind string, c Canary) error {
	if deploymentKind == TargetMultiModel {
		return errorf(CodeInvalidRequest, "canary: a multi_model deployment takes no canary (it serves every public model by name); canary a deployment with one target")
	}
	if c.Percent < 1 || c.Percent > 99 {
		return errorf(CodeInvalidRequest, "canary.percent must be a whole number from 1 to 99 (got %d)", c.Percent)
	}
	if c.Mode != CanarySplit && c.Mode != CanaryShadow {
		return errorf(CodeInvalidRequest, "canary.mode must be %q or %q (got %q)", CanarySplit, CanaryShadow, c.Mode)
	}
	if c.Target.Kind == TargetMultiModel {
		return errorf(CodeInvalidTarget, "canary.target: a canary serves one target: final_adapter, checkpoint or base_model, not multi_model")
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
		if e, ok := err.(*Error); ok {
			return t, &Error{Code: e.Code, Message: "canary.target: " + e.Message}
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
		Target:  Target{Kind: d.CanaryKind.String, JobID: d.CanaryJobID.String, Step: d.CanaryStep.Int64, Model: d.CanaryModel.String},
		Percent: int(d.CanaryPercent.Int64), Mode: d.CanaryMode.String,
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
	}
	return s.q.DeploymentCanarySet(ctx, tx, p)
}

// applyCanaryChange validates and writes the canary of an update, inside its transaction; kind is the
// deployment's target kind after the update. A deployment retargeted to multi_model while its canary
// stays is refused, naming the field.
func (s *Service) applyCanaryChange(ctx context.Context, tx dbsqlc.DBTX, d dbsqlc.Deployment, kind string, ch *CanaryChange) error {
	if ch == nil {
		if kind == TargetMultiModel && d.CanaryKind.Valid {
			return errorf(CodeInvalidRequest, "canary: a multi_model deployment takes no canary; end the canary (\"canary\": null) before retargeting to multi_model")
		}
		return nil
	}
	if ch.Canary == nil {
		return s.setCanary(ctx, tx, d.ID, nil)
	}
	t, err := s.resolveCanary(ctx, tx, d.ProjectID, kind, *ch.Canary)
	if err != nil {
		return err
	}
	c := *ch.Canary
	c.Target = t.Target
	return s.setCanary(ctx, tx, d.ID, &c)
}

// PromoteCanary makes a deployment's canary its target in one change: the target becomes the canary's
// (validated again, as any new target is) and the canary is cleared, in one transaction and one event
// of the change feed, so every edge moves from one state to the other with nothing between.
func (s *Service) PromoteCanary(ctx context.Context, pr Project, id string) (*Deployment, error) {
	var out dbsqlc.Deployment
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, id)
		if err != nil {
			return err
		}
		c := canaryOf(d)
		if c == nil {
			return errorf(CodeInvalidRequest, "canary: this deployment has no canary to promote; set one with PATCH {\"canary\": {...}}")
		}
		t, err := s.resolveCanary(ctx, tx, d.ProjectID, d.TargetKind, *c)
		if err != nil {
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
	return s.deploymentOut(out), nil
}

// edgeCanary builds the canary arm of an edge deployment from its row, nil when it has none. A canary
// whose target went bad after it was set (an artifact removed, a model unregistered) is left out with
// a warning: the endpoint keeps serving its primary.
func (s *Service) edgeCanary(ctx context.Context, q dbsqlc.DBTX, row dbsqlc.Deployment, d *EdgeDeployment) (*EdgeCanary, error) {
	c := canaryOf(row)
	if c == nil || row.TargetKind == TargetMultiModel {
		return nil, nil
	}
	t, err := s.resolveTarget(ctx, q, row.ProjectID, c.Target)
	if err != nil {
		if CodeOf(err) != "" {
			s.log.Warn("edge: canary target no longer valid; serving the primary alone", "slug", row.Slug, "err", err)
			return nil, nil
		}
		return nil, err
	}
	arm := *d
	arm.Canary = nil
	arm.Target, arm.BaseModel, arm.Adapter, arm.AdapterName = t.Target, t.BaseModel, t.Adapter, t.AdapterName
	return &EdgeCanary{Percent: c.Percent, Mode: c.Mode, Deployment: &arm}, nil
}
