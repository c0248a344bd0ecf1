package core

import (
	"context"
	"database/sql"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// sweepBatch bounds each delete so that the sweeper never holds the write lock for long.
const sweepBatch = 1000

// Sweep does one round of background cleanup: deletes runs past their expiresAt, drains the run
// history of deleted deployments (then frees their slugs), retires expired anonymous endpoints, and
// deletes usage aggregates older than UsageRetention.
func (s *Service) Sweep(ctx context.Context) error {
	now := ms(s.now())
	// Usage rows are few (one per deployment, key and hour), so one statement clears an hour's worth.
	if _, err := db.Q.UsageDeleteBefore(ctx, s.db, now-UsageRetention.Milliseconds()); err != nil {
		return err
	}
	for {
		n, err := db.Q.RunDeleteExpired(ctx, s.db, dbsqlc.RunDeleteExpiredParams{ExpiresAt: sql.NullInt64{Int64: now, Valid: true}, Limit: sweepBatch})
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}

	expired, err := db.Q.DeploymentListExpired(ctx, s.db, dbsqlc.DeploymentListExpiredParams{ExpiresAt: sql.NullInt64{Int64: now, Valid: true}, Limit: 100})
	if err != nil {
		return err
	}
	for _, id := range expired {
		if err := db.Tx(ctx, s.db, func(tx *sql.Tx) error { return s.deleteDeploymentTx(ctx, tx, id) }); err != nil {
			return err
		}
	}
	if len(expired) > 0 {
		s.edge.invalidate()
	}

	deleted, err := db.Q.DeploymentListDeleted(ctx, s.db, 100)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		for {
			n, err := db.Q.RunDeleteBatchByDeployment(ctx, s.db, dbsqlc.RunDeleteBatchByDeploymentParams{DeploymentID: id, Limit: sweepBatch})
			if err != nil {
				return err
			}
			if n < sweepBatch {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if err := db.Q.DeploymentDelete(ctx, s.db, id); err != nil {
			return err
		}
	}
	return nil
}

// RunSweeper sweeps every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("sweeper round failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
