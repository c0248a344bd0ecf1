package edgesync

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/logx"
)

// Defaults of Options (docs/DEPLOY.md, "How edges stay in step").
const (
	DefaultMaxStale     = 10 * time.Minute
	DefaultRevalidate   = 30 * time.Second
	DefaultRefreshAhead = 20 * time.Second
	DefaultFetchTimeout = 3 * time.Second
	DefaultFeedIdle     = 15 * time.Second
	DefaultRetryDown    = time.Second
	DefaultMaxEntries   = 50_000
)

// Options tune a Cache; zero values take the defaults.
type Options struct {
	// MaxStale is how long a snapshot keeps serving, after it was last confirmed, while the control
	// plane cannot be reached (--max-stale). Past it the edge answers 503.
	MaxStale time.Duration
	// Revalidate: a snapshot fetched longer ago is fetched again before it serves (the 30 s window of
	// revocations and deletes when the feed is down). RefreshAhead: from this age it is fetched
	// again in the background, so that busy endpoints never wait.
	Revalidate   time.Duration
	RefreshAhead time.Duration
	// FetchTimeout bounds one snapshot fetch; requests waiting on it wait at most this long.
	FetchTimeout time.Duration
	// RunTimeout bounds one read of a stored run (EdgeRun; DefaultRunTimeout).
	RunTimeout time.Duration
	// FeedIdle: a feed that sent nothing (not even a heartbeat) for this long is reconnected.
	FeedIdle time.Duration
	// RetryDown: after a failed contact, requests stop waiting on new fetches for this long (they are
	// answered from what is cached, or 503), so that an outage costs them no time.
	RetryDown  time.Duration
	MaxEntries int
	// StateDir, when set, is where the last confirmed snapshots are kept across restarts (the edge's
	// --spool-dir; snapfile.go).
	StateDir string
	Logger   *slog.Logger
	Now      func() time.Time
}

