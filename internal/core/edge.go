package core

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/edgemodel"
)

// edgeCacheMax bounds the cache; past it the cache starts over (lookups of random slugs cannot grow it
// without bound, and misses are not cached at all).
const edgeCacheMax = 50_000

type edgeCache struct {
	mu          sync.RWMutex
	deployments map[string]*edgemodel.EdgeDeployment // by slug, only servable deployments
	disabled    map[string]*edgemodel.EdgeDeployment // by slug, disabled deployments: 404, counted in their usage
	keys        map[[32]byte]edgeKey                 // by key hash, only enabled keys, with their limits
	// gen counts invalidations. A loader notes it before reading the database and stores its result
	// only if it has not moved: otherwise a read that raced a change (a revoke committing between the
	// read and the store) would put the old state back into the cache after the flush.
	gen uint64
	// changed is closed by every invalidation, waking those that follow the edge change feed
	// (core/edgefeed.go).
	changed chan struct{}
}

type edgeKey struct {
	id           string
	deploymentID string
	limits       edgemodel.RateLimits
	budget       *edgemodel.Budget
	weight       int
}

func newEdgeCache() *edgeCache {
	return &edgeCache{deployments: map[string]*edgemodel.EdgeDeployment{}, disabled: map[string]*edgemodel.EdgeDeployment{}, keys: map[[32]byte]edgeKey{},
		changed: make(chan struct{})}
}

// invalidate drops every cached entry. Changes are rare next to edge requests, so a full flush keeps
// the rule "a change takes effect at once" obviously true.
func (c *edgeCache) invalidate() {
	c.mu.Lock()
	c.deployments = map[string]*edgemodel.EdgeDeployment{}
	c.disabled = map[string]*edgemodel.EdgeDeployment{}
	c.keys = map[[32]byte]edgeKey{}
	c.gen++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// storeDeployment caches d unless the cache was invalidated since gen was read.
func (c *edgeCache) storeDeployment(gen uint64, slug string, d *edgemodel.EdgeDeployment, disabled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	m := &c.deployments
	if disabled {
		m = &c.disabled
	}
	if len(*m) >= edgeCacheMax {
		*m = map[string]*edgemodel.EdgeDeployment{}
	}
	(*m)[slug] = d
}

// storeKey caches k unless the cache was invalidated since gen was read.
func (c *edgeCache) storeKey(gen uint64, hash [32]byte, k edgeKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if len(c.keys) >= edgeCacheMax {
		c.keys = map[[32]byte]edgeKey{}
	}
	c.keys[hash] = k
}

var errEdgeNotFound = edgemodel.ErrEdgeNotFound

// storeAway is what the edge gets when the store cannot say what a slug serves or whose a key is (the
// database does not answer: a PostgreSQL outage, a lost connection): unavailable, a 503 with
// Retry-After that clients retry, never a 500. The store's own error is logged, not answered.
func (s *Service) storeAway(what string, err error) error {
	s.log.Warn("edge: the store does not answer; the call is answered 503", "reading", what, "err", err)
	return &edgemodel.Error{Code: edgemodel.CodeUnavailable, RetryAfter: 5 * time.Second,
		Message: "the " + what + " cannot be read now: the database does not answer"}
}

// EdgeDeployment returns the servable deployment with this slug. Unknown, disabled, deleted and expired
// deployments all answer not_found, whatever the caller's credentials.
func (s *Service) EdgeDeployment(ctx context.Context, slug string) (*edgemodel.EdgeDeployment, error) {
	s.edge.mu.RLock()
	d, off, gen := s.edge.deployments[slug], s.edge.disabled[slug], s.edge.gen
	s.edge.mu.RUnlock()
	if off != nil {
		return nil, &edgemodel.DisabledError{Deployment: off}
	}
	if d == nil {
		var err error
		if d, err = s.loadEdgeDeployment(ctx, slug); err != nil {
			if off := edgemodel.DisabledDeployment(err); off != nil {
				s.edge.storeDeployment(gen, slug, off, true) // enabling it again flushes the cache
			}
			return nil, err
		}
		s.edge.storeDeployment(gen, slug, d, false)
	}
	if d.Expired(s.now()) {
		return nil, errEdgeNotFound
	}
	return d, nil
}

func (s *Service) loadEdgeDeployment(ctx context.Context, slug string) (*edgemodel.EdgeDeployment, error) {
	row, err := s.q.DeploymentGetBySlug(ctx, s.db, slug)
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, errEdgeNotFound
		}
		return nil, s.storeAway("endpoint", err)
	}
	t, err := s.resolveTarget(ctx, s.db, row.ProjectID, targetOf(row))
	if err != nil {
		if edgemodel.CodeOf(err) != "" {
			if !row.Enabled {
				return nil, errEdgeNotFound // nothing to warn of while it serves nothing
			}
			// The target went bad after creation (an artifact was removed, a model unregistered): the
			// endpoint cannot serve until it is re-targeted.
			s.log.Warn("edge: deployment target no longer valid", "slug", slug, "err", err)
			return nil, errEdgeNotFound
		}
		return nil, s.storeAway("endpoint's target", err)
	}
	d := &edgemodel.EdgeDeployment{
		ID: row.ID, Slug: row.Slug, ProjectID: row.ProjectID, Target: t.Target, BaseModel: t.BaseModel,
		Adapter: t.Adapter, AdapterName: t.AdapterName, AuthMode: row.AuthMode,
		Retention: edgemodel.Retention{Mode: row.RunRetentionMode, Days: int(row.RunRetentionDays)},
		CreatedAt: time.UnixMilli(row.CreatedAt).UTC(), Limits: rateLimitsOf(row.LimitRequestsPerMinute, row.LimitTokensPerMinute),
		Budget: budgetOf(row.BudgetTokens, row.BudgetPeriod), QueueTimeout: queueTimeoutOf(row.QueueTimeoutMs),
	}
	if row.ExpiresAt.Int64 != 0 {
		d.SetExpiresAt(time.UnixMilli(row.ExpiresAt.Int64))
	}
	if d.Canary, err = s.edgeCanary(ctx, s.db, row, d); err != nil {
		return nil, s.storeAway("endpoint's canary", err)
	}
	if !row.Enabled {
		// not_found as for an unknown slug, carrying the endpoint so that the edge counts the refused
		// call in its usage; cached as disabled until the next change (enabling it flushes the cache).
		return nil, &edgemodel.DisabledError{Deployment: d}
	}
	return d, nil
}

