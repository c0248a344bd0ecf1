package core

import (
	"context"
	"database/sql"
	"errors"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

func keyOut(k dbsqlc.ApiKey) Key {
	return Key{
		ID: k.ID, Label: k.Label, Prefix: k.Prefix, Enabled: k.Enabled, CreatedAt: fromMs(k.CreatedAt),
		LastUsedAt: fromNullMs(k.LastUsedAt), RevokedAt: fromNullMs(k.RevokedAt), Weight: int(k.Weight),
		Limits: rateLimitsOf(k.LimitRequestsPerMinute, k.LimitTokensPerMinute),
	}
}

// keyWithUsage returns a key with what its budget's period has used: that key's usage alone (not the
// deployment's every key's, as a list reads), and no read for a key without a budget.
func (s *Service) keyWithUsage(ctx context.Context, row dbsqlc.ApiKey) (*Key, error) {
	k := keyOut(row)
	u, start := s.budgetUsage(budgetOf(row.BudgetTokens, row.BudgetPeriod))
	if u == nil {
		return &k, nil
	}
	used, err := s.tokensUsed(ctx, row.DeploymentID, row.ID, start, u.ResetsAt)
	if err != nil {
		return nil, err
	}
	u.Used, k.Budget = used, u
	return &k, nil
}

// NewKey asks for a key: its label and, optionally, its token budget.
type NewKey struct {
	Label  string
	Budget *edgemodel.Budget // nil: none
	Weight int               // 0: 1
}

// IssueKey creates an API key for a fixed-key deployment and returns its plaintext, the only time it is
// ever available: only its hash and display prefix are stored.
func (s *Service) IssueKey(ctx context.Context, pr Project, deploymentID, label string) (*IssuedKey, error) {
	return s.IssueKeyWith(ctx, pr, deploymentID, NewKey{Label: label})
}

// IssueKeyWith is IssueKey with the key's budget set in the same transaction.
func (s *Service) IssueKeyWith(ctx context.Context, pr Project, deploymentID string, req NewKey) (*IssuedKey, error) {
	label := req.Label
	if err := ValidateLabel(label); err != nil {
		return nil, err
	}
	if req.Budget != nil {
		if err := ValidateBudget(*req.Budget); err != nil {
			return nil, err
		}
	}
	var weight *int
	if req.Weight != 0 {
		if err := ValidateWeight(req.Weight); err != nil {
			return nil, err
		}
		weight = &req.Weight
	}
	plaintext := NewKeyPlaintext()
	hash := HashSecret(plaintext)
	var out dbsqlc.ApiKey
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, deploymentID)
		if err != nil {
			return err
		}
		if d.AuthMode != edgemodel.AuthFixedAPIKey {
			return errorf(edgemodel.CodeAuthMode, "keys can be issued only in fixed_api_key mode; this endpoint is open (authMode none)")
		}
		n, err := s.q.KeyCountEnabled(ctx, tx, d.ID)
		if err != nil {
			return err
		}
		if n >= MaxEnabledKeys {
			return errorf(edgemodel.CodeKeyLimit, "an endpoint may have at most %d enabled keys; revoke one first", MaxEnabledKeys)
		}
		id := newID("key")
		err = s.q.KeyCreate(ctx, tx, dbsqlc.KeyCreateParams{
			ID: id, DeploymentID: d.ID, Label: label, Prefix: plaintext[:KeyDisplayLen], Hash: hash[:], CreatedAt: ms(s.now()),
		})
		if err != nil {
			if db.UniqueOn(db.Map(err), "api_keys.deployment_id") {
				return errorf(edgemodel.CodeLabelTaken, "an enabled key of this endpoint is already labelled %q; labels must be unique among enabled keys", label)
			}
			return err
		}
		if err := s.setKeyBudget(ctx, tx, id, BudgetChange{Set: req.Budget != nil, Value: req.Budget}); err != nil {
			return err
		}
		if err := s.setKeyWeight(ctx, tx, id, weight); err != nil {
			return err
		}
		// Edge processes hold the deployment's enabled key hashes.
		if err := tx.changedDeployment(ctx, d.ID); err != nil {
			return err
		}
		out, err = s.q.KeyGet(ctx, tx, dbsqlc.KeyGetParams{ID: id, DeploymentID: d.ID})
		return err
	})
	if err != nil {
		return nil, err
	}
	k, err := s.keyWithUsage(ctx, out)
	if err != nil {
		return nil, err
	}
	return &IssuedKey{Key: *k, Plaintext: plaintext}, nil
}

// ListKeys returns every key of a deployment, revoked ones included, with lastUsedAt.
func (s *Service) ListKeys(ctx context.Context, pr Project, deploymentID string) ([]Key, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.KeyListByDeployment(ctx, s.db, d.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(rows))
	budgets := make([]*edgemodel.Budget, 0, len(rows))
	for _, r := range rows {
		out = append(out, keyOut(r))
		budgets = append(budgets, budgetOf(r.BudgetTokens, r.BudgetPeriod))
	}
	if err := s.keysBudgetUsage(ctx, s.db, d.ID, out, budgets); err != nil {
		return nil, err
	}
	return out, nil
}

// GetKey returns a key of a deployment, with its budget's usage.
func (s *Service) GetKey(ctx context.Context, pr Project, deploymentID, keyID string) (*Key, error) {
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	k, err := s.q.KeyGet(ctx, s.db, dbsqlc.KeyGetParams{ID: keyID, DeploymentID: d.ID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, notFound("key")
		}
		return nil, err
	}
	return s.keyWithUsage(ctx, k)
}

// RevokeKey disables a key for good. Revoking a revoked key changes nothing.
func (s *Service) RevokeKey(ctx context.Context, pr Project, deploymentID, keyID string) (*Key, error) {
	var out dbsqlc.ApiKey
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		d, err := s.getDeployment(ctx, tx, pr, deploymentID)
		if err != nil {
			return err
		}
		// Look the key up under this deployment first: a key id of another deployment is not found.
		if _, err := s.q.KeyGet(ctx, tx, dbsqlc.KeyGetParams{ID: keyID, DeploymentID: d.ID}); err != nil {
			if errors.Is(db.Map(err), db.ErrNotFound) {
				return notFound("key")
			}
			return err
		}
		if err := s.q.KeyRevoke(ctx, tx, dbsqlc.KeyRevokeParams{RevokedAt: sql.NullInt64{Int64: ms(s.now()), Valid: true}, ID: keyID}); err != nil {
			return err
		}
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