func (o *Options) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.MaxStale, DefaultMaxStale)
	set(&o.Revalidate, DefaultRevalidate)
	set(&o.RefreshAhead, DefaultRefreshAhead)
	set(&o.FetchTimeout, DefaultFetchTimeout)
	set(&o.RunTimeout, DefaultRunTimeout)
	set(&o.FeedIdle, DefaultFeedIdle)
	set(&o.RetryDown, DefaultRetryDown)
	// A snapshot never serves unconfirmed for longer than MaxStale, however short that is.
	if o.Revalidate > o.MaxStale {
		o.Revalidate = o.MaxStale
	}
	if o.RefreshAhead >= o.Revalidate {
		o.RefreshAhead = o.Revalidate * 2 / 3
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Cache holds the snapshots an edge process serves from, and implements the edge handler's Service.
// A snapshot is fetched on first use, fetched again when older than Revalidate, and dropped when the
// change feed (Run) names its slug. While the control plane is unreachable, a snapshot keeps serving
// for MaxStale after it was last confirmed; a slug with no snapshot is 503, never 404, since the edge
// cannot know.
type Cache struct {
	client *Client
	o      Options
	log    *slog.Logger
	fails  *logx.Limiter // failure lines, bounded under storms
	// saveFails bounds the lines of a state folder that refuses the snapshots (a full disk, retried
	// every second): the first, then one a minute.
	saveFails *logx.Limiter
	stats     *stats

	mu       sync.Mutex
	entries  map[string]*entry
	inflight map[string]*fetchCall
	// downUntil: a contact failed at downUntil-RetryDown; until then requests do not wait on fetches.
	downUntil time.Time
	downErr   error

	// The change feed's state (feed.go).
	pos       int64     // the last change id applied; -1 before the first hello
	feedHead  int64     // the head announced by the last hello: changes up to it are on their way
	connected bool      // a feed stream is open and has said hello
	synced    bool      // a hello was received at least once
	feedAlive time.Time // the last moment the feed was known to have delivered every change
	contact   time.Time // the last answer of any kind from the control plane
	refused   bool      // the control plane refused the edge token at the last contact

	// What the snapshots file (snapfile.go) has not seen yet: the set of snapshots or the feed position
	// changed, or only when they were last confirmed.
	changed, confirmedMoved bool

	// secret is the control plane's key of thinking signatures, from the feed's hello or, until one
	// arrives, the snapshots file; nil while this edge never reached a control plane.
	secret atomic.Pointer[[]byte]
}

// entry is a cached snapshot and when it was fetched (taken at the start of the fetch, so that it
// never looks fresher than it is).
type entry struct {
	snap    *snapshot
	fetched time.Time
}

// fetchCall is a snapshot fetch under way, shared by the requests that need it.
type fetchCall struct {
	done chan struct{}
	e    *entry
	err  error
	// changed is the highest change id the feed reported for the slug while the fetch ran: a result
	// read before it (changeID below) is already stale and is not cached.
	changed int64
}

// NewCache returns a cache over the control plane's internal API. Call Run to follow the change feed.
func NewCache(client *Client, o Options) *Cache {
	o.defaults()
	c := &Cache{client: client, o: o, log: o.Logger, fails: logx.New(o.Logger, 0), saveFails: logx.New(o.Logger, spoolLogEvery),
		stats: newStats(), entries: map[string]*entry{},
		inflight: map[string]*fetchCall{}, pos: -1}
	if o.StateDir != "" {
		c.loadSnapshots()
	}
	return c
}

var errUnavailable = &edgemodel.Error{Code: edgemodel.CodeUnavailable, RetryAfter: 5 * time.Second,
	Message: "the control plane cannot be reached, and this edge holds no recent enough state for this endpoint"}

// EdgeDeployment returns the servable deployment with this slug (edge.Service).
func (c *Cache) EdgeDeployment(ctx context.Context, slug string) (*edgemodel.EdgeDeployment, error) {
	e, err := c.lookup(ctx, slug)
	if err != nil {
		return nil, err
	}
	if e.snap.d == nil || e.snap.d.Expired(c.o.Now()) {
		return nil, edgemodel.ErrEdgeNotFound
	}
	if e.snap.disabled {
		return nil, &edgemodel.DisabledError{Deployment: e.snap.d}
	}
	return e.snap.d, nil
}

// EdgeAuthorize checks a presented key against the enabled key hashes of the deployment's current
// snapshot and returns it with its limits (edge.Service): a revoke that reached the edge after the
// deployment was looked up still counts.
func (c *Cache) EdgeAuthorize(ctx context.Context, d *edgemodel.EdgeDeployment, presented string) (edgemodel.EdgeKey, error) {
	e, err := c.lookup(ctx, d.Slug)
	if err != nil || e.snap.d == nil || e.snap.d.ID != d.ID {
		return edgemodel.EdgeKey{}, edgemodel.ErrEdgeUnauthorized
	}
	if e.snap.d.AuthMode == edgemodel.AuthNone {
		return edgemodel.EdgeKey{}, nil
	}
	key, ok := edgemodel.EdgeKeyMatch(e.snap.keys, presented)
	if !ok {
		return edgemodel.EdgeKey{}, edgemodel.ErrEdgeUnauthorized
	}
	return key, nil
}

// lookup returns the snapshot entry of slug that may serve now.
func (c *Cache) lookup(ctx context.Context, slug string) (*entry, error) {
	now := c.o.Now()
	c.mu.Lock()
	e := c.entries[slug]
	c.mu.Unlock()
	if e != nil {
		age := now.Sub(e.fetched)
		if age < c.o.Revalidate {
			if age >= c.o.RefreshAhead {
				c.start(slug)
			}
			return e, nil
		}
	}
	fresh, err := c.fetch(ctx, slug)
	if err == nil {
		return fresh, nil
	}
	if !isUnreachable(err) {
		return nil, err
	}
	// The control plane cannot confirm it: serve what it last confirmed, while that is recent enough.
	c.mu.Lock()
	e = c.entries[slug] // the feed may have dropped it meanwhile
	ok := e != nil && now.Sub(c.confirmed(e)) < c.o.MaxStale
	c.mu.Unlock()
	if ok {
		c.stats.staleServed.Inc()
		return e, nil
	}
	return nil, errUnavailable
}

// confirmed is when e was last known to be current: when it was fetched, or later, the last moment the
// change feed had delivered every change (a snapshot the feed did not drop was still current then).
// Call with c.mu held.
func (c *Cache) confirmed(e *entry) time.Time {
	if c.feedAlive.After(e.fetched) {
		return c.feedAlive
	}
	return e.fetched
}

// fetch fetches the snapshot of slug, or joins the fetch under way, and waits for it.
func (c *Cache) fetch(ctx context.Context, slug string) (*entry, error) {
	call, err := c.start(slug)
	if err != nil {
		return nil, err
	}
	select {
	case <-call.done:
		return call.e, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start starts a fetch of slug unless one is under way, and returns it. Right after a failed contact
// it starts none and returns that failure.
func (c *Cache) start(slug string) (*fetchCall, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.inflight[slug]; call != nil {
		return call, nil
	}
	if c.o.Now().Before(c.downUntil) {
		return nil, c.downErr
	}
	call := &fetchCall{done: make(chan struct{})}
	c.inflight[slug] = call
	go c.run(slug, call)
	return call, nil
}

func (c *Cache) run(slug string, call *fetchCall) {
	started := c.o.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.FetchTimeout)
	snap, err := c.client.Snapshot(ctx, slug)
	cancel()
	now := c.o.Now()

	c.mu.Lock()
	if c.inflight[slug] == call {
		delete(c.inflight, slug)
	}
	switch {
	case err == nil:
		call.e = &entry{snap: snap, fetched: started}
		c.contact, c.refused = now, false
		if call.changed <= snap.changeID {
			c.store(slug, call.e)
		}
	case isUnreachable(err):
		c.downUntil, c.downErr = now.Add(c.o.RetryDown), err
		var ue *unreachableError
		if errors.As(err, &ue) && ue.tokenRefused() {
			c.refused = true
		}
	}
	call.err = err
	c.mu.Unlock()
	close(call.done)
	c.stats.fetched(snap, err)
	if err != nil {
		c.fails.Log(context.Background(), slog.LevelDebug, "edge: snapshot fetch failed", slug, slog.String("deployment", slug), slog.Any("err", err))
	}
}

// store caches e under slug, making room first when the cache is full. Call with c.mu held.
func (c *Cache) store(slug string, e *entry) {
	if _, ok := c.entries[slug]; !ok && len(c.entries) >= c.o.MaxEntries {
		// Slugs that serve nothing go first (random host names cost the least to forget), then any:
		// a forgotten snapshot is fetched again on its next use.
		for s, old := range c.entries {
			if !old.snap.serves() {
				delete(c.entries, s)
			}
		}
		for s := range c.entries {
			if len(c.entries) < c.o.MaxEntries*9/10 {
				break
			}
			delete(c.entries, s)
		}
	}
	if old := c.entries[slug]; old != nil && old.snap.changeID == e.snap.changeID && bytes.Equal(old.snap.raw, e.snap.raw) {
		c.confirmedMoved = true // the same snapshot, confirmed again
	} else {
		c.changed = true
	}
	c.entries[slug] = e
}

// drop forgets the snapshot of slug ("" for every slug) unless it already reflects change id. A fetch
// under way is detached: it is not cached if read before the change, and later requests start anew.
func (c *Cache) drop(slug string, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, e := range c.entries {
		if (slug == "" || s == slug) && e.snap.changeID < id {
			delete(c.entries, s)
			c.changed = true
		}
	}
	for s, call := range c.inflight {
		if slug == "" || s == slug {
			call.changed = max(call.changed, id)
			delete(c.inflight, s)
		}
	}
}

// prune forgets snapshots too old to serve even through an outage; they would be fetched anyway.
func (c *Cache) prune() {
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, e := range c.entries {
		if now.Sub(c.confirmed(e)) >= c.o.MaxStale {
			delete(c.entries, s)
			c.changed = true
		}
	}
}

// ThinkingSecret returns the control plane's key of thinking signatures (handlers/edge
// Options.ThinkingSecretFrom), or nil while none is known. It is never logged.
func (c *Cache) ThinkingSecret() []byte {
	if p := c.secret.Load(); p != nil {
		return *p
	}
	return nil
}

// MaxStale returns how long snapshots serve through an outage of the control plane.
func (c *Cache) MaxStale() time.Duration { return c.o.MaxStale }

// Status is what /readyz reports about the edge's link to its control plane.
type Status struct {
	// Ready: the edge has synced with the control plane and heard from it within MaxStale, so what it
	// serves is what the control plane says (or was, at most MaxStale ago).
	Ready        bool
	Synced       bool      // the change feed said hello at least once
	Connected    bool      // the change feed is open now
	LastContact  time.Time // the last answer from the control plane (zero: never)
	TokenRefused bool      // the control plane refused the edge token at the last contact
	Snapshots    int
}

// Status reports the edge's link to its control plane.
func (c *Cache) Status() Status {
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{
		Ready:  c.synced && !c.refused && now.Sub(c.contact) < c.o.MaxStale,
		Synced: c.synced, Connected: c.connected, LastContact: c.contact, TokenRefused: c.refused, Snapshots: len(c.entries),
	}
}
