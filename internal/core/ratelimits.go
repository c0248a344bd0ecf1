package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// MaxRateLimit bounds a limit so that a typo of extra zeros is caught rather than stored.
const MaxRateLimit = 1_000_000_000

// LimitChange changes one limit in an update: the zero value leaves it, Set with a nil Value clears it
// (unlimited), Set with a Value sets it.
type LimitChange struct {
	Set   bool
	Value *int
}

// RateLimitsChange changes some of the limits of a deployment or a key; fields left at their zero
// value keep their current limit.
type RateLimitsChange struct {
	RequestsPerMinute LimitChange
	TokensPerMinute   LimitChange
}

// IsZero reports whether the change changes nothing.
func (c RateLimitsChange) IsZero() bool { return !c.RequestsPerMinute.Set && !c.TokensPerMinute.Set }

// KeyChange is a partial update of a key: its limits, its budget and its weight.
type KeyChange struct {
	Limits RateLimitsChange
	Budget BudgetChange
	Weight *int // nil: unchanged
}

// ApplyRateLimits returns current with the changes of c. A changed field must be nil (unlimited) or a
// whole number from 1 to MaxRateLimit; otherwise the answer is invalid_request naming the field, and
// nothing changes.
func ApplyRateLimits(current edgemodel.RateLimits, c RateLimitsChange) (edgemodel.RateLimits, error) {
	out := current
	for _, f := range []struct {
		name   string
		change LimitChange
		dst    **int
	}{
		{"requestsPerMinute", c.RequestsPerMinute, &out.RequestsPerMinute},
		{"tokensPerMinute", c.TokensPerMinute, &out.TokensPerMinute},
	} {
		if !f.change.Set {
			continue
		}
		v := f.change.Value
		if v != nil && (*v < 1 || *v > MaxRateLimit) {
			return current, errorf(edgemodel.CodeInvalidRequest, "limits.%s must be a whole number from 1 to %d, or null for unlimited (got %d)", f.name, MaxRateLimit, *v)
		}
		if v != nil {
			n := *v
			v = &n
		}
		*f.dst = v
	}
	return out, nil
}

func rateLimitsOf(rpm, tpm sql.NullInt64) edgemodel.RateLimits {
	var l edgemodel.RateLimits
	if rpm.Valid {
		n := int(rpm.Int64)
		l.RequestsPerMinute = &n
	}
	if tpm.Valid {
		n := int(tpm.Int64)
		l.TokensPerMinute = &n
	}
	return l
}

func rateLimitColumns(l edgemodel.RateLimits) (rpm, tpm sql.NullInt64) {
	if l.RequestsPerMinute != nil {
		rpm = sql.NullInt64{Int64: int64(*l.RequestsPerMinute), Valid: true}
	}
	if l.TokensPerMinute != nil {
		tpm = sql.NullInt64{Int64: int64(*l.TokensPerMinute), Valid: true}
	}
	return rpm, tpm
}

// setDeploymentLimits applies a change of a deployment's limits inside the caller's transaction.
func (s *Service) setDeploymentLimits(ctx context.Context, tx *sql.Tx, d dbsqlc.Deployment, c RateLimitsChange) error {
	l, err := ApplyRateLimits(rateLimitsOf(d.LimitRequestsPerMinute, d.LimitTokensPerMinute), c)
	if err != nil {
		return err
	}
	rpm, tpm := rateLimitColumns(l)
	return s.q.DeploymentLimitsSet(ctx, tx, dbsqlc.DeploymentLimitsSetParams{
		LimitRequestsPerMinute: rpm, LimitTokensPerMinute: tpm, UpdatedAt: ms(s.now()), ID: d.ID,
	})
}

// UpdateKey applies a partial update to a key of a deployment: today its limits. Revoked keys may be
// changed too, harmlessly: they are never accepted again.
func (s *Service) UpdateKey(ctx context.Context, pr Project, deploymentID, keyID string, c KeyChange) (*Key, error) {
	var out dbsqlc.ApiKey
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, deploymentID)
		if err != nil {
			return err
		}
		k, err := s.q.KeyGet(ctx, tx, dbsqlc.KeyGetParams{ID: keyID, DeploymentID: d.ID})
		if err = db.Map(err); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return notFound("key")
			}
			return err
		}
		if !c.Limits.IsZero() {
			l, err := ApplyRateLimits(rateLimitsOf(k.LimitRequestsPerMinute, k.LimitTokensPerMinute), c.Limits)
			if err != nil {
				return err
			}
			rpm, tpm := rateLimitColumns(l)
			if err := s.q.KeyLimitsSet(ctx, tx, dbsqlc.KeyLimitsSetParams{LimitRequestsPerMinute: rpm, LimitTokensPerMinute: tpm, ID: k.ID}); err != nil {
				return fmt.Errorf("set key limits: %w", err)
			}
		}
		if err := s.setKeyBudget(ctx, tx, k.ID, c.Budget); err != nil {
			return err
		}
		if err := s.setKeyWeight(ctx, tx, k.ID, c.Weight); err != nil {
			return err
		}
		// Edge processes hold the deployment's keys with their limits and budgets.
		if err := tx.changedDeployment(ctx, d.ID); err != nil {
			return err
		}
		out, err = s.q.KeyGet(ctx, tx, dbsqlc.KeyGetParams{ID: keyID, DeploymentID: d.ID})
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.keyWithUsage(ctx, out)
}
