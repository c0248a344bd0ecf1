package api

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/strictjson"
)

// canaryNullable: "canary": null ends a deployment's canary (docs/API.md, "Canary").
const canaryNullable = "canary"

// canaryBody is the "canary" field of a PATCH: absent leaves the canary, null ends it, an object
// {target, percent, mode} sets it (read strictly: unknown fields are refused, naming them).
type canaryBody struct {
	change *core.CanaryChange
}

func (b *canaryBody) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		b.change = &core.CanaryChange{}
		return nil
	}
	var v struct {
		Target  *targetBody `json:"target"`
		Percent *int        `json:"percent"`
		Mode    string      `json:"mode"`
	}
	if err := strictjson.Decode(data, &v); err != nil {
		// A field of the canary at fault is named from the body's top ("canary.percent"); the canary as
		// a whole (not an object) is described with an example.
		var se *strictjson.Error
		if errors.As(err, &se) && se.Field != "" {
			return &strictjson.Error{Field: "canary." + se.Field, Reason: se.Reason}
		}
		return &strictjson.Error{Field: "canary", Reason: `must be an object such as {"target": {"kind": "checkpoint", "jobId": "...", "step": 400}, "percent": 10, "mode": "split"}, or null: ` + err.Error()}
	}
	if v.Target == nil {
		return &strictjson.Error{Field: "canary.target", Reason: "is required"}
	}
	if v.Percent == nil {
		return &strictjson.Error{Field: "canary.percent", Reason: "is required: a whole number from 1 to 99"}
	}
	if v.Mode == "" {
		v.Mode = core.CanarySplit
	}
	b.change = &core.CanaryChange{Canary: &core.Canary{Target: v.Target.core(), Percent: *v.Percent, Mode: v.Mode}}
	return nil
}

func (h *Handler) canaryPromote(c echo.Context) error {
	d, err := h.svc.PromoteCanary(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deploymentWire(d))
}

// canaryWire is a deployment's canary as the SDK reads it, nil when none.
func canaryWire(c *core.Canary) *cloudapi.Canary {
	if c == nil {
		return nil
	}
	return &cloudapi.Canary{Target: targetWire(c.Target), Percent: c.Percent, Mode: c.Mode}
}

// usageByArm answers GET .../usage?groupBy=arm.
func (h *Handler) usageByArm(c echo.Context, req core.UsageRequest) error {
	arms, err := h.svc.UsageByArm(c.Request().Context(), project(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	out := cloudapi.UsageByArm{Arms: make([]cloudapi.ArmUsage, len(arms))}
	for i, a := range arms {
		w := cloudapi.ArmUsage{Arm: a.Arm, Target: a.Target, Totals: armStatsWire(a.Totals), Buckets: make([]cloudapi.ArmBucket, len(a.Buckets))}
		for j, b := range a.Buckets {
			w.Buckets[j] = cloudapi.ArmBucket{Start: b.Start, ArmStats: armStatsWire(b.ArmStats)}
		}
		out.Arms[i] = w
	}
	return c.JSON(http.StatusOK, out)
}

func armStatsWire(s core.ArmStats) cloudapi.ArmStats {
	return cloudapi.ArmStats{Requests: s.Requests, Errors: s.Errors, PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens,
		LatencyP50Ms: s.LatencyP50Ms, LatencyP95Ms: s.LatencyP95Ms, TTFTP50Ms: s.TTFTP50Ms, TTFTP95Ms: s.TTFTP95Ms,
		Feedback: cloudapi.FeedbackCounts{Up: s.Feedback.Up, Down: s.Feedback.Down, Neutral: s.Feedback.Neutral}}
}
