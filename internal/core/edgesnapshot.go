package core

import (
	"context"

	"github.com/svcdev/svc/internal/edgemodel"
)

// EdgeSnapshot is what an svc edge process needs to serve one slug without the database: the
// deployment as the embedded edge sees it and the hashes of its enabled keys (never a plaintext).
type EdgeSnapshot struct {
	// ChangeID is the feed's head when the snapshot was read (read before the deployment): every change
	// up to it is reflected. An edge uses it to tell which snapshots a feed reset makes doubtful.
	ChangeID int64
	// Deployment is nil when the slug serves nothing (unknown, deleted, expired, or a target that went
	// bad): the edge answers 404.
	Deployment *edgemodel.EdgeDeployment
	Keys       []edgemodel.EdgeSnapshotKey
	// Disabled: the deployment and its keys are those of a disabled endpoint, which the edge answers
	// 404 too, counting the call in its usage under the key presented where it is one of Keys (as the
	// embedded edge does with edgemodel.DisabledError).
	Disabled bool
}

// EdgeSnapshot reads the snapshot of slug, applying the same rules as the embedded edge
// (EdgeDeployment): what it would answer 404 for has no Deployment.
func (s *Service) EdgeSnapshot(ctx context.Context, slug string) (*EdgeSnapshot, error) {
	head, err := s.EdgeFeedHead(ctx)
	if err != nil {
		return nil, err
	}
	snap := &EdgeSnapshot{ChangeID: head}
	d, err := s.loadEdgeDeployment(ctx, slug)
	if disabled := edgemodel.DisabledDeployment(err); disabled != nil {
		d, err, snap.Disabled = disabled, nil, true
	}
	if err != nil {
		if edgemodel.CodeOf(err) == edgemodel.CodeNotFound {
			return snap, nil
		}
		return nil, err
	}
	if d.Expired(s.now()) {
		return snap, nil
	}
	rows, err := s.q.KeyListEnabledHashes(ctx, s.db, d.ID)
	if err != nil {
		return nil, err
	}
	snap.Deployment = d
	snap.Keys = make([]edgemodel.EdgeSnapshotKey, 0, len(rows))
	for _, r := range rows {
		k := edgemodel.EdgeSnapshotKey{ID: r.ID, Limits: rateLimitsOf(r.LimitRequestsPerMinute, r.LimitTokensPerMinute),
			Budget: budgetOf(r.BudgetTokens, r.BudgetPeriod), Weight: int(r.Weight)}
		if copy(k.Hash[:], r.Hash) != len(k.Hash) {
			continue // not a SHA-256: no key could match it
		}
		snap.Keys = append(snap.Keys, k)
	}
	return snap, nil
}

// ErrEdgeUnauthorized is the answer to a missing, unknown or revoked key, or a key of another endpoint.
var ErrEdgeUnauthorized = errEdgeUnauthorized

// ErrEdgeNotFound is the answer for a slug that serves nothing.
var ErrEdgeNotFound = errEdgeNotFound
