package core

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/ratelimit"
)

// Rules of anonymous identities (docs/ARCHITECTURE.md, "Where each rule lives").
const (
	AnonymousEndpointLimit = 5
	AnonymousLifetime      = 7 * 24 * time.Hour
	AnonymousIdleLifetime  = 30 * 24 * time.Hour
)

// Service applies the rules of the service to the database. One Service serves the management API,
// the edge and the sweeper of a process.
type Service struct {
	db      *sql.DB
	q       db.Querier // the queries of db's engine
	catalog edgemodel.Catalog
	log     *slog.Logger
	now     func() time.Time

	// urlFor builds the public URL of a deployment from its slug.
	urlFor func(slug string) string

	// evalCreated wakes this process's eval worker when an eval is created here (buffered: one
	// wake-up pending at most); the worker polls the store for the others' (evalPoll).
	evalCreated chan struct{}

	// edge caches the deployment snapshots and key hashes the edge looks up on every request; every
	// change made through this Service invalidates it at once.
	edge *edgeCache

	// ThinkingSecret is the key the edge signs translated thinking blocks with: the export reads a
	// Messages history's thinking as reasoning only when svc signed it, as the edge did.
	ThinkingSecret []byte

	// Prepare, when set, is called after a deployment is created or re-targeted so that the runtimes
	// can load what the target needs (a LoRA adapter). Failures are logged, not returned.
	Prepare func(ctx context.Context, d *edgemodel.EdgeDeployment) error

	// artifactsDir is the only folder local artifacts may be in ("" allows none).
	artifactsDir string

	limits limiters

	// leading is true while this process runs the background work (RunSweeper).
	leading atomic.Bool

	// runs writes the runs edges ship (IngestRuns).
	runs RunIngester

	// Tunables; the defaults suit production and tests may lower them.
	AnonymousEndpointLimit int           // live endpoints per anonymous identity, of any kind
	AnonymousLifetime      time.Duration // lifetime of every endpoint an anonymous identity creates
	AnonymousIdleLifetime  time.Duration // an anonymous identity with no live endpoint, unused this long, is deleted
	DrainThreshold         int64         // runs above which a delete leaves the drain to the sweeper
}

// Options configure a Service.
type Options struct {
	DB      *sql.DB
	Catalog edgemodel.Catalog
	Logger  *slog.Logger
	// URLFor returns the public URL of a deployment, e.g. https://<slug>.<endpoint_domain>.
	URLFor func(slug string) string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// ArtifactsDir is the folder that file:// and plain-path artifacts must be in; "" refuses every
	// local artifact.
	ArtifactsDir string
	// Limits on anonymous mints and sign-in attempts; DefaultLimits when nil.
	Limits *Limits
	// Runs writes the runs that svc edge processes ship (the run recorder); a service without it
	// refuses them.
	Runs RunIngester
	// SharedLimits, when set, counts the mint and sign-in limits in Redis (--redis) instead of in this
	// process alone.
	SharedLimits *ratelimit.Redis
}

// New returns a Service.
func New(o Options) *Service {
	s := &Service{
		db:                     o.DB,
		q:                      db.For(o.DB),
		catalog:                o.Catalog,
		log:                    o.Logger,
		now:                    o.Now,
		urlFor:                 o.URLFor,
		runs:                   o.Runs,
		AnonymousEndpointLimit: AnonymousEndpointLimit,
		AnonymousLifetime:      AnonymousLifetime,
		AnonymousIdleLifetime:  AnonymousIdleLifetime,
		DrainThreshold:         5000,
		evalCreated:            make(chan struct{}, 1),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if o.ArtifactsDir != "" {
		if abs, err := filepath.Abs(o.ArtifactsDir); err == nil {
			s.artifactsDir = abs
		}
	}
	limits := DefaultLimits
	if o.Limits != nil {
		limits = *o.Limits
	}
	s.limits = newLimiters(limits, s.now, o.SharedLimits)
	if s.log == nil {
		s.log = slog.Default()
	}
	s.edge = newEdgeCache()
	return s
}

// Catalog returns the model catalog the service validates targets against.
func (s *Service) Catalog() edgemodel.Catalog { return s.catalog }

// ModelFleet returns the replicas of catalog model id as this server's edge sees them, false for a
// model without replicas (docs/API.md, "A model's replicas").
func (s *Service) ModelFleet(id string) (edgemodel.Fleet, bool) {
	if f, ok := s.catalog.(edgemodel.Fleets); ok {
		return f.Fleet(id)
	}
	return edgemodel.Fleet{}, false
}

// URLFor returns the public URL of the deployment with this slug.
func (s *Service) URLFor(slug string) string { return s.urlFor(slug) }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMs(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMs(v.Int64)
	return &t
}
