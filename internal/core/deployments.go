package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// resolvedTarget is a validated target with what serving it needs.
type resolvedTarget struct {
	edgemodel.Target
	BaseModel   string
	Adapter     string
	AdapterName string
}

// resolveTarget validates a target for a project (the job must belong to the project, the adapter
// artifact must exist in the artifacts folder, the base model must be registered for inference and,
// for adapters, able to serve them) and returns what the edge needs to serve it.
func (s *Service) resolveTarget(ctx context.Context, q dbsqlc.DBTX, projectID string, t edgemodel.Target) (resolvedTarget, error) {
	r := resolvedTarget{Target: edgemodel.Target{Kind: t.Kind}}
	switch t.Kind {
	case edgemodel.TargetBaseModel:
		if t.Model == "" {
			return r, errorf(edgemodel.CodeInvalidTarget, "a base_model target needs a model")
		}
		if _, ok := s.catalog.Model(t.Model); !ok {
			return r, errorf(edgemodel.CodeInvalidTarget, "base model %q is not registered for inference; GET /v1/models lists the registered models", t.Model)
		}
		r.Model, r.BaseModel = t.Model, t.Model
		return r, nil
	case edgemodel.TargetMultiModel:
		return r, nil
	case edgemodel.TargetFinalAdapter, edgemodel.TargetCheckpoint:
	default:
		return r, errorf(edgemodel.CodeInvalidTarget, "target kind must be one of final_adapter, checkpoint, base_model, multi_model")
	}

	if t.JobID == "" {
		return r, errorf(edgemodel.CodeInvalidTarget, "a %s target needs a jobId", t.Kind)
	}
	job, err := s.q.JobGetAnyProject(ctx, q, strings.ToLower(t.JobID))
	if err = db.Map(err); err != nil && !errors.Is(err, db.ErrNotFound) {
		return r, err
	}
	// A job of another project is reported like a missing one, so that other projects' ids do not leak.
	if err != nil || job.ProjectID != projectID {
		return r, errorf(edgemodel.CodeInvalidTarget, "job %s is not a job of this project", t.JobID)
	}
	r.JobID = job.ID
	info, ok := s.catalog.Model(job.BaseModel)
	if !ok {
		return r, errorf(edgemodel.CodeInvalidTarget, "the job's base model %q is not registered for inference", job.BaseModel)
	}
	if !info.Adapters {
		return r, errorf(edgemodel.CodeInvalidTarget, "the job's base model %q cannot serve LoRA adapters (its runtime has no adapter support, e.g. lora: none in the models file); deploy the base model instead, or serve the adapter from a model with LoRA support", job.BaseModel)
	}
	r.BaseModel = job.BaseModel

	var artifact string
	if t.Kind == edgemodel.TargetFinalAdapter {
		if job.Status != JobCompleted || !job.FinalAdapter.Valid {
			return r, errorf(edgemodel.CodeInvalidTarget, "job %s has no final adapter yet (status %s); deploy a checkpoint or wait for the job to complete", job.ID, job.Status)
		}
		artifact = job.FinalAdapter.String
		r.AdapterName = "ft-" + job.ID
	} else {
		cp, err := s.q.JobCheckpointGet(ctx, q, dbsqlc.JobCheckpointGetParams{JobID: job.ID, Step: t.Step})
		if err = db.Map(err); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return r, errorf(edgemodel.CodeInvalidTarget, "job %s has no checkpoint at step %d", job.ID, t.Step)
			}
			return r, err
		}
		artifact = cp.Artifact
		r.Step = t.Step
		r.AdapterName = fmt.Sprintf("ft-%s-step-%d", job.ID, t.Step)
	}
	if err := s.artifactServable(artifact); err != nil {
		return r, err
	}
	r.Adapter = artifact
	return r, nil
}

// targetOf reads the target columns of a row.
func targetOf(d dbsqlc.Deployment) edgemodel.Target {
	return edgemodel.Target{Kind: d.TargetKind, JobID: d.TargetJobID.String, Step: d.TargetStep.Int64, Model: d.TargetModel.String}
}