var errEdgeUnauthorized = edgemodel.ErrEdgeUnauthorized

// EdgeAuthorize checks the key presented to a deployment and returns it with its limits (the zero
// EdgeKey in none mode, where no key is checked).
func (s *Service) EdgeAuthorize(ctx context.Context, d *edgemodel.EdgeDeployment, presented string) (edgemodel.EdgeKey, error) {
	if d.AuthMode == edgemodel.AuthNone {
		return edgemodel.EdgeKey{}, nil
	}
	if presented == "" {
		return edgemodel.EdgeKey{}, errEdgeUnauthorized
	}
	hash := HashSecret(presented)
	s.edge.mu.RLock()
	k, ok := s.edge.keys[hash]
	gen := s.edge.gen
	s.edge.mu.RUnlock()
	if !ok {
		row, err := s.q.KeyGetByHash(ctx, s.db, hash[:])
		if err = db.Map(err); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return edgemodel.EdgeKey{}, errEdgeUnauthorized
			}
			return edgemodel.EdgeKey{}, s.storeAway("key", err)
		}
		if !row.Enabled || !sameHash(row.Hash, hash) {
			return edgemodel.EdgeKey{}, errEdgeUnauthorized
		}
		k = edgeKey{id: row.ID, deploymentID: row.DeploymentID, limits: rateLimitsOf(row.LimitRequestsPerMinute, row.LimitTokensPerMinute),
			budget: budgetOf(row.BudgetTokens, row.BudgetPeriod), weight: int(row.Weight)}
		s.edge.storeKey(gen, hash, k)
	}
	if k.deploymentID != d.ID {
		return edgemodel.EdgeKey{}, errEdgeUnauthorized
	}
	return edgemodel.EdgeKey{ID: k.id, Limits: k.limits, Budget: k.budget, Weight: k.weight}, nil
}
