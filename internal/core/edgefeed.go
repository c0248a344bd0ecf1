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
// edge of svc server needs none of this: its cache is flushed in-process (edgeCache.invalidate). Both
// happen in changeForEdges, for every change.

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

// changeForEdges is the one way to change something an edge serves from (a deployment, its keys, its
// target's job, its expiry): fn runs in one transaction and names what it changed through tx, whose
// methods write the feed rows in that same transaction; once it has committed, the in-process edge
// cache is flushed, which also wakes the feed's followers. Nothing else writes the feed or flushes the
// cache, so no change can reach the database and not the edges.
func (s *Service) changeForEdges(ctx context.Context, fn func(tx edgeTx) error) error {
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error { return fn(edgeTx{Tx: tx, s: s}) })
	if err != nil {
		return err
	}
	s.edge.invalidate()
	return nil
}

// edgeTx is the transaction of a change that edges must see (changeForEdges). It is a *sql.Tx for
// every query, plus the methods that note in the feed which snapshots the change touched.
type edgeTx struct {
	*sql.Tx
	s *Service
}

// changedDeployment notes that the deployment's snapshot changed. Call it before a delete: the row
// names the deployment's slug, read from the deployment.
func (tx edgeTx) changedDeployment(ctx context.Context, deploymentID string) error {
	return tx.s.q.EdgeChangeAddForDeployment(ctx, tx, dbsqlc.EdgeChangeAddForDeploymentParams{Now: ms(tx.s.now()), DeploymentID: deploymentID})
}

// changedJob notes that the snapshots of the deployments targeting the job changed.
func (tx edgeTx) changedJob(ctx context.Context, jobID string) error {
	return tx.s.q.EdgeChangeAddForJob(ctx, tx, dbsqlc.EdgeChangeAddForJobParams{Now: ms(tx.s.now()), JobID: sql.NullString{String: jobID, Valid: true}})
}

// changedOrg notes that the snapshots of the org's deployments changed.
func (tx edgeTx) changedOrg(ctx context.Context, orgID string) error {
	return tx.s.q.EdgeChangeAddForOrg(ctx, tx, dbsqlc.EdgeChangeAddForOrgParams{Now: ms(tx.s.now()), OrgID: orgID})
}

// changedSlug notes that the snapshot of slug changed (a slug that now exists, say).
func (tx edgeTx) changedSlug(ctx context.Context, slug string) error {
	return tx.s.q.EdgeChangeAdd(ctx, tx, dbsqlc.EdgeChangeAddParams{Slug: slug, CreatedAt: ms(tx.s.now())})
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
	b, err := s.q.EdgeChangeBounds(ctx, s.db)
	return b.Newest, err
}

// EdgeChangesAfter returns up to limit changes after the feed position after, oldest first, and the
// feed's head (its newest id, which may lie beyond the changes returned). reset reports that after is not a position this feed can continue from (its rows were
// pruned, or it comes from another database, or after is negative: a follower with nothing yet):
// the follower must then drop every snapshot read before head, and continue from head.
func (s *Service) EdgeChangesAfter(ctx context.Context, after int64, limit int) (changes []EdgeChange, head int64, reset bool, err error) {
	b, err := s.q.EdgeChangeBounds(ctx, s.db)
	if err != nil {
		return nil, 0, false, err
	}
	if after < 0 || after > b.Newest || (b.Oldest > 0 && after < b.Oldest-1) {
		return nil, b.Newest, true, nil
	}
	rows, err := s.q.EdgeChangeListAfter(ctx, s.db, dbsqlc.EdgeChangeListAfterParams{After: after, Lim: int64(limit)})
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
	b, err := s.q.EdgeChangeBounds(ctx, s.db)
	if err != nil {
		return err
	}
	if _, err := s.q.EdgeChangePrune(ctx, s.db, dbsqlc.EdgeChangePruneParams{Before: ms(now.Add(-EdgeChangeRetention)), Newest: b.Newest}); err != nil {
		return err
	}
	_, err = s.q.EdgeBatchPrune(ctx, s.db, ms(now.Add(-EdgeBatchRetention)))
	return err
}

// ReplicaPoll is how often a replica reads the feed's head when no notification woke it
// (FollowReplicas): the bound on how late a change made by another replica reaches this one's edge
// cache and the edges that follow it, should a notification be lost.
var ReplicaPoll = time.Second

// FollowReplicas keeps this process in step with the other replicas of svc server on the same
// PostgreSQL database (docs/DEPLOY.md): when the feed's head moves, a change committed elsewhere may
// touch what this process serves, so its edge cache is flushed, which also wakes the change feeds it
// streams to edges. A notification (LISTEN) wakes it as soon as such a change commits; the feed's table
// stays the truth, read at least every ReplicaPoll. Until ctx ends; on SQLite, where one process owns
// the database and flushes in changeForEdges, it returns at once.
func (s *Service) FollowReplicas(ctx context.Context) {
	if !db.Shared(s.db) {
		return
	}
	wake := db.Listen(ctx, s.db, s.log, db.EdgeChangesChannel)
	head, _ := s.EdgeFeedHead(ctx)
	t := time.NewTicker(ReplicaPoll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		h, err := s.EdgeFeedHead(ctx)
		if err != nil {
			if !failing && ctx.Err() == nil {
				s.log.Warn("reading the change feed's head failed; changes made by other replicas wait", "err", err)
			}
			failing = true
			continue
		}
		if failing {
			s.log.Info("reading the change feed's head again")
			failing = false
		}
		if h != head {
			head = h
			s.edge.invalidate()
		}
	}
}
