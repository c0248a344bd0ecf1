package core

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// Admission settings of a deployment and its keys (docs/OPERATIONS.md, "Admission"): a deployment may
// bound its calls' wait for their model's turn itself (queueTimeoutMs, over the model's), and each key
// has a weight, its share of its model's turns against the other keys waiting (default 1).

// Bounds of the admission settings.
const (
	MaxQueueTimeoutMs = 600_000
	MaxKeyWeight      = 100
)

// ValidateQueueTimeout checks a deployment's queueTimeoutMs: 1 to MaxQueueTimeoutMs.
func ValidateQueueTimeout(ms int) error {
	if ms < 1 || ms > MaxQueueTimeoutMs {
		return errorf(edgemodel.CodeInvalidRequest, "queueTimeoutMs must be a whole number of milliseconds from 1 to %d, or null for the model's (got %d)", MaxQueueTimeoutMs, ms)
	}
	return nil
}

// ValidateWeight checks a key's weight: 1 to MaxKeyWeight.
func ValidateWeight(w int) error {
	if w < 1 || w > MaxKeyWeight {
		return errorf(edgemodel.CodeInvalidRequest, "weight must be a whole number from 1 to %d (got %d)", MaxKeyWeight, w)
	}
	return nil
}

func queueTimeoutOf(ms sql.NullInt64) time.Duration {
	if !ms.Valid {
		return 0
	}
	return time.Duration(ms.Int64) * time.Millisecond
}

func queueTimeoutMsOf(ms sql.NullInt64) *int {
	if !ms.Valid {
		return nil
	}
	n := int(ms.Int64)
	return &n
}

// setDeploymentQueueTimeout applies a change of a deployment's queueTimeoutMs (nil Value: the model's)
// inside the caller's transaction.
func (s *Service) setDeploymentQueueTimeout(ctx context.Context, tx dbsqlc.DBTX, id string, c LimitChange) error {
	if !c.Set {
		return nil
	}
	var v sql.NullInt64
	if c.Value != nil {
		if err := ValidateQueueTimeout(*c.Value); err != nil {
			return err
		}
		v = sql.NullInt64{Int64: int64(*c.Value), Valid: true}
	}
	if err := s.q.DeploymentQueueTimeoutSet(ctx, tx, dbsqlc.DeploymentQueueTimeoutSetParams{QueueTimeoutMs: v, UpdatedAt: ms(s.now()), ID: id}); err != nil {
		return fmt.Errorf("set deployment queue timeout: %w", err)
	}
	return nil
}

// setKeyWeight sets a key's weight (nil: unchanged) inside the caller's transaction.
func (s *Service) setKeyWeight(ctx context.Context, tx dbsqlc.DBTX, id string, w *int) error {
	if w == nil {
		return nil
	}
	if err := ValidateWeight(*w); err != nil {
		return err
	}
	if err := s.q.KeyWeightSet(ctx, tx, dbsqlc.KeyWeightSetParams{Weight: int64(*w), ID: id}); err != nil {
		return fmt.Errorf("set key weight: %w", err)
	}
	return nil
}
