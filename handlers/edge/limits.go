package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/ratelimit"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/translate"
)

// A call's limits, both counted by internal/ratelimit and both refused with 429 in the surface's shape:
//
//   - Rate limits (docs/OPERATIONS.md, "Rate limits"): a deployment's and its key's requests- and
//     tokens-per-minute, as token buckets in this process. A request takes one request from every
//     bucket before the upstream is called (a feedback too, route.limited); its tokens are charged when
//     it ends (exchange.end), from its usage.
//   - Token budgets (docs/OPERATIONS.md, "Budgets"): a call that generates reserves what it may cost
//     under its deployment's and its key's budgets once its model is resolved (before it waits for its
//     turn), and settles at its end to the tokens it used (exchange.end): in Redis with --redis, else
//     this edge's share.

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

// admit applies the rate limits of the exchange's deployment and key. It sets the x-ratelimit-* headers on
// the answer of a limited endpoint, and refuses with 429 and Retry-After when a bucket is empty.
func (h *Handler) admit(x *exchange) bool {
	key := x.key
	dep, k := h.rule(x.d.Limits), h.rule(key.Limits)
	if !dep.Limited() && !k.Limited() {
		return true
	}
	x.limits.buf[0] = ratelimit.Scope{Name: "deployment", ID: x.d.ID, Rule: dep}
	x.limits.scopes = x.limits.buf[:1]
	if key.ID != "" {
		x.limits.buf[1] = ratelimit.Scope{Name: "key", ID: key.ID, Rule: k}
		x.limits.scopes = x.limits.buf[:2]
	}
	dec := h.limiter.Take(x.limits.scopes...)
	dec.WriteHeaders(x.w.Header())
	if dec.Allowed {
		return true
	}
	h.metrics.RateLimited(x.d.Slug, dec.Refused)
	x.limits.scopes = nil // a refused request is charged nothing
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

// DefaultBudgetReserve is what a call that sets no output cap (max_tokens, max_completion_tokens,
// max_output_tokens) reserves for its answer until it ends.
const DefaultBudgetReserve = 4096

// budgetReserve is the tokens a call reserves: svc's estimate of its prompt (its body's size,
// translate.EstimateTokens) plus its smallest output cap, else DefaultBudgetReserve, so that what a
// call is settled to rarely passes what it reserved. Caps are judged by each surface; one that is not
// a positive integer is ignored here.
func budgetReserve(body []byte, fields map[string]json.RawMessage) int64 {
	return int64(translate.EstimateTokens(len(body))) + outputCap(fields)
}

// outputCap is a body's smallest output cap, DefaultBudgetReserve without one.
func outputCap(fields map[string]json.RawMessage) int64 {
	var n int64
	for _, k := range [...]string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if raw, ok := fields[k]; ok {
			if v, isInt := jsonx.Integer(raw); isInt && v > 0 && (n == 0 || v < n) {
				n = v
			}
		}
	}
	if n == 0 {
		return DefaultBudgetReserve
	}
	return n
}

func rateBudget(b *edgemodel.Budget) ratelimit.Budget {
	if b == nil {
		return ratelimit.Budget{}
	}
	return ratelimit.Budget{Tokens: b.Tokens, Period: b.Period}
}

// reserveBudget reserves the call's tokens under its deployment's and key's budgets. false: a budget
// is spent and the call is answered, 429 budget_exhausted.
func (h *Handler) reserveBudget(x *exchange, fields map[string]json.RawMessage) bool {
	if x.svcCopy() || (x.d.Budget == nil && x.key.Budget == nil) {
		return true // svc's own calls (shadow copies, replays) spend no caller's budget
	}
	res, dec := h.budgets.Reserve(budgetReserve(x.reqBody, fields),
		ratelimit.BudgetScope{Name: "deployment", ID: x.d.ID, Deployment: x.d.ID, Budget: rateBudget(x.d.Budget)},
		ratelimit.BudgetScope{Name: "key", ID: x.key.ID, Deployment: x.d.ID, Budget: rateBudget(x.key.Budget)})
	if dec.Allowed {
		x.limits.budget = res
		return true
	}
	h.metrics.RateLimited(x.d.Slug, "budget")
	b := x.d.Budget
	if dec.Refused == "key" {
		b = x.key.Budget
	}
	x.fail(budgetExhausted(dec.Refused, b, dec.ResetsAt, h.now()))
	return false
}

// settleBudget corrects the call's reservation to the tokens it used.
func (x *exchange) settleBudget() {
	x.h.budgets.Settle(x.limits.budget, int64(x.cost.usage.PromptTokens+x.cost.usage.CompletionTokens))
	x.limits.budget = ratelimit.Reservation{}
}

// budgetExhausted answers a call beyond a budget: 429 with Retry-After at the period's reset.
func budgetExhausted(scope string, b *edgemodel.Budget, resets, now time.Time) *apiError {
	retry := ratelimit.RetryAfterSeconds(resets.Sub(now))
	var tokens int64
	period := ""
	if b != nil {
		tokens, period = b.Tokens, b.Period
	}
	return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: runs.CodeBudgetExhausted, retryAfter: retry,
		message: fmt.Sprintf("the %s's token budget (%d tokens a %s) is spent; it resets at %s (retry after %s seconds)",
			scope, tokens, period, resets.UTC().Format(time.RFC3339), retry)}
}
