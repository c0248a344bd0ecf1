package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/strictjson"
)

// limitsNullable are the paths where a request body may send null (docs/API.md, "Rate limits"): a
// null limit is unlimited, "limits": null clears both.
var limitsNullable = []string{"limits", "limits.requestsPerMinute", "limits.tokensPerMinute"}

// limitsBody is the "limits" field of a PATCH: absent leaves every limit, null clears both, and inside
// the object an absent field is unchanged, null clears it and a number sets it.
type limitsBody struct {
	change core.RateLimitsChange
}

func (l *limitsBody) UnmarshalJSON(b []byte) error {
	unlimited := core.LimitChange{Set: true}
	if string(bytes.TrimSpace(b)) == "null" {
		l.change = core.RateLimitsChange{RequestsPerMinute: unlimited, TokensPerMinute: unlimited}
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return &strictjson.Error{Field: "limits", Reason: `must be an object such as {"requestsPerMinute": 60, "tokensPerMinute": null}, or null`}
	}
	for name, raw := range fields {
		var dst *core.LimitChange
		switch name {
		case "requestsPerMinute":
			dst = &l.change.RequestsPerMinute
		case "tokensPerMinute":
			dst = &l.change.TokensPerMinute
		default:
			return &strictjson.Error{Field: "limits." + name, Reason: "is not a field of this request (limits has requestsPerMinute and tokensPerMinute)"}
		}
		if string(bytes.TrimSpace(raw)) == "null" {
			*dst = unlimited
			continue
		}
		var n int
		if err := json.Unmarshal(raw, &n); err != nil {
			return &strictjson.Error{Field: "limits." + name, Reason: "must be a whole number, or null for unlimited"}
		}
		*dst = core.LimitChange{Set: true, Value: &n}
	}
	return nil
}

type updateKeyBody struct {
	Limits limitsBody `json:"limits"`
	Budget budgetBody `json:"budget"`
	Weight *int       `json:"weight"`
}

func limitsWire(l edgemodel.RateLimits) cloudapi.Limits {
	return cloudapi.Limits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute}
}

func (h *Handler) keyUpdate(c echo.Context) error {
	var req updateKeyBody
	if err := decode(c, &req, append(limitsNullable, budgetNullable)...); err != nil {
		return err
	}
	k, err := h.svc.UpdateKey(c.Request().Context(), project(c), c.Param("id"), c.Param("keyId"), core.KeyChange{Limits: req.Limits.change, Budget: req.Budget.change, Weight: req.Weight})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyWire(*k))
}
