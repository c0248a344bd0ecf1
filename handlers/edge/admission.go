package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/admission"
	"github.com/svcdev/svc/internal/metrics"
	"github.com/svcdev/svc/internal/runs"
)

// Admission (docs/OPERATIONS.md, "Admission"): a call that generates waits for its model's turn once
// its model is resolved and before the upstream is called, and gives the turn back when it ends
// (exchange.end). The models with maxConcurrency have a gate (internal/admission), this edge's share of
// their capacity; callers' calls wait in the interactive lane, shadow copies in the shadow lane, eval
// replays (replay.go) in the eval lane, each key
// in its own queue; a key at its fair share leaves the others active of late a margin, which is what
// keeps a steady key's wait short on every edge (docs/OPERATIONS.md, "Admission"). A copy or a replay
// carries a loan (turn.loan): when it was let into the callers' reserve and a caller finds every place
// taken, the gate cancels it, and its owner drops it, counted (shadow.go), or sends it again
// (replay.go); nothing is recorded of it. The other models' calls go at once, as before.

// replayQueueTimeout bounds a replay's wait for its turn: longer than any eval replay's own deadline
// (internal/core's evalReplayTimeout, 5 minutes), so that the deadline decides.
const replayQueueTimeout = 10 * time.Minute

// capacityEvery is how often a gate's capacity is read again (the replicas' health changes it).
const capacityEvery = time.Second

// gates are the admission gates of the catalog's models, made at each model's first call.
type gates struct {
	mu sync.RWMutex
	m  map[string]*gate // nil for a model without maxConcurrency
}

// gate is one model's gate and what it needs to follow the model's capacity.
type gate struct {
	*admission.Gate
	model   string
	series  *metrics.AdmissionSeries
	refresh atomic.Int64 // when its capacity is next read, in Unix nanoseconds
}

// AdmissionStates returns the gates' states by model (metrics.AdmissionStats).
func (g *gates) AdmissionStates() map[string]admission.Stats {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make(map[string]admission.Stats, len(g.m))
	for model, gt := range g.m {
		if gt != nil {
			out[model] = gt.Stats()
		}
	}
	return out
}

// gateOf returns the gate of a catalog model, nil when it admits every call at once.
func (h *Handler) gateOf(model string) *gate {
	h.gates.mu.RLock()
	gt, ok := h.gates.m[model]
	h.gates.mu.RUnlock()
	if ok {
		return gt
	}
	h.gates.mu.Lock()
	defer h.gates.mu.Unlock()
	if gt, ok := h.gates.m[model]; ok {
		return gt
	}
	if h.rt.Gated(model) {
		capacity, timeout := h.rt.Admission(model)
		gt = &gate{Gate: admission.New(admission.Config{Capacity: h.share(capacity), Timeout: timeout}), model: model,
			series: h.metrics.Admission(model)}
		gt.refresh.Store(h.now().Add(capacityEvery).UnixNano())
	}
	if h.gates.m == nil {
		h.gates.m = map[string]*gate{}
	}
	h.gates.m[model] = gt
	return gt
}

// share is this edge's part of a model's capacity: capacity / --edge-count, at least 1 (0 stays 0: no
// bound, when no replica is healthy and the runtime answers 503 at once).
func (h *Handler) share(capacity int) int {
	if capacity <= 0 {
		return 0
	}
	if h.edges > 1 {
		capacity /= h.edges
	}
	return max(capacity, 1)
}

// turn is a call's admission: the gate it holds a place in until it ends (nil: none), under which key,
// and how long it waited for it.
type turn struct {
	gate   *gate
	lane   admission.Lane
	key    string
	waited time.Duration
	// loan is a copy's or a replay's, set before it is served: the gate may ask it to give back a
	// place borrowed from the callers' reserve (admission.Loan), which cancels its context.
	loan *admission.Loan
}

// takeTurn reserves the call's tokens under its budgets (limits.go) when its route generates, then
// waits for its turn on its model (t.model) when the model has a gate, and returns it (the zero turn:
// none needed), which the call holds until it ends. false: the call is answered, 429 budget_exhausted,
// 429 model_busy (or 499, its caller gone).
func (h *Handler) takeTurn(x *exchange, t *target, fields map[string]json.RawMessage) (turn, bool) {
	if !x.queued {
		return turn{}, true
	}
	if !h.reserveBudget(x, fields) {
		return turn{}, false
	}
	gt := h.gateOf(t.model)
	if gt == nil {
		return turn{}, true
	}
	if now, next := x.start.UnixNano(), gt.refresh.Load(); now >= next && gt.refresh.CompareAndSwap(next, now+int64(capacityEvery)) {
		capacity, _ := h.rt.Admission(t.model)
		gt.SetCapacity(h.share(capacity))
	}
	lane := admission.Interactive
	switch {
	case x.eval.of != "":
		lane = admission.Eval
	case x.copyOf != "":
		lane = admission.Shadow
	}
	key := x.key.ID
	if key == "" {
		key = x.d.ID // an endpoint without keys is one key
	}
	// The deployment's own queueTimeoutMs, when set, bounds the wait over the model's; the key's weight
	// is its share of the turns.
	loan := x.turn.loan // a copy's or a replay's; callers carry none
	timeout := x.d.QueueTimeout
	if lane == admission.Eval {
		// A replay waits behind the callers for as long as its own deadline allows (the eval worker's):
		// the model's queue timeout is a caller's patience, and a replay refused by it would fail its
		// item while callers keep the model busy.
		timeout = replayQueueTimeout
	}
	waited, err := gt.AcquireCall(x.r.Context(), admission.Call{Lane: lane, Key: key, Weight: x.key.Weight, Timeout: timeout, Loan: loan})
	gt.series.Waited(lane, waited)
	if err == nil {
		return turn{gate: gt, lane: lane, key: key, waited: waited, loan: loan}, true
	}
	if errors.Is(err, admission.ErrBusy) {
		gt.series.Refused(lane)
		x.fail(modelBusy(t.served, gt.RetryAfter()))
	} else {
		x.fail(clientClosed)
	}
	return turn{waited: waited, loan: loan}, false
}

// release gives the call's turn back to its model, once: the next waiting call takes it.
func (x *exchange) release() {
	if gt := x.turn.gate; gt != nil {
		x.turn.gate = nil
		gt.ReleaseCall(admission.Call{Lane: x.turn.lane, Key: x.turn.key, Loan: x.turn.loan}, x.h.now().Sub(x.start)-x.turn.waited)
	}
}

// modelBusy answers a call that did not get its model's turn: 429 with Retry-After, which SDKs obey.
func modelBusy(model string, retry time.Duration) *apiError {
	s := strconv.Itoa(int((retry + time.Second - 1) / time.Second))
	return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: runs.CodeModelBusy, retryAfter: s,
		message: fmt.Sprintf("the model %q is at capacity and this call did not get its turn in time; retry after %s seconds", model, s)}
}
