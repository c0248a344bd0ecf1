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

// Sweep does one round of background cleanup: deletes runs past their expiresAt, retires expired
// anonymous endpoints, drains the run history of deleted deployments (then frees their slugs), prunes
// the edge change feed and expired sign-in codes, deletes expired tokens, deletes anonymous identities (with their orgs) that have
// no endpoint left and were unused for AnonymousIdleLifetime, and deletes usage aggregates older than
// UsageRetention.
func (s *Service) Sweep(ctx context.Context) error {
	now := ms(s.now())
	// Usage rows are few (one per deployment, key and hour), so one statement clears an hour's worth.
	if _, err := s.q.UsageDeleteBefore(ctx, s.db, now-UsageRetention.Milliseconds()); err != nil {
		return err
	}
	if _, err := s.q.UsageArmDeleteBefore(ctx, s.db, now-UsageRetention.Milliseconds()); err != nil {
		return err
	}
	for {
		n, err := s.q.RunDeleteExpired(ctx, s.db, dbsqlc.RunDeleteExpiredParams{ExpiresAt: sql.NullInt64{Int64: now, Valid: true}, Limit: sweepBatch})
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}

	expired, err := s.q.DeploymentListExpired(ctx, s.db, dbsqlc.DeploymentListExpiredParams{ExpiresAt: sql.NullInt64{Int64: now, Valid: true}, Limit: 100})
	if err != nil {
		return err
	}
	for _, id := range expired {
		if err := s.changeForEdges(ctx, func(tx edgeTx) error { return s.deleteDeploymentTx(ctx, tx, id) }); err != nil {
			return err
		}
	}

	deleted, err := s.q.DeploymentListDeleted(ctx, s.db, 100)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		for {
			n, err := s.q.RunDeleteBatchByDeployment(ctx, s.db, dbsqlc.RunDeleteBatchByDeploymentParams{DeploymentID: id, Limit: sweepBatch})
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
		if err := s.q.DeploymentDelete(ctx, s.db, id); err != nil {
			return err
		}
	}

	if err := s.pruneEdgeFeed(ctx); err != nil {
		return err
	}
	if _, err := s.q.SignInCodeDeleteExpired(ctx, s.db, now); err != nil {
		return err
	}
	for {
		n, err := s.q.TokenDeleteExpired(ctx, s.db, dbsqlc.TokenDeleteExpiredParams{ExpiresAt: sql.NullInt64{Int64: now, Valid: true}, Limit: sweepBatch})
		if err != nil {
			return err
		}
		if n < sweepBatch {
			break
		}
	}
	return s.sweepAnonymous(ctx, now)
}

// sweepAnonymous deletes stale anonymous identities: no deployment left in their orgs, and no
// request with their token for AnonymousIdleLifetime. Their orgs go with them (projects and jobs
// cascade), unless someone else is a member too.
func (s *Service) sweepAnonymous(ctx context.Context, now int64) error {
	for {
		ids, err := s.q.IdentityListStaleAnonymous(ctx, s.db, dbsqlc.IdentityListStaleAnonymousParams{
			IdleBefore: sql.NullInt64{Int64: now - s.AnonymousIdleLifetime.Milliseconds(), Valid: true}, Lim: 100,
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
				if err := s.q.OrgDeleteIfSoleMember(ctx, tx, id); err != nil {
					return err
				}
				return s.q.IdentityDelete(ctx, tx, id)
			})
			if err != nil {
				return err
			}
		}
		if len(ids) < 100 || ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// RunSweeper sweeps every interval until ctx ends, on one replica at a time: on PostgreSQL only while
// this process leads (db.RunAsLeader; another replica takes over within seconds when it dies), on
// SQLite always.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	db.RunAsLeader(ctx, s.db, s.log, func(ctx context.Context) {
		s.leading.Store(true)
		defer s.leading.Store(false)
		every(ctx, interval, func() {
			if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("sweeper round failed", "err", err)
			}
		})
	})
}

// Leading reports whether this process runs the background work now (RunSweeper).
func (s *Service) Leading() bool { return s.leading.Load() }

// every runs f now and then every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
