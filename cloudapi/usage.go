package cloudapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Usage granularities.
const (
	GranularityHour = "hour"
	GranularityDay  = "day"
)

// UsageBucket is one hour or one UTC day of a deployment's (or a key's) calls. Buckets without calls
// are present with zero counts and null latencies. Latency percentiles are of the calls answered
// (refused and failed calls left out), within LatencyErrorPct percent of the true value: 1 from the
// usage sketches, more where hours recorded before them are estimated from a fixed-bucket histogram
// (docs/API.md, "Usage").
type UsageBucket struct {
	Start            time.Time `json:"start"`
	Requests         int64     `json:"requests"`
	Errors           int64     `json:"errors"`
	PromptTokens     int64     `json:"promptTokens"`
	CompletionTokens int64     `json:"completionTokens"`
	// CachedTokens are the prompt tokens upstreams read from their prefix caches (of promptTokens):
	// cachedTokens / promptTokens is the endpoint's cache hit rate.
	CachedTokens int64  `json:"cachedTokens"`
	LatencyP50Ms *int64 `json:"latencyP50Ms"`
	LatencyP95Ms *int64 `json:"latencyP95Ms"`
	// LatencyErrorPct is the largest relative error of the percentiles, in percent; null without calls.
	LatencyErrorPct *int `json:"latencyErrorPct"`
	// Refused counts the errors answered 401, 404 or 429, by status ({"401": 3}); absent when none.
	Refused map[int]int64 `json:"refused,omitempty"`
	// RefusedCodes counts, of the 429s in Refused, those refused by admission, by code: "model_busy"
	// (the model stayed busy past the call's queue timeout) and "budget_exhausted" (a token budget was
	// spent); the rest were over a rate limit. Absent when none.
	RefusedCodes map[string]int64 `json:"refusedCodes,omitempty"`
	// Queued counts the calls that waited for their model's turn (docs/OPERATIONS.md, "Admission"), and
	// QueueMs is what they waited in all, in milliseconds; both absent when no call waited.
	Queued  int64 `json:"queued,omitempty"`
	QueueMs int64 `json:"queueMs,omitempty"`
	// Feedback counts the scores given to the bucket's runs (docs/API.md, "Feedback").
	Feedback FeedbackCounts `json:"feedback"`
	// Copies counts the calls svc made itself from the callers' calls (shadow copies), which the counts
	// above leave out: the deployment's usage, never a key's. Absent when none, and from a key's usage.
	Copies *CopyUsage `json:"copies,omitempty"`
}

// CopyUsage counts the calls svc made itself from a deployment's calls (docs/API.md, "Usage").
type CopyUsage struct {
	Requests         int64 `json:"requests"`
	Errors           int64 `json:"errors"`
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
}

// KeyUsage is one key's totals over the queried range.
type KeyUsage struct {
	KeyID            string `json:"keyId"`
	Requests         int64  `json:"requests"`
	Errors           int64  `json:"errors"`
	PromptTokens     int64  `json:"promptTokens"`
	CompletionTokens int64  `json:"completionTokens"`
}

// Usage is the answer of GetDeploymentUsage: the buckets in time order and, when no key was asked
// for, each key's totals over the range (keys without calls are left out).
type Usage struct {
	Buckets []UsageBucket `json:"buckets"`
	Keys    []KeyUsage    `json:"keys,omitempty"`
}

// UsageOptions select the range and the bucket size. Zero values take the server defaults: the 24
// hours up to now, by hour, every key.
type UsageOptions struct {
	From, To    time.Time
	Granularity string // GranularityHour or GranularityDay
	KeyID       string // one key's calls only
}

// UsageWindow is the last n buckets of a granularity, the current (partial) one included: n = 24 by
// hour is "the last 24 hours", n = 7 by day "the last 7 days".
func UsageWindow(now time.Time, n int, granularity string) UsageOptions {
	step := time.Hour
	if granularity == GranularityDay {
		step = 24 * time.Hour
	}
	to := now.UTC().Truncate(step).Add(step)
	return UsageOptions{From: to.Add(-time.Duration(n) * step), To: to, Granularity: granularity}
}

// GetDeploymentUsage returns a deployment's usage aggregates: requests, errors, tokens and latency
// percentiles per hour or per day. They are kept 400 days, whatever the run retention.
func (c *Client) GetDeploymentUsage(ctx context.Context, deploymentID string, opts UsageOptions) (*Usage, error) {
	p, err := c.projectPath("deployments", deploymentID, "usage")
	if err != nil {
		return nil, err
	}
	var out Usage
	if err := c.do(ctx, http.MethodGet, p, opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// query is the options as the usage route's query parameters.
func (opts UsageOptions) query() url.Values {
	q := url.Values{}
	if !opts.From.IsZero() {
		q.Set("from", opts.From.UTC().Format(time.RFC3339))
	}
	if !opts.To.IsZero() {
		q.Set("to", opts.To.UTC().Format(time.RFC3339))
	}
	if opts.Granularity != "" {
		q.Set("granularity", opts.Granularity)
	}
	if opts.KeyID != "" {
		q.Set("keyId", opts.KeyID)
	}
	return q
}
