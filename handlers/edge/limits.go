package edge

import (
	"fmt"
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/ratelimit"
)

// Rate limits (docs/OPERATIONS.md, "Rate limits"): a deployment's and its key's requests- and
// tokens-per-minute, as token buckets in this process. A request takes one request from every bucket
// before the upstream is called (a feedback too, route.limited); its tokens are charged when it ends
// (exchange.end), from its usage.

// rule turns stored limits into this process's share of them.
func (h *Handler) rule(l edgemodel.RateLimits) ratelimit.Rule {
	var r ratelimit.Rule
	if l.RequestsPerMinute != nil {
		r.RequestsPerMinute = *l.RequestsPerMinute
	}
	if l.TokensPerMinute != nil {
		r.TokensPerMinute = *l.TokensPerMinute
	}
	return r.Share(h.edgeCount)
}

// admit applies the limits of the exchange's deployment and key. It sets the x-ratelimit-* headers on
// the answer of a limited endpoint, and refuses with 429 and Retry-After when a bucket is empty.
func (h *Handler) admit(x *exchange, key edgemodel.EdgeKey) bool {
	dep, k := h.rule(x.d.Limits), h.rule(key.Limits)
	if !dep.Limited() && !k.Limited() {
		return true
	}
	x.scopeBuf[0] = ratelimit.Scope{Name: "deployment", ID: x.d.ID, Rule: dep}
	x.scopes = x.scopeBuf[:1]
	if key.ID != "" {
		x.scopeBuf[1] = ratelimit.Scope{Name: "key", ID: key.ID, Rule: k}
		x.scopes = x.scopeBuf[:2]
	}
	dec := h.limiter.Take(x.scopes...)
	dec.WriteHeaders(x.w.Header())
	if dec.Allowed {
		return true
	}
	h.metrics.RateLimited(x.d.Slug, dec.Refused)
	x.scopes = nil // a refused request is charged nothing
	if x.recording() {
		// Its run keeps what was sent, like every run; read now, before the refusal is answered.
		x.reqBody, _ = readBody(x.w, x.r)
	}
	retry := ratelimit.RetryAfterSeconds(dec.RetryAfter)
	x.fail(&apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded", retryAfter: retry,
		message: fmt.Sprintf("the %s's rate limit is reached; retry after %s seconds (limits are set on the endpoint and on each key)",
			dec.Refused, retry)})
	return false
}
