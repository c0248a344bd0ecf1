package cloudapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Budget is the token budget of a deployment or of one of its keys as read (docs/API.md, "Budgets"):
// at most Tokens prompt plus completion tokens per Period ("day" or "month", UTC), with what the
// current period has used so far (as recorded, a few seconds behind the edges) and when it resets.
// Beyond it calls get 429 budget_exhausted until ResetsAt.
type Budget struct {
	Tokens   int64     `json:"tokens"`
	Period   string    `json:"period"`
	Used     int64     `json:"used"`
	ResetsAt time.Time `json:"resetsAt"`
}

// BudgetSet is a budget to set: Tokens per Period ("day" or "month").
type BudgetSet struct {
	Tokens int64  `json:"tokens"`
	Period string `json:"period"`
}

// BudgetUpdate changes a budget in an update call. The zero value leaves it as it is; SetBudget sets
// it and NoBudget removes it. On the wire, unchanged is an absent field, NoBudget is null.
type BudgetUpdate struct {
	set   bool
	value *BudgetSet
}

// SetBudget sets a budget of tokens per period ("day" or "month").
func SetBudget(tokens int64, period string) BudgetUpdate {
	return BudgetUpdate{set: true, value: &BudgetSet{Tokens: tokens, Period: period}}
}

// NoBudget removes a budget.
func NoBudget() BudgetUpdate { return BudgetUpdate{set: true} }

// IsZero reports whether the update leaves the budget as it is.
func (u BudgetUpdate) IsZero() bool { return !u.set }

// Get returns the new budget (nil: none) and whether the budget changes at all.
func (u BudgetUpdate) Get() (value *BudgetSet, changed bool) { return u.value, u.set }

// MarshalJSON writes the budget, or null for NoBudget. Unchanged fields are left out by omitzero.
func (u BudgetUpdate) MarshalJSON() ([]byte, error) {
	if u.value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(u.value)
}

// IssueKeyRequest is the body of an issue call: the key's label and, optionally, its budget.
type IssueKeyRequest struct {
	Label  string     `json:"label"`
	Budget *BudgetSet `json:"budget,omitempty"`
	Weight int        `json:"weight,omitempty"` // 0: the default, 1
}

// IssueDeploymentKeyWith creates a key with the fields of req. The answer is the only time its
// plaintext is ever returned.
func (c *Client) IssueDeploymentKeyWith(ctx context.Context, deploymentID string, req IssueKeyRequest) (*IssuedKey, error) {
	p, err := c.projectPath("deployments", deploymentID, "keys")
	if err != nil {
		return nil, err
	}
	var out IssuedKey
	if err := c.do(ctx, http.MethodPost, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetDeploymentKey returns one key of a deployment, with its budget's usage.
func (c *Client) GetDeploymentKey(ctx context.Context, deploymentID, keyID string) (*Key, error) {
	p, err := c.projectPath("deployments", deploymentID, "keys", keyID)
	if err != nil {
		return nil, err
	}
	var out Key
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
