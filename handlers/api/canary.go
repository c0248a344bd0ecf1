package api

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"

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
	if v.Mode == "" {
		v.Mode = edgemodel.CanarySplit
	}
	percent := 0 // a shadow canary copies every call: its percent may be left out
	if v.Percent != nil {
		percent = *v.Percent
	} else if v.Mode != edgemodel.CanaryShadow {
		return &strictjson.Error{Field: "canary.percent", Reason: "is required in split mode: a whole number from 1 to 99"}
	}
	b.change = &core.CanaryChange{Canary: &core.Canary{Target: v.Target.core(), Percent: percent, Mode: v.Mode}}
	return nil
}

// canaryPromote answers POST .../canary/promote, whose body may be {"override": {"reason": "…"}}
// to promote past the promotion gate (docs/API.md, "Evals").
func (h *Handler) canaryPromote(c echo.Context) error {
	var b struct {
		Override *overrideBody `json:"override"`
	}
	if err := decode(c, &b); err != nil {
		return err
	}
	by := principal(c).IdentityID
	d, err := h.svc.PromoteCanary(c.Request().Context(), project(c), c.Param("id"), by, b.Override.core(by))
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
	return &cloudapi.Canary{ID: c.ID, Target: targetWire(c.Target), Percent: c.Percent, Mode: c.Mode, StartedAt: c.StartedAt}
}

// canaryList answers GET .../deployments/{id}/canaries.
func (h *Handler) canaryList(c echo.Context) error {
	list, err := h.svc.ListCanaries(c.Request().Context(), project(c), c.Param("id"))
	if err != nil {
		return err
	}
	out := cloudapi.CanaryList{Canaries: make([]cloudapi.CanaryRecord, len(list))}
	for i := range list {
		out.Canaries[i] = canaryRecordWire(&list[i])
	}
	return c.JSON(http.StatusOK, out)
}

// canaryGet answers GET .../deployments/{id}/canaries/{canaryId}.
func (h *Handler) canaryGet(c echo.Context) error {
	r, err := h.svc.GetCanary(c.Request().Context(), project(c), c.Param("id"), c.Param("canaryId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, canaryRecordWire(r))
}

func canaryRecordWire(r *core.CanaryRecord) cloudapi.CanaryRecord {
	out := cloudapi.CanaryRecord{Canary: *canaryWire(&r.Canary), StartedBy: r.StartedBy, EndedAt: r.EndedAt, EndedBy: r.EndedBy,
		Outcome: r.Outcome, OverrideReason: r.OverrideReason, Compare: make([]cloudapi.CanaryArm, len(r.Compare))}
	for i, a := range r.Compare {
		out.Compare[i] = cloudapi.CanaryArm{Arm: a.Arm, Target: a.Target, ArmStats: armStatsWire(a.Totals)}
	}
	return out
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
		LatencyP50Ms: s.Latency.P50Ms, LatencyP95Ms: s.Latency.P95Ms, LatencyErrorPct: s.Latency.ErrorPct,
		TTFTP50Ms: s.TTFT.P50Ms, TTFTP95Ms: s.TTFT.P95Ms, TTFTErrorPct: s.TTFT.ErrorPct,
		Feedback: cloudapi.FeedbackCounts{Up: s.Feedback.Up, Down: s.Feedback.Down, Neutral: s.Feedback.Neutral}}
}
