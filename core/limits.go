package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// Limits are the rate limits of a deployment or of one of its keys (docs/API.md, "Rate limits"): at
// most RequestsPerMinute requests and TokensPerMinute tokens (prompt plus completion) a minute. A nil
// field is unlimited; a set one is between 1 and MaxLimit. A call must fit both its deployment's
// limits and its key's.
type Limits struct {
	RequestsPerMinute *int
	TokensPerMinute   *int
}

// MaxLimit bounds a limit so that a typo of extra zeros is caught rather than stored.
const MaxLimit = 1_000_000_000

// Unlimited reports whether neither limit is set.
func (l Limits) Unlimited() bool { return l.RequestsPerMinute == nil && l.TokensPerMinute == nil }

// ApplyLimits returns current with the changes of u. A changed field must be null (unlimited) or a
// whole number from 1 to MaxLimit; otherwise the answer is invalid_request naming the field, and
// nothing changes.
func ApplyLimits(current Limits, u cloudapi.LimitsUpdate) (Limits, error) {
	out := current
	for _, f := range []struct {
		name   string
		change cloudapi.LimitChange
		dst    **int
	}{
		{"requestsPerMinute", u.RequestsPerMinute, &out.RequestsPerMinute},
		{"tokensPerMinute", u.TokensPerMinute, &out.TokensPerMinute},
	} {
		v, changed := f.change.Get()
		if !changed {
			continue
		}
		if v != nil && (*v < 1 || *v > MaxLimit) {
			return current, errorf(CodeInvalidRequest, "limits.%s must be a whole number from 1 to %d, or null for unlimited (got %d)", f.name, MaxLimit, *v)
		}
		if v != nil {
			n := *v
			v = &n
		}
		*f.dst = v
	}
	return out, nil
}

func limitsOf(rpm, tpm sql.NullInt64) Limits {
	var l Limits
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

func (l Limits) columns() (rpm, tpm sql.NullInt64) {
	if l.RequestsPerMinute != nil {
		rpm = sql.NullInt64{Int64: int64(*l.RequestsPerMinute), Valid: true}
	}
	if l.TokensPerMinute != nil {
		tpm = sql.NullInt64{Int64: int64(*l.TokensPerMinute), Valid: true}
	}
	return rpm, tpm
}

func (l Limits) out() cloudapi.Limits {
	return cloudapi.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute}
}

// setDeploymentLimits applies an update of a deployment's limits inside the caller's transaction.
func (s *Service) setDeploymentLimits(ctx context.Context, tx *sql.Tx, d dbsqlc.Deployment, u cloudapi.LimitsUpdate) error {
	l, err := ApplyLimits(limitsOf(d.LimitRequestsPerMinute, d.LimitTokensPerMinute), u)
	if err != nil {
		return err
	}
	rpm, tpm := l.columns()
	return db.Q.DeploymentLimitsSet(ctx, tx, dbsqlc.DeploymentLimitsSetParams{
		LimitRequestsPerMinute: rpm, LimitTokensPerMinute: tpm, UpdatedAt: ms(s.now()), ID: d.ID,
	})
}

// UpdateKey applies a partial update to a key of a deployment: today its limits. Revoked keys may be
// changed too (their limits apply again only if they are ever enabled, which today they never are).
func (s *Service) UpdateKey(ctx context.Context, pr Project, deploymentID, keyID string, req cloudapi.UpdateKeyRequest) (*cloudapi.Key, error) {
	var out dbsqlc.ApiKey
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		d, err := s.getDeployment(ctx, tx, pr, deploymentID)
		if err != nil {
			return err
		}
		k, err := db.Q.KeyGet(ctx, tx, dbsqlc.KeyGetParams{ID: keyID, DeploymentID: d.ID})
		if err = db.Map(err); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return notFound("key")
			}
			return err
		}
		if !req.Limits.IsZero() {
			l, err := ApplyLimits(limitsOf(k.LimitRequestsPerMinute, k.LimitTokensPerMinute), req.Limits)
			if err != nil {
				return err
			}
			rpm, tpm := l.columns()
			if err := db.Q.KeyLimitsSet(ctx, tx, dbsqlc.KeyLimitsSetParams{LimitRequestsPerMinute: rpm, LimitTokensPerMinute: tpm, ID: k.ID}); err != nil {
				return fmt.Errorf("set key limits: %w", err)
			}
		}
		out, err = db.Q.KeyGet(ctx, tx, dbsqlc.KeyGetParams{ID: keyID, DeploymentID: d.ID})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.edge.invalidate()
	k := keyOut(out)
	return &k, nil
}
