package core

import (
	"context"
	"database/sql"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// The edge change feed (docs/DEPLOY.md, "How edges stay in step"): every change that affects what an
// edge serves writes a row naming the slug, in the transaction of the change, so that the feed misses
// nothing across restarts; svc edge processes follow it and drop the snapshots it names. The embedded
// edge of svc server needs none of this: its cache is flushed in-process (edgeCache.invalidate).

// EdgeChangeRetention is how long feed rows are kept. An edge that comes back after longer is told to
// start over (it drops every snapshot), which is always correct, only slower.
const EdgeChangeRetention = 7 * 24 * time.Hour

// EdgeBatchRetention is how long the ids of applied run batches are kept: a batch retried after longer
// would be applied again (its runs still only once, by run id).
const EdgeBatchRetention = 24 * time.Hour

// EdgeChange is one row of the feed: the snapshot of Slug changed ("" means every slug).
type EdgeChange struct {
	ID   int64
	Slug string
}

// edgeChangedDeployment notes in tx that the deployment's snapshot changed. Call it before a delete.
func (s *Service) edgeChangedDeployment(ctx context.Context, tx dbsqlc.DBTX, deploymentID string) error {
	return db.Q.EdgeChangeAddForDeployment(ctx, tx, dbsqlc.EdgeChangeAddForDeploymentParams{Now: ms(s.now()), DeploymentID: deploymentID})
}

// edgeChangedJob notes in tx that the snapshots of the deployments targeting the job changed.
func (s *Service) edgeChangedJob(ctx context.Context, tx dbsqlc.DBTX, jobID string) error {
	return db.Q.EdgeChangeAddForJob(ctx, tx, dbsqlc.EdgeChangeAddForJobParams{Now: ms(s.now()), JobID: sql.NullString{String: jobID, Valid: true}})
}

// edgeChangedOrg notes in tx that the snapshots of the org's deployments changed.
func (s *Service) edgeChangedOrg(ctx context.Context, tx dbsqlc.DBTX, orgID string) error {
	return db.Q.EdgeChangeAddForOrg(ctx, tx, dbsqlc.EdgeChangeAddForOrgParams{Now: ms(s.now()), OrgID: orgID})
}

// edgeChangedSlug notes in tx that the snapshot of slug changed (a slug that now exists, say).
func (s *Service) edgeChangedSlug(ctx context.Context, tx dbsqlc.DBTX, slug string) error {
	return db.Q.EdgeChangeAdd(ctx, tx, dbsqlc.EdgeChangeAddParams{Slug: slug, CreatedAt: ms(s.now())})
}

// EdgeChangeSignal returns a channel that is closed at the next change made through this Service. Take
// it before reading the feed, so that a change committed during the read still wakes the reader.
func (s *Service) EdgeChangeSignal() <-chan struct{} {
	s.edge.mu.RLock()
	defer s.edge.mu.RUnlock()
	return s.edge.changed
}

// EdgeFeedHead returns the id of the newest change (0 when there was none).
func (s *Service) EdgeFeedHead(ctx context.Context) (int64, error) {
	b, err := db.Q.EdgeChangeBounds(ctx, s.db)
	return b.Newest, err
}

// EdgeChangesAfter returns up to limit changes after the feed position after, oldest first, and the
// feed's head (its newest id, which may lie beyond the changes returned). reset reports that after is not a position this feed can continue from (its rows were
// pruned, or it comes from another database, or after is negative: a follower with nothing yet):
// the follower must then drop every snapshot read before head, and continue from head.
func (s *Service) EdgeChangesAfter(ctx context.Context, after int64, limit int) (changes []EdgeChange, head int64, reset bool, err error) {
	b, err := db.Q.EdgeChangeBounds(ctx, s.db)
	if err != nil {
		return nil, 0, false, err
	}
	if after < 0 || after > b.Newest || (b.Oldest > 0 && after < b.Oldest-1) {
		return nil, b.Newest, true, nil
	}
	rows, err := db.Q.EdgeChangeListAfter(ctx, s.db, dbsqlc.EdgeChangeListAfterParams{After: after, Lim: int64(limit)})
	if err != nil {
		return nil, 0, false, err
	}
	changes = make([]EdgeChange, len(rows))
	for i, r := range rows {
		changes[i] = EdgeChange{ID: r.ID, Slug: r.Slug}
	}
	return changes, b.Newest, false, nil
}

// pruneEdgeFeed drops feed rows and applied-batch ids past their retention (a sweeper pass).
func (s *Service) pruneEdgeFeed(ctx context.Context) error {
	now := s.now()
	b, err := db.Q.EdgeChangeBounds(ctx, s.db)
	if err != nil {
		return err
	}
	if _, err := db.Q.EdgeChangePrune(ctx, s.db, dbsqlc.EdgeChangePruneParams{Before: ms(now.Add(-EdgeChangeRetention)), Newest: b.Newest}); err != nil {
		return err
	}
	_, err = db.Q.EdgeBatchPrune(ctx, s.db, ms(now.Add(-EdgeBatchRetention)))
	return err
}