func (s *Service) deploymentOut(d dbsqlc.Deployment) *Deployment {
	return &Deployment{
		ID: d.ID, Slug: d.Slug, URL: s.urlFor(d.Slug), ProjectID: d.ProjectID, Target: targetOf(d),
		AuthMode: d.AuthMode, Enabled: d.Enabled, Retention: edgemodel.Retention{Mode: d.RunRetentionMode, Days: int(d.RunRetentionDays)},
		CreatedAt: fromMs(d.CreatedAt), UpdatedAt: fromMs(d.UpdatedAt), ExpiresAt: fromNullMs(d.ExpiresAt),
		Limits: rateLimitsOf(d.LimitRequestsPerMinute, d.LimitTokensPerMinute), Canary: canaryOf(d),
		PromoteGate:    gateOfRow(d.GateMinWinRate, d.GateMaxAgeHours),
		QueueTimeoutMs: queueTimeoutMsOf(d.QueueTimeoutMs),
	}
}

// deploymentRead is deploymentOut with what its budget's period has used.
func (s *Service) deploymentRead(ctx context.Context, d dbsqlc.Deployment) (*Deployment, error) {
	out := s.deploymentOut(d)
	if err := s.deploymentBudgetUsage(ctx, out, budgetOf(d.BudgetTokens, d.BudgetPeriod)); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateDeployment creates an enabled deployment in the project. What an anonymous identity creates
// counts against its cap of live endpoints and expires after AnonymousLifetime.
func (s *Service) CreateDeployment(ctx context.Context, p Principal, pr Project, req NewDeployment) (*Deployment, error) {
	if err := ValidateSlug(req.Slug); err != nil {
		return nil, err
	}
	authMode := edgemodel.AuthFixedAPIKey
	if req.AuthMode != nil {
		authMode = *req.AuthMode
	}
	if err := ValidateAuthMode(authMode); err != nil {
		return nil, err
	}
	ret, err := ResolveRetention(req.RetentionMode, req.RetentionDays, nil)
	if err != nil {
		return nil, err
	}
	if req.Budget != nil {
		if err := ValidateBudget(*req.Budget); err != nil {
			return nil, err
		}
	}
	if req.QueueTimeoutMs != nil {
		if err := ValidateQueueTimeout(*req.QueueTimeoutMs); err != nil {
			return nil, err
		}
	}
	anonymous := p.Kind == KindAnonymous
	now := s.now()
	row := dbsqlc.DeploymentCreateParams{
		ID: newID("dep"), Slug: req.Slug, ProjectID: pr.ID, AuthMode: authMode, Enabled: true,
		RunRetentionMode: ret.Mode, RunRetentionDays: int64(ret.Days), Anonymous: anonymous,
		CreatedAt: ms(now), UpdatedAt: ms(now),
	}
	if anonymous {
		row.ExpiresAt = sql.NullInt64{Int64: ms(now.Add(s.AnonymousLifetime)), Valid: true}
	}
	var out dbsqlc.Deployment
	err = s.changeForEdges(ctx, func(tx edgeTx) error {
		if anonymous {
			// Counted inside the write transaction, so that parallel creates cannot pass the cap together.
			if err := s.checkAnonymousCap(ctx, tx, p); err != nil {
				return err
			}
		}
		t, err := s.resolveTarget(ctx, tx, pr.ID, req.Target)
		if err != nil {
			return err
		}
		row.TargetKind, row.TargetJobID, row.TargetStep, row.TargetModel = targetColumns(t.Target)
		if err := s.q.DeploymentCreate(ctx, tx, row); err != nil {
			if db.UniqueOn(db.Map(err), "deployments.slug") {
				return s.slugTakenError(ctx, tx, req.Slug)
			}
			return err
		}
		if err := s.setDeploymentBudget(ctx, tx, row.ID, BudgetChange{Set: req.Budget != nil, Value: req.Budget}); err != nil {
			return err
		}
		if err := s.setDeploymentQueueTimeout(ctx, tx, row.ID, LimitChange{Set: req.QueueTimeoutMs != nil, Value: req.QueueTimeoutMs}); err != nil {
			return err
		}
		// Edge processes may hold this slug as "serves nothing".
		if err := tx.changedSlug(ctx, req.Slug); err != nil {
			return err
		}
		out, err = s.q.DeploymentGet(ctx, tx, dbsqlc.DeploymentGetParams{ID: row.ID, ProjectID: pr.ID})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.prepare(ctx, out.Slug)
	return s.deploymentRead(ctx, out)
}

// checkAnonymousCap refuses a new endpoint to an anonymous identity that already has
// AnonymousEndpointLimit live ones (of any kind: created in the studio, the SDK or one-click).
func (s *Service) checkAnonymousCap(ctx context.Context, q dbsqlc.DBTX, p Principal) error {
	n, err := s.q.DeploymentCountLiveForIdentity(ctx, q, dbsqlc.DeploymentCountLiveForIdentityParams{
		IdentityID: p.IdentityID, Now: sql.NullInt64{Int64: ms(s.now()), Valid: true},
	})
	if err != nil {
		return err
	}
	if n >= int64(s.AnonymousEndpointLimit) {
		return errorf(edgemodel.CodeAnonymousLimit, "anonymous users may keep at most %d live endpoints; delete one, or sign in with `svc login` (which keeps the endpoints you made) to create more", s.AnonymousEndpointLimit)
	}
	return nil
}

func (s *Service) slugTakenError(ctx context.Context, q dbsqlc.DBTX, slug string) error {
	// A deleted deployment whose run history is still being drained keeps its slug reserved.
	if _, err := s.q.DeploymentGetBySlug(ctx, q, slug); errors.Is(db.Map(err), db.ErrNotFound) {
		return errorf(edgemodel.CodeSlugTaken, "slug %q is still reserved by a deleted endpoint whose run history is being cleaned up; try again in a few minutes or choose another slug", slug)
	}
	return errorf(edgemodel.CodeSlugTaken, "slug %q is already taken; choose another", slug)
}

func targetColumns(t edgemodel.Target) (kind string, job sql.NullString, step sql.NullInt64, model sql.NullString) {
	kind = t.Kind
	switch t.Kind {
	case edgemodel.TargetFinalAdapter:
		job = sql.NullString{String: t.JobID, Valid: true}
	case edgemodel.TargetCheckpoint:
		job = sql.NullString{String: t.JobID, Valid: true}
		step = sql.NullInt64{Int64: t.Step, Valid: true}
	case edgemodel.TargetBaseModel:
		model = sql.NullString{String: t.Model, Valid: true}
	}
	return
}

// GetDeployment returns a deployment of the project.
func (s *Service) GetDeployment(ctx context.Context, pr Project, id string) (*Deployment, error) {
	d, err := s.getDeployment(ctx, s.db, pr, id)
	if err != nil {
		return nil, err
	}
	return s.deploymentRead(ctx, d)
}

func (s *Service) getDeployment(ctx context.Context, q dbsqlc.DBTX, pr Project, id string) (dbsqlc.Deployment, error) {
	d, err := s.q.DeploymentGet(ctx, q, dbsqlc.DeploymentGetParams{ID: id, ProjectID: pr.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return d, notFound("deployment")
		}
		return d, err
	}
	return d, nil
}

// ListDeployments returns one page of the project's deployments, newest first (see PageLimit for
// limit; cursor is the NextCursor of the previous page, "" for the first).
func (s *Service) ListDeployments(ctx context.Context, pr Project, limit int, cursor string) (*Page[Deployment], error) {
	limit, err := PageLimit(limit)
	if err != nil {
		return nil, err
	}
	p := dbsqlc.DeploymentPageByProjectParams{ProjectID: pr.ID, Lim: int64(limit) + 1}
	if p.CursorAt, p.CursorID, err = decodeCursor(cursor); err != nil {
		return nil, err
	}
	rows, err := s.q.DeploymentPageByProject(ctx, s.db, p)
	if err != nil {
		return nil, err
	}
	page := &Page[Deployment]{Items: make([]Deployment, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		page.NextCursor = encodeCursor(rows[limit-1].CreatedAt, rows[limit-1].ID)
	}
	budgets := make([]*edgemodel.Budget, len(rows))
	for i, r := range rows {
		page.Items = append(page.Items, *s.deploymentOut(r))
		budgets[i] = budgetOf(r.BudgetTokens, r.BudgetPeriod)
	}
	if err := s.deploymentsBudgetUsage(ctx, page.Items, budgets); err != nil {
		return nil, err
	}
	return page, nil
}

// UpdateDeployment applies a partial update. Switching the auth mode never touches keys: switching back
// to fixed_api_key enforces the existing enabled keys again.
func (s *Service) UpdateDeployment(ctx context.Context, pr Project, id string, req DeploymentChange) (*Deployment, error) {
	var out dbsqlc.Deployment
	var retargeted bool
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, id)
		if err != nil {
			return err
		}
		p := dbsqlc.DeploymentUpdateParams{
			ID: d.ID, AuthMode: d.AuthMode, Enabled: d.Enabled, RunRetentionMode: d.RunRetentionMode,
			RunRetentionDays: d.RunRetentionDays, UpdatedAt: ms(s.now()),
		}
		p.TargetKind, p.TargetJobID, p.TargetStep, p.TargetModel = d.TargetKind, d.TargetJobID, d.TargetStep, d.TargetModel
		if err := s.setGate(ctx, tx, d.ID, req.PromoteGate); err != nil {
			return err
		}
		if req.PromoteGate != nil {
			if d, err = s.getDeployment(ctx, tx, pr, id); err != nil {
				return err
			}
		}
		if req.Target != nil {
			t, err := s.resolveTarget(ctx, tx, pr.ID, *req.Target)
			if err != nil {
				return err
			}
			if !sameTarget(t.Target, targetOf(d)) {
				if err := s.checkGate(ctx, tx, d, t.Target, req.Override); err != nil {
					return err
				}
				if err := s.recordOverride(ctx, tx, d, "", t.Target, req.Override); err != nil {
					return err
				}
			}
			p.TargetKind, p.TargetJobID, p.TargetStep, p.TargetModel = targetColumns(t.Target)
			retargeted = true
		} else if req.Override != nil {
			return errorf(edgemodel.CodeInvalidRequest, "override applies to a target change; this update changes no target")
		}
		if req.AuthMode != nil {
			if err := ValidateAuthMode(*req.AuthMode); err != nil {
				return err
			}
			p.AuthMode = *req.AuthMode
		}
		if req.Enabled != nil {
			p.Enabled = *req.Enabled
		}
		r, err := ResolveRetention(req.RetentionMode, req.RetentionDays, &edgemodel.Retention{Mode: d.RunRetentionMode, Days: int(d.RunRetentionDays)})
		if err != nil {
			return err
		}
		p.RunRetentionMode, p.RunRetentionDays = r.Mode, int64(r.Days)
		if err := s.q.DeploymentUpdate(ctx, tx, p); err != nil {
			return err
		}
		if !req.Limits.IsZero() {
			if err := s.setDeploymentLimits(ctx, tx.Tx, d, req.Limits); err != nil {
				return err
			}
		}
		if err := s.setDeploymentBudget(ctx, tx, d.ID, req.Budget); err != nil {
			return err
		}
		if err := s.setDeploymentQueueTimeout(ctx, tx, d.ID, req.QueueTimeoutMs); err != nil {
			return err
		}
		if err := s.applyCanaryChange(ctx, tx, d, p.TargetKind, req.Canary); err != nil {
			return err
		}
		retargeted = retargeted || req.Canary != nil
		if err := tx.changedDeployment(ctx, d.ID); err != nil {
			return err
		}
		out, err = s.getDeployment(ctx, tx, pr, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if retargeted {
		s.prepare(ctx, out.Slug)
	}
	return s.deploymentRead(ctx, out)
}

// DeleteDeployment removes a deployment, its keys and its run history. A history larger than
// DrainThreshold is left to the sweeper, and the slug stays reserved until the drain finishes.
func (s *Service) DeleteDeployment(ctx context.Context, pr Project, id string) error {
	return s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, id)
		if err != nil {
			return err
		}
		return s.deleteDeploymentTx(ctx, tx, d.ID)
	})
}

func (s *Service) deleteDeploymentTx(ctx context.Context, tx edgeTx, id string) error {
	if err := tx.changedDeployment(ctx, id); err != nil {
		return err
	}
	if err := s.q.KeyDeleteByDeployment(ctx, tx, id); err != nil {
		return err
	}
	runs, err := s.q.RunCountByDeployment(ctx, tx, id)
	if err != nil {
		return err
	}
	if runs > s.DrainThreshold {
		now := ms(s.now())
		return s.q.DeploymentMarkDeleted(ctx, tx, dbsqlc.DeploymentMarkDeletedParams{DeletedAt: sql.NullInt64{Int64: now, Valid: true}, UpdatedAt: now, ID: id})
	}
	return s.q.DeploymentDelete(ctx, tx, id)
}

// BulkDeployments applies one action (BulkEnable, BulkDisable, BulkDelete) to many deployments; each
// id succeeds or fails on its own.
func (s *Service) BulkDeployments(ctx context.Context, pr Project, action string, ids []string) ([]BulkResult, error) {
	switch action {
	case BulkEnable, BulkDisable, BulkDelete:
	default:
		return nil, errorf(edgemodel.CodeInvalidRequest, "action must be %q, %q or %q", BulkEnable, BulkDisable, BulkDelete)
	}
	if len(ids) == 0 || len(ids) > 100 {
		return nil, errorf(edgemodel.CodeInvalidRequest, "ids must list 1 to 100 deployment ids")
	}
	results := make([]BulkResult, 0, len(ids))
	for _, id := range ids {
		var err error
		switch action {
		case BulkDelete:
			err = s.DeleteDeployment(ctx, pr, id)
		default:
			enabled := action == BulkEnable
			_, err = s.UpdateDeployment(ctx, pr, id, DeploymentChange{Enabled: &enabled})
		}
		res := BulkResult{ID: id}
		if err != nil {
			if !errors.As(err, &res.Err) {
				return nil, err
			}
		}
		results = append(results, res)
	}
	return results, nil
}

// OneClick creates an endpoint serving every public model under a generated slug. For anonymous
// callers it counts against the same cap, and expires the same way, as any other endpoint they create.
func (s *Service) OneClick(ctx context.Context, p Principal, pr Project) (*Deployment, error) {
	auth := edgemodel.AuthFixedAPIKey
	for attempt := 0; ; attempt++ {
		req := NewDeployment{
			Slug:     "quick-" + strings.ToLower(randomBase62(8)),
			Target:   edgemodel.Target{Kind: edgemodel.TargetMultiModel},
			AuthMode: &auth,
		}
		d, err := s.CreateDeployment(ctx, p, pr, req)
		if edgemodel.CodeOf(err) == edgemodel.CodeSlugTaken && attempt < 3 {
			continue
		}
		return d, err
	}
}

// prepare lets the runtimes get ready for a deployment's target (load an adapter) without holding up
// the caller when they fail: the edge retries on first use.
func (s *Service) prepare(ctx context.Context, slug string) {
	if s.Prepare == nil {
		return
	}
	d, err := s.EdgeDeployment(ctx, slug)
	if err != nil {
		return
	}
	if err := s.Prepare(ctx, d); err != nil {
		s.log.Warn("preparing deployment target failed; will retry on first request", "slug", slug, "err", err)
	}
	if d.Canary != nil {
		// The canary's adapter is loaded where it will be served, as the target's is.
		if err := s.Prepare(ctx, d.Canary.Deployment); err != nil {
			s.log.Warn("preparing the canary's target failed; will retry on first request", "slug", slug, "err", err)
		}
	}
}
