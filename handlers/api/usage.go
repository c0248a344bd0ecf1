package api

import (
	"net/http"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func (h *Handler) usageGet(c echo.Context) error {
	req := core.UsageRequest{
		From: c.QueryParam("from"), To: c.QueryParam("to"), Granularity: c.QueryParam("granularity"), KeyID: c.QueryParam("keyId"),
	}
	switch c.QueryParam("groupBy") {
	case core.GroupByKey:
	case core.GroupByArm:
		return h.usageByArm(c, req)
	default:
		return &edgemodel.Error{Code: edgemodel.CodeInvalidRequest, Message: "groupBy must be \"arm\" or left out (got \"" + c.QueryParam("groupBy") + "\")"}
	}
	u, err := h.svc.Usage(c.Request().Context(), project(c), c.Param("id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, usageWire(u))
}

func usageWire(u *core.Usage) cloudapi.Usage {
	out := cloudapi.Usage{Buckets: make([]cloudapi.UsageBucket, len(u.Buckets))}
	for i, b := range u.Buckets {
		out.Buckets[i] = cloudapi.UsageBucket{Start: b.Start, Requests: b.Requests, Errors: b.Errors, PromptTokens: b.PromptTokens,
			CompletionTokens: b.CompletionTokens, CachedTokens: b.CachedTokens, LatencyP50Ms: b.Latency.P50Ms, LatencyP95Ms: b.Latency.P95Ms,
			LatencyErrorPct: b.Latency.ErrorPct, Refused: b.Refused, RefusedCodes: b.RefusedCodes, Queued: b.Queued, QueueMs: b.QueueMs,
			Feedback: cloudapi.FeedbackCounts{Up: b.Feedback.Up, Down: b.Feedback.Down, Neutral: b.Feedback.Neutral}}
		if c := b.Copies; c != nil {
			out.Buckets[i].Copies = &cloudapi.CopyUsage{Requests: c.Requests, Errors: c.Errors, PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens}
		}
	}
	if u.Keys != nil {
		out.Keys = make([]cloudapi.KeyUsage, len(u.Keys))
		for i, k := range u.Keys {
			out.Keys[i] = cloudapi.KeyUsage{KeyID: k.KeyID, Requests: k.Requests, Errors: k.Errors, PromptTokens: k.PromptTokens,
				CompletionTokens: k.CompletionTokens}
		}
	}
	return out
}
