package studio

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/views"
)

// usageGet is GET /api/deployments/{id}/usage?range=24h|7d|30d[&keyId=], the detail page's usage
// card: by hour for 24 h, by day for 7 and 30 days. JSON callers get the cloud's answer as it is.
func (s *Server) usageGet(c echo.Context) error {
	if c.QueryParam("groupBy") == "arm" {
		return s.usageByArm(c)
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	rng := c.QueryParam("range")
	if rng == "" {
		rng = views.UsageRange24h
	}
	now := time.Now()
	var opts cloudapi.UsageOptions
	switch rng {
	case views.UsageRange24h:
		opts = cloudapi.UsageWindow(now, 24, cloudapi.GranularityHour)
	case views.UsageRange7d:
		opts = cloudapi.UsageWindow(now, 7, cloudapi.GranularityDay)
	case views.UsageRange30d:
		opts = cloudapi.UsageWindow(now, 30, cloudapi.GranularityDay)
	default:
		return badRequest("invalid_request", "range must be 24h, 7d or 30d.")
	}
	opts.KeyID = c.QueryParam("keyId")
	cl, err := s.projectClient(ctx)
	if err != nil {
		return err
	}
	u, err := cl.GetDeploymentUsage(ctx, id, opts)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.JSON(http.StatusOK, u)
	}
	return renderHTML(c, http.StatusOK, views.UsageBody(usageView(id, rng, opts.Granularity, u)))
}

func usageView(endpointID, rng, granularity string, u *cloudapi.Usage) views.Usage {
	v := views.Usage{EndpointID: endpointID, Range: rng, Per: granularity, Buckets: make([]views.UsageBucket, 0, len(u.Buckets))}
	for _, b := range u.Buckets {
		t := b.Start.UTC()
		ub := views.UsageBucket{
			Requests: b.Requests, Errors: b.Errors, PromptTokens: b.PromptTokens, CompletionTokens: b.CompletionTokens,
		}
		if granularity == cloudapi.GranularityDay {
			ub.Label, ub.Title = t.Format("Jan 2"), t.Format("Mon Jan 2")
		} else {
			ub.Label, ub.Title = t.Format("Jan 2 15:00"), t.Format("Jan 2, 15:00")+"–"+t.Add(time.Hour).Format("15:00")
		}
		if b.LatencyP50Ms != nil {
			ub.P50 = *b.LatencyP50Ms
		}
		if b.LatencyP95Ms != nil {
			ub.P95 = *b.LatencyP95Ms
		}
		if b.LatencyErrorPct != nil {
			ub.ErrPct = *b.LatencyErrorPct
		}
		v.Requests += b.Requests
		v.Errors += b.Errors
		v.PromptTokens += b.PromptTokens
		v.CompletionTokens += b.CompletionTokens
		v.CachedTokens += b.CachedTokens
		v.FeedbackUp, v.FeedbackDown, v.FeedbackNeutral = v.FeedbackUp+b.Feedback.Up, v.FeedbackDown+b.Feedback.Down, v.FeedbackNeutral+b.Feedback.Neutral
		v.AddRefused(b.Refused, b.RefusedCodes)
		v.AddQueue(b.Queued, b.QueueMs)
		if c := b.Copies; c != nil {
			v.AddCopies(c.Requests, c.PromptTokens, c.CompletionTokens)
		}
		v.Buckets = append(v.Buckets, ub)
	}
	return v
}
