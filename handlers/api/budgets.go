package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/strictjson"
)

// budgetNullable is the path where a request body may send null (docs/API.md, "Budgets"): no budget.
const budgetNullable = "budget"

// budgetBody is the "budget" field of a create or a PATCH: absent leaves the budget, null removes it,
// {"tokens": N, "period": "day"|"month"} sets it (core.ValidateBudget judges the values).
type budgetBody struct {
	change core.BudgetChange
}

func (b *budgetBody) UnmarshalJSON(data []byte) error {
	b.change = core.BudgetChange{Set: true}
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return &strictjson.Error{Field: "budget", Reason: `must be an object such as {"tokens": 1000000, "period": "day"}, or null for none`}
	}
	var v edgemodel.Budget
	for name, raw := range fields {
		switch name {
		case "tokens":
			if err := json.Unmarshal(raw, &v.Tokens); err != nil {
				return &strictjson.Error{Field: "budget.tokens", Reason: "must be a whole number of tokens (prompt plus completion)"}
			}
		case "period":
			if err := json.Unmarshal(raw, &v.Period); err != nil {
				return &strictjson.Error{Field: "budget.period", Reason: `must be "day" or "month"`}
			}
		default:
			return &strictjson.Error{Field: "budget." + name, Reason: "is not a field of this request (budget has tokens and period)"}
		}
	}
	if _, ok := fields["tokens"]; !ok {
		return &strictjson.Error{Field: "budget.tokens", Reason: "is required: the tokens (prompt plus completion) allowed per period"}
	}
	if _, ok := fields["period"]; !ok {
		return &strictjson.Error{Field: "budget.period", Reason: `is required: "day" or "month" (UTC)`}
	}
	b.change.Value = &v
	return nil
}

func budgetWire(b *core.BudgetUsage) *cloudapi.Budget {
	if b == nil {
		return nil
	}
	return &cloudapi.Budget{Tokens: b.Tokens, Period: b.Period, Used: b.Used, ResetsAt: b.ResetsAt}
}

func (h *Handler) keyGet(c echo.Context) error {
	k, err := h.svc.GetKey(c.Request().Context(), project(c), c.Param("id"), c.Param("keyId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyWire(*k))
}
