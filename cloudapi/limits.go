package cloudapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Limits are the rate limits of a deployment or of one of its keys (docs/API.md, "Rate limits"):
// requests a minute, and prompt plus completion tokens a minute. A nil field is unlimited. A call
// must fit both its deployment's limits and its key's.
type Limits struct {
	RequestsPerMinute *int `json:"requestsPerMinute"`
	TokensPerMinute   *int `json:"tokensPerMinute"`
}

// LimitChange is one field of a LimitsUpdate. The zero value leaves the limit as it is; LimitTo sets
// it and NoLimit clears it (unlimited). On the wire, unchanged is an absent field, NoLimit is null.
type LimitChange struct {
	set   bool
	value *int
}

// LimitTo sets a limit to n (the server accepts 1 and more).
func LimitTo(n int) LimitChange { return LimitChange{set: true, value: &n} }

// NoLimit clears a limit: unlimited.
func NoLimit() LimitChange { return LimitChange{set: true} }

// IsZero reports whether the change leaves the limit as it is.
func (c LimitChange) IsZero() bool { return !c.set }

// Get returns the new value (nil: unlimited) and whether the limit changes at all.
func (c LimitChange) Get() (value *int, changed bool) { return c.value, c.set }

// MarshalJSON writes the number, or null for NoLimit. Unchanged fields are left out by omitzero.
func (c LimitChange) MarshalJSON() ([]byte, error) {
	if c.value == nil {
		return []byte("null"), nil
	}
	return []byte(strconv.Itoa(*c.value)), nil
}

// LimitsUpdate changes some of the limits of a deployment or a key in an update call; fields left at
// their zero value keep their current limit. ClearLimits() clears both, as {"limits": null} does.
type LimitsUpdate struct {
	RequestsPerMinute LimitChange `json:"requestsPerMinute,omitzero"`
	TokensPerMinute   LimitChange `json:"tokensPerMinute,omitzero"`
}

// ClearLimits makes both limits unlimited.
func ClearLimits() LimitsUpdate {
	return LimitsUpdate{RequestsPerMinute: NoLimit(), TokensPerMinute: NoLimit()}
}

// IsZero reports whether the update changes nothing.
func (u LimitsUpdate) IsZero() bool {
	return u.RequestsPerMinute.IsZero() && u.TokensPerMinute.IsZero()
}

// UnmarshalJSON reads {"requestsPerMinute": n|null, "tokensPerMinute": n|null} (an absent field is
// unchanged) or null (both cleared). Errors name the field, since the server returns them as they are.
func (u *LimitsUpdate) UnmarshalJSON(b []byte) error {
	*u = LimitsUpdate{}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*u = ClearLimits()
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return fmt.Errorf("limits must be an object like {\"requestsPerMinute\": 60, \"tokensPerMinute\": null}, or null")
	}
	for name, raw := range fields {
		var c *LimitChange
		switch name {
		case "requestsPerMinute":
			c = &u.RequestsPerMinute
		case "tokensPerMinute":
			c = &u.TokensPerMinute
		default:
			return fmt.Errorf("unknown field %q in limits: use requestsPerMinute and tokensPerMinute", name)
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			*c = NoLimit()
			continue
		}
		var n int
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("limits.%s must be a whole number, or null for unlimited", name)
		}
		*c = LimitTo(n)
	}
	return nil
}

// UpdateKeyRequest is a partial update of a key: its limits and its budget.
type UpdateKeyRequest struct {
	Limits LimitsUpdate `json:"limits,omitzero"`
	Budget BudgetUpdate `json:"budget,omitzero"`
	Weight *int         `json:"weight,omitempty"` // nil: unchanged
}

// UpdateDeploymentKey changes a key's limits and budget; fields left unchanged in req keep their value.
func (c *Client) UpdateDeploymentKey(ctx context.Context, deploymentID, keyID string, req UpdateKeyRequest) (*Key, error) {
	p, err := c.projectPath("deployments", deploymentID, "keys", keyID)
	if err != nil {
		return nil, err
	}
	var out Key
	if err := c.do(ctx, http.MethodPatch, p, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
