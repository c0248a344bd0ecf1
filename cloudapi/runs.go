package cloudapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ListRunsOptions pages through runs. Zero values leave the choice to the server.
type ListRunsOptions struct {
	Limit  int    // page size; 0 = server default
	Cursor string // RunPage.NextCursor of the previous page; empty = first page (ask it with the same filters)
	// The filters (docs/API.md, "Management API", the runs listing), each off when zero: Status "ok" or "error"; KeyID the key the
	// calls were made with; Arm ArmPrimary (the calls clients made that the primary answered, with the
	// runs of no canary), ArmCanary (the canary's, shadow copies included) or ArmShadow (the shadow
	// copies alone); Surface the route the calls came in by ("chat", "messages", "responses",
	// "embeddings", "completions"); created in [Since, Until).
	Status, KeyID, Arm, Surface string
	Since, Until                time.Time
	// Preview asks for each run's prompt preview (RunSummary.Preview), in pages of at most 50 runs.
	Preview bool
}

// ArmShadow is the runs filter's arm of the shadow copies alone (ListRunsOptions.Arm).
const ArmShadow = "shadow"

// maxPageSize is the largest page the deployment and job listings serve.
const maxPageSize = 500

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// ListRuns returns one page of a deployment's recorded runs, newest first.
func (c *Client) ListRuns(ctx context.Context, deploymentID string, opts ListRunsOptions) (*RunPage, error) {
	p, err := c.projectPath("deployments", deploymentID, "runs")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	for name, v := range map[string]string{"status": opts.Status, "key": opts.KeyID, "arm": opts.Arm, "surface": opts.Surface} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if opts.Preview {
		q.Set("preview", "true")
	}
	if !opts.Since.IsZero() {
		q.Set("since", opts.Since.UTC().Format(time.RFC3339Nano))
	}
	if !opts.Until.IsZero() {
		q.Set("until", opts.Until.UTC().Format(time.RFC3339Nano))
	}
	var out RunPage
	if err := c.do(ctx, http.MethodGet, p, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRun returns one run with its recorded request and response.
func (c *Client) GetRun(ctx context.Context, deploymentID, runID string) (*Run, error) {
	p, err := c.projectPath("deployments", deploymentID, "runs", runID)
	if err != nil {
		return nil, err
	}
	var out Run
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
