package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/reqid"
	"github.com/svcdev/svc/internal/translate"
)

// Canaries on the edge (docs/API.md, "Canary"). A split canary answers a share of the sessions: the
// session is read from the request (edgemodel.SessionOf: a session header, the body's conversation or
// user, the conversation's opening; a Responses previous_response_id chain by its first request) and
// its arm follows from a hash every edge computes alike (edgemodel.ArmOf), so that no edge asks another
// and an agent never changes model mid-conversation. A shadow canary answers nothing: the caller gets the
// primary's answer, and a copy of the call is served by the canary off the request path, through a
// bounded queue, recorded as a run paired with the primary's (ShadowOf) and never returned.

// shadowRoutes are the routes whose calls a shadow canary gets a copy of: the conversations, not
// listings, token counts or embeddings.
var shadowRoutes = map[string]bool{"/v1/chat/completions": true, "/v1/messages": true, "/v1/responses": true}

// pickArm decides the arm of a request of a deployment with a canary, once its members are read and
// before its model is resolved: under a split canary the canary's sessions are served by the canary's
// view of the deployment (x.d becomes it); under a shadow canary the primary answers and the copy to
// make is noted. Without a canary it does nothing.
func (h *Handler) pickArm(x *exchange, fields map[string]json.RawMessage) {
	c := x.d.Canary
	if c == nil {
		return
	}
	x.arm = edgemodel.ArmPrimary
	switch c.Mode {
	case edgemodel.CanaryShadow:
		if shadowRoutes[x.route] {
			x.shadow = c.Deployment
		}
	default:
		var root map[string]json.RawMessage
		if x.route == "/v1/responses" && !hasSessionHeader(x.r.Header) {
			root = h.chainRoot(x, fields)
		}
		if edgemodel.ArmOf(edgemodel.SessionOf(x.r.Header, fields, root), c.Percent) == edgemodel.ArmCanary {
			x.d, x.arm = c.Deployment, edgemodel.ArmCanary
		}
	}
	x.armTarget = x.d.Served()
}

func hasSessionHeader(h http.Header) bool {
	for _, name := range edgemodel.SessionHeaders {
		if h.Get(name) != "" {
			return true
		}
	}
	return false
}

// chainRoot returns the members of the first request of the previous_response_id chain a Responses
// request continues, which keys the whole chain's session (its later requests carry only new turns);
// nil when it continues none, or the chain cannot be read here (the request then fails, or is passed
// through, as without a canary). The chain read is kept for the request's own translation.
func (h *Handler) chainRoot(x *exchange, fields map[string]json.RawMessage) map[string]json.RawMessage {
	previous := translate.PreviousResponseIDOf(fields)
	if previous == "" {
		return nil
	}
	turns, e := h.previous(x, previous)
	if e != nil || len(turns) == 0 {
		return nil
	}
	x.chain, x.chainOf = turns, previous
	root, _ := bodyFields(turns[0].Request)
	return root
}

// Shadow queue bounds: copies waiting, workers serving them, and the longest a copy may take.
const (
	shadowQueue   = 256
	shadowWorkers = 4
	shadowTimeout = 5 * time.Minute
)

// shadowCopy is a call to serve again on a shadow canary.
type shadowCopy struct {
	d       *edgemodel.EdgeDeployment // the canary's view of the deployment
	keyID   string
	route   string
	header  http.Header
	body    []byte
	primary string // the primary's run id
}

// shadows is the edge's queue of shadow copies and its counts.
type shadows struct {
	once    sync.Once
	queue   chan shadowCopy
	queued  atomic.Int64
	dropped atomic.Int64
}

// ShadowQueued counts the copies queued for shadow canaries (metrics.ShadowStats).
func (s *shadows) ShadowQueued() int64 { return s.queued.Load() }

// ShadowDropped counts the copies dropped because the queue was full (metrics.ShadowStats).
func (s *shadows) ShadowDropped() int64 { return s.dropped.Load() }

// enqueueShadow hands the copy of an answered call to the shadow workers without waiting: a full queue
// drops it, counted, so that a slow canary never slows the primary's callers.
func (x *exchange) enqueueShadow() {
	h := x.h
	h.shadows.once.Do(func() {
		h.shadows.queue = make(chan shadowCopy, shadowQueue)
		for range shadowWorkers {
			go h.shadowLoop()
		}
	})
	header := x.r.Header.Clone()
	for _, name := range []string{"Authorization", "X-Api-Key", "Cookie"} {
		header.Del(name) // the copy is served as the key's call, never with its secret
	}
	select {
	case h.shadows.queue <- shadowCopy{d: x.shadow, keyID: x.keyID, route: x.route, header: header, body: x.reqBody, primary: x.runID}:
		h.shadows.queued.Add(1)
	default:
		h.shadows.dropped.Add(1)
	}
}

func (h *Handler) shadowLoop() {
	for c := range h.shadows.queue {
		h.serveShadow(c)
	}
}

// serveShadow serves a copy on the canary as its route serves a caller's call, into a writer nobody
// reads; its run records the canary's arm and the primary run it shadows.
func (h *Handler) serveShadow(c shadowCopy) {
	rt, ok := routes[c.route]
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shadowTimeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.route, bytes.NewReader(c.body))
	if err != nil {
		return
	}
	r.Header = c.header
	w := &discardWriter{header: http.Header{}}
	x := &exchange{h: h, w: w, r: r, f: rt.format, route: c.route, start: h.now(), id: reqid.From(""),
		slug: c.d.Slug, d: c.d, keyID: c.keyID, run: true, isShadow: true,
		arm: edgemodel.ArmCanary, armTarget: c.d.Served(), shadowOf: c.primary}
	defer x.end()
	rt.serve(h, x)
}

// discardWriter is the answer of a shadow copy: written as a caller's would be, read by nobody.
type discardWriter struct {
	header http.Header
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}
