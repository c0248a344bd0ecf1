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

// Budgets (docs/OPERATIONS.md, "Budgets"): a call that generates reserves what it may cost under
// its deployment's and its key's token budgets once its model is resolved (before it waits for its
// turn), and settles at its end to the tokens it used (exchange.end). The counting is
// internal/ratelimit's (budget.go): in Redis with --redis, else this edge's share.

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
	if x.copyOf != "" || (x.d.Budget == nil && x.keyBudget == nil) {
		return true // svc's own shadow copies spend no caller's budget
	}
	res, dec := h.budgets.Reserve(budgetReserve(x.reqBody, fields),
		ratelimit.BudgetScope{Name: "deployment", ID: x.d.ID, Deployment: x.d.ID, Budget: rateBudget(x.d.Budget)},
		ratelimit.BudgetScope{Name: "key", ID: x.keyID, Deployment: x.d.ID, Budget: rateBudget(x.keyBudget)})
	if dec.Allowed {
		x.budget = res
		return true
	}
	h.metrics.RateLimited(x.d.Slug, "budget")
	b := x.d.Budget
	if dec.Refused == "key" {
		b = x.keyBudget
	}
	x.fail(budgetExhausted(dec.Refused, b, dec.ResetsAt, h.now()))
	return false
}

// settleBudget corrects the call's reservation to the tokens it used.
func (x *exchange) settleBudget() {
	x.h.budgets.Settle(x.budget, int64(x.cost.usage.PromptTokens+x.cost.usage.CompletionTokens))
	x.budget = ratelimit.Reservation{}
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
