package edge

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/admission"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/reqid"
)

// Shadow copies (docs/API.md, "Canary"). The caller's goroutine does one thing for a copy: once its
// answer has ended, it hands what it already holds (the request's header and body, the key, the
// primary's run id) to a bounded queue without waiting, or drops it, counted, when the queue is full.
// Workers serve the copies on the canary afterwards; nothing of a copy runs before the answer it
// copies has ended. When the server stops, DrainShadows lets the copies queued and under way finish
// within the shutdown's grace, and counts as dropped those it cuts.

// Shadow queue bounds: copies waiting, workers serving them (the copies under way at once: a canary
// answering in 5 s serves about 13 copies a second), and the longest a copy may take. Idle workers
// cost their stacks only.
const (
	shadowQueue   = 256
	shadowWorkers = 64
	shadowTimeout = 5 * time.Minute
)

// shadowSecrets are the headers a copy is served without: it is served as the key's call, never with
// its secret.
var shadowSecrets = []string{"Authorization", "X-Api-Key", "Cookie"}

// shadowCopy is a call to serve again on a shadow canary.
type shadowCopy struct {
	d       *edgemodel.EdgeDeployment // the canary's view of the deployment
	keyID   string
	route   string
	header  http.Header // the caller's request's, only read: the worker serves a copy without its secrets
	body    []byte
	primary string // the primary's run id
	canary  string // the canary's id
}

// shadows is the edge's queue of shadow copies, its workers and its counts.
type shadows struct {
	once    sync.Once    // starts the queue and its workers with the first copy (or stops them ever starting)
	mu      sync.RWMutex // closed, against the queue's closing
	closed  bool         // DrainShadows began: copies are dropped
	queue   chan shadowCopy
	workers sync.WaitGroup
	// ctx is the copies' context, cancelled when the shutdown's grace ends before they do.
	ctx    context.Context
	cancel context.CancelFunc

	queued, dropped atomic.Int64
	cut             atomic.Int64 // of the dropped: those the shutdown cut (lose)
}

// ShadowQueued counts the copies queued for shadow canaries (metrics.ShadowStats).
func (s *shadows) ShadowQueued() int64 { return s.queued.Load() }

// ShadowDropped counts the copies dropped: the queue was full, a copy gave the place it borrowed from
// the callers' reserve back to a caller (admission.go), or the shutdown's grace ended before they were
// answered (metrics.ShadowStats).
func (s *shadows) ShadowDropped() int64 { return s.dropped.Load() }

// ShadowStats gives the counts of the edge's shadow copies, which svc_edge_shadow_copies_total and
// svc_edge_shadow_dropped_total export.
func (h *Handler) ShadowStats() metrics.ShadowStats { return &h.shadows }

// lose counts a copy that the shutdown cut: under way or still queued when its grace ended, or made by
// a request that outlived it.
func (s *shadows) lose() {
	s.dropped.Add(1)
	s.cut.Add(1)
}

// enqueueShadow hands the copy of an answered call to the shadow workers without waiting: a full queue
// (or a server that is stopping) drops it, counted, so that a slow canary never slows the primary's
// callers.
func (x *exchange) enqueueShadow() {
	if x.stream == nil {
		// A whole answer still sits in the connection's buffer until the handler returns: it goes out
		// first, so that the copy, which may start at once on another CPU, comes after it.
		_ = http.NewResponseController(x.w).Flush()
	}
	h := x.h
	s := &h.shadows
	s.once.Do(func() { h.startShadows() })
	c := shadowCopy{d: x.canary.shadow, keyID: x.key.ID, route: x.route, header: x.r.Header, body: x.reqBody, primary: x.runID, canary: x.canary.canaryID}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.lose() // a request that outlived the shutdown's wait
		return
	}
	select {
	case s.queue <- c:
		s.queued.Add(1)
	default:
		s.dropped.Add(1)
	}
}

func (h *Handler) startShadows() {
	s := &h.shadows
	s.queue = make(chan shadowCopy, shadowQueue)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.workers.Add(shadowWorkers)
	for range shadowWorkers {
		go h.shadowLoop()
	}
}

func (h *Handler) shadowLoop() {
	s := &h.shadows
	defer s.workers.Done()
	for c := range s.queue {
		if s.ctx.Err() != nil {
			s.lose() // the shutdown's grace ended with the copy still queued
			continue
		}
		h.serveShadow(c)
	}
}

// serveShadow serves a copy on the canary as its route serves a caller's call, into a writer nobody
// reads; its run records the canary's arm and the primary run it shadows. A copy that the shutdown's
// grace cut is dropped, not recorded: its run would say nothing of the canary.
func (h *Handler) serveShadow(c shadowCopy) {
	rt, ok := routes[c.route]
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(h.shadows.ctx, shadowTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.route, bytes.NewReader(c.body))
	if err != nil {
		return
	}
	r.Header = c.header.Clone()
	for _, name := range shadowSecrets {
		r.Header.Del(name)
	}
	w := &discardWriter{header: http.Header{}}
	x := &exchange{h: h, w: w, r: r, f: rt.format, route: c.route, start: h.now(), id: reqid.From(""),
		slug: c.d.Slug, d: c.d, key: edgemodel.EdgeKey{ID: c.keyID}, run: true, queued: rt.queued, copyOf: c.primary,
		canary: armChoice{arm: edgemodel.ArmCanary, target: c.d.Served(), canaryID: c.canary}}
	x.turn.loan = admission.NewLoan(cancel) // admission.go: a copy in the callers' reserve gives its place back
	defer func() {
		if p := recover(); p != nil {
			// As net/http does for a caller's request: the copy fails, the process serves on.
			x.fail(internalError(fmt.Errorf("shadow copy panicked: %v", p)))
		}
		if h.shadows.ctx.Err() != nil && (!x.out.finished || x.out.failed) {
			x.release()
			h.shadows.lose()
			return
		}
		if x.turn.loan.Yielded() && (!x.out.finished || x.out.failed) {
			x.release()
			h.shadows.dropped.Add(1) // gave its place to a caller: dropped, as a copy the full queue turns away
			return
		}
		x.end()
	}()
	rt.serve(h, x)
}

// DrainShadows ends the shadow copies when the server stops, once its callers have been answered (so
// that no copy is queued after it): the copies queued and under way are served and recorded until ctx
// ends (the shutdown's grace); those it then cuts or finds still queued are dropped, counted
// (svc_edge_shadow_dropped_total) and logged in one line with their number. Later copies are dropped.
func (h *Handler) DrainShadows(ctx context.Context) {
	s := &h.shadows
	s.once.Do(func() {}) // without a copy so far, no worker ever starts
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	started := s.queue != nil
	if started {
		close(s.queue)
	}
	s.mu.Unlock()
	if started {
		done := make(chan struct{})
		go func() {
			s.workers.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.cancel() // the copies under way end now; the workers drop what is still queued
			<-done
		}
		s.cancel()
	}
	if n := s.cut.Load(); n > 0 {
		h.log.Warn("shadow copies dropped at shutdown: the grace period ended before the canary answered them", "count", n)
	}
}

// discardWriter is the answer of a shadow copy: written as a caller's would be, read by nobody.
type discardWriter struct {
	header http.Header
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}
