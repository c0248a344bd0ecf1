package core

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/evalscore"
)

// The promotion gate (docs/API.md, "Evals"): a deployment with promoteGate promotes (canary promote, a
// target change) only with a done eval of that exact candidate that evalscore's Gate allows, or with an
// override, which the canary history records with who and why.

// GateChange sets (Gate) or removes (Gate nil) a deployment's promotion gate.
type GateChange struct {
	Gate *evalscore.Gate
}

// Override promotes past the gate: Reason is recorded with By (an identity id) and the time.
type Override struct {
	Reason string
	By     string
}

// MaxOverrideReason bounds an override's reason.
const MaxOverrideReason = 2000

// ValidateGate checks a promotion gate, naming the field at fault.
func ValidateGate(g evalscore.Gate) error {
	if g.MinWinRate < 0 || g.MinWinRate > 1 {
		return errorf(edgemodel.CodeInvalidRequest, "promoteGate.minWinRate must be between 0 and 1 (got %g)", g.MinWinRate)
	}
	if g.MaxAgeHours < 0 {
		return errorf(edgemodel.CodeInvalidRequest, "promoteGate.maxAgeHours must be 0 (any age) or more (got %g)", g.MaxAgeHours)
	}
	return nil
}

// validateOverride checks an override's reason.
func validateOverride(o *Override) error {
	if o == nil {
		return nil
	}
	if strings.TrimSpace(o.Reason) == "" {
		return errorf(edgemodel.CodeInvalidRequest, "override.reason is required: say why the gate is passed over")
	}
	if len(o.Reason) > MaxOverrideReason {
		return errorf(edgemodel.CodeInvalidRequest, "override.reason must be at most %d characters", MaxOverrideReason)
	}
	return nil
}

// gateOfRow is a deployment row's gate, nil without one.
func gateOfRow(min, maxAge sql.NullFloat64) *evalscore.Gate {
	if !min.Valid {
		return nil
	}
	return &evalscore.Gate{MinWinRate: min.Float64, MaxAgeHours: maxAge.Float64}
}

// gateOf reads a deployment's gate, nil without one.
func (s *Service) gateOf(ctx context.Context, deploymentID string) (*evalscore.Gate, error) {
	r, err := s.q.DeploymentGate(ctx, s.db, deploymentID)
	if err != nil {
		return nil, err
	}
	return gateOfRow(r.GateMinWinRate, r.GateMaxAgeHours), nil
}

// setGate writes a gate change inside an update's transaction.
func (s *Service) setGate(ctx context.Context, tx dbsqlc.DBTX, id string, ch *GateChange) error {
	if ch == nil {
		return nil
	}
	p := dbsqlc.DeploymentGateSetParams{ID: id, Now: ms(s.now())}
	if ch.Gate != nil {
		if err := ValidateGate(*ch.Gate); err != nil {
			return err
		}
		p.MinWinRate = sql.NullFloat64{Float64: ch.Gate.MinWinRate, Valid: true}
		p.MaxAgeHours = sql.NullFloat64{Float64: ch.Gate.MaxAgeHours, Valid: true}
	}
	return s.q.DeploymentGateSet(ctx, tx, p)
}

// checkGate says whether a deployment may promote candidate: always without a gate or with an
// override; else 409 eval_required unless the newest done eval of that exact candidate passes the gate.
func (s *Service) checkGate(ctx context.Context, q dbsqlc.DBTX, d dbsqlc.Deployment, candidate edgemodel.Target, o *Override) error {
	g := gateOfRow(d.GateMinWinRate, d.GateMaxAgeHours)
	if g == nil || o != nil {
		return validateOverride(o)
	}
	rows, err := s.q.EvalDoneByDeployment(ctx, q, dbsqlc.EvalDoneByDeploymentParams{DeploymentID: d.ID, Limit: 200})
	if err != nil {
		return err
	}
	for _, row := range rows {
		var c edgemodel.Target
		if json.Unmarshal([]byte(row.Candidate), &c) != nil || !sameTarget(c, candidate) {
			continue
		}
		var sum evalscore.Summary
		if !row.Summary.Valid || json.Unmarshal([]byte(row.Summary.String), &sum) != nil {
			continue
		}
		ok, why := g.Allows(row.State, fromMs(row.FinishedAt.Int64), &sum, s.now())
		if ok {
			return nil
		}
		return errorf(edgemodel.CodeEvalRequired, "the promotion gate refuses %s: %s (eval %s); run a new eval, or promote with {\"override\": {\"reason\": \"…\"}}", targetName(candidate), why, row.ID)
	}
	return errorf(edgemodel.CodeEvalRequired, "the promotion gate needs a done eval of %s and there is none; create one with POST …/deployments/%s/evals, or promote with {\"override\": {\"reason\": \"…\"}}", targetName(candidate), d.ID)
}

// targetName names a target in a sentence.
func targetName(t edgemodel.Target) string {
	switch t.Kind {
	case edgemodel.TargetBaseModel:
		return "base model " + t.Model
	case edgemodel.TargetCheckpoint:
		return fmt.Sprintf("checkpoint %d of job %s", t.Step, t.JobID)
	case edgemodel.TargetFinalAdapter:
		return "the final adapter of job " + t.JobID
	}
	return t.Kind
}

// recordOverride records a promotion past the gate in the canary history: on the canary it promoted,
// or, for a target change, as an entry of its own (started and promoted at once, percent 0).
func (s *Service) recordOverride(ctx context.Context, tx dbsqlc.DBTX, d dbsqlc.Deployment, canaryID string, t edgemodel.Target, o *Override) error {
	if o == nil || gateOfRow(d.GateMinWinRate, d.GateMaxAgeHours) == nil {
		return nil
	}
	if canaryID == "" {
		canaryID = newID("cny")
		kind, job, step, model := targetColumns(t)
		now := ms(s.now())
		if err := s.q.CanaryCreate(ctx, tx, dbsqlc.CanaryCreateParams{ID: canaryID, DeploymentID: d.ID, Kind: kind, JobID: job, Step: step,
			Model: model, Percent: 0, Mode: edgemodel.CanarySplit, StartedAt: now, StartedBy: o.By}); err != nil {
			return err
		}
		if err := s.q.CanaryEnd(ctx, tx, dbsqlc.CanaryEndParams{ID: canaryID, Outcome: CanaryPromoted, EndedBy: o.By,
			EndedAt: sql.NullInt64{Int64: now, Valid: true}}); err != nil {
			return err
		}
	}
	s.log.Info("promoted past the promotion gate", "deployment", d.ID, "by", o.By, "reason", o.Reason)
	return s.q.CanaryOverride(ctx, tx, dbsqlc.CanaryOverrideParams{Reason: o.Reason, ID: canaryID})
}
