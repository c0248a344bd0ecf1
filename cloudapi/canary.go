package cloudapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Canary modes (docs/API.md, "Canary").
const (
	CanarySplit  = "split"  // Percent of the sessions are answered by the canary, each session on one arm
	CanaryShadow = "shadow" // every call is answered by the primary; a copy goes to the canary, recorded only
)

// The arms a run records and usage is grouped by.
const (
	ArmPrimary = "primary"
	ArmCanary  = "canary"
)

// Canary is a deployment's second target: Percent (1-99) of its sessions in mode split, a copy of
// every call in mode shadow. ID and StartedAt are the server's (read back, never sent): a canary keeps
// its id while only its percent changes; a new target or mode is a new canary.
type Canary struct {
	ID        string    `json:"id,omitempty"`
	Target    Target    `json:"target"`
	Percent   int       `json:"percent"`
	Mode      string    `json:"mode"`
	StartedAt time.Time `json:"startedAt,omitzero"`
}

// Share is the canary's share in a few words: "10% split", or "shadow" (a copy of every call, whatever
// its percent).
func (c Canary) Share() string {
	if c.Mode == CanaryShadow {
		return CanaryShadow
	}
	return strconv.Itoa(c.Percent) + "% " + c.Mode
}

// CanaryUpdate is the canary field of an UpdateDeploymentRequest: Canary sets one, End ends it
// ("canary": null); the zero value leaves the canary as it is.
type CanaryUpdate struct {
	Canary *Canary
	End    bool
}

// IsZero reports whether the update leaves the canary (the field is then left out).
func (u CanaryUpdate) IsZero() bool { return u.Canary == nil && !u.End }

// MarshalJSON writes the canary, or null to end it.
func (u CanaryUpdate) MarshalJSON() ([]byte, error) {
	if u.Canary == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Target  Target `json:"target"`
		Percent int    `json:"percent"`
		Mode    string `json:"mode"`
	}{u.Canary.Target, u.Canary.Percent, u.Canary.Mode})
}

// SetCanary sets (or replaces) a deployment's canary.
func (c *Client) SetCanary(ctx context.Context, deploymentID string, canary Canary) (*Deployment, error) {
	return c.UpdateDeployment(ctx, deploymentID, UpdateDeploymentRequest{Canary: CanaryUpdate{Canary: &canary}})
}

// EndCanary ends a deployment's canary: every session is answered by its target again.
func (c *Client) EndCanary(ctx context.Context, deploymentID string) (*Deployment, error) {
	return c.UpdateDeployment(ctx, deploymentID, UpdateDeploymentRequest{Canary: CanaryUpdate{End: true}})
}

// PromoteCanary makes a deployment's canary its target in one change, and ends the canary.
func (c *Client) PromoteCanary(ctx context.Context, deploymentID string) (*Deployment, error) {
	p, err := c.projectPath("deployments", deploymentID, "canary", "promote")
	if err != nil {
		return nil, err
	}
	var out Deployment
	if err := c.do(ctx, http.MethodPost, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ArmStats are an arm's calls over a bucket or a range. Percentiles are of the calls answered, null
// without any; TTFT is the time to the first byte of the answer (a stream's first event, a whole answer
// otherwise). LatencyErrorPct and TTFTErrorPct are the largest relative error, in percent, of their
// percentiles: 1 from the usage sketches, more where hours recorded before them are estimated from
// their histograms (docs/API.md, "Usage").
type ArmStats struct {
	Requests         int64  `json:"requests"`
	Errors           int64  `json:"errors"`
	PromptTokens     int64  `json:"promptTokens"`
	CompletionTokens int64  `json:"completionTokens"`
	LatencyP50Ms     *int64 `json:"latencyP50Ms"`
	LatencyP95Ms     *int64 `json:"latencyP95Ms"`
	LatencyErrorPct  *int   `json:"latencyErrorPct"`
	TTFTP50Ms        *int64 `json:"ttftP50Ms"`
	TTFTP95Ms        *int64 `json:"ttftP95Ms"`
	TTFTErrorPct     *int   `json:"ttftErrorPct"`
	// Feedback counts the scores given to the arm's runs (docs/API.md, "Feedback").
	Feedback FeedbackCounts `json:"feedback"`
}

// ArmBucket is one hour or UTC day of an arm's calls.
type ArmBucket struct {
	Start time.Time `json:"start"`
	ArmStats
}

// ArmUsage is one arm of a deployment's canary, for one target: its totals over the range and its
// buckets (every bucket of the range present).
type ArmUsage struct {
	Arm     string      `json:"arm"`    // ArmPrimary or ArmCanary
	Target  string      `json:"target"` // the model id the arm served under (an adapter's name, or the base model)
	Totals  ArmStats    `json:"totals"`
	Buckets []ArmBucket `json:"buckets"`
}

// UsageByArm is the answer of GetDeploymentUsageByArm: an entry per arm and target that answered calls
// in the range (primary first), none for a deployment that never had a canary.
type UsageByArm struct {
	Arms []ArmUsage `json:"arms"`
}

// GetDeploymentUsageByArm returns a deployment's usage per canary arm (GET .../usage?groupBy=arm);
// opts.KeyID is not allowed with it.
func (c *Client) GetDeploymentUsageByArm(ctx context.Context, deploymentID string, opts UsageOptions) (*UsageByArm, error) {
	p, err := c.projectPath("deployments", deploymentID, "usage")
	if err != nil {
		return nil, err
	}
	q := opts.query()
	q.Set("groupBy", "arm")
	var out UsageByArm
	if err := c.do(ctx, http.MethodGet, p, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Canary outcomes, as a CanaryRecord's Outcome says them.
const (
	CanaryRunning  = "running"  // the deployment's canary now
	CanaryPromoted = "promoted" // its target became the deployment's
	CanaryEnded    = "ended"    // ended ("canary": null)
	CanaryReplaced = "replaced" // a canary of another target or mode took its place
)

// CanaryRecord is one canary of a deployment's history (GET .../deployments/{id}/canaries): the canary
// as last set, when and by whom (an identity id) it started and ended, its outcome, and its compare:
// an entry per arm and target with the totals of the calls made under this canary only.
type CanaryRecord struct {
	Canary
	StartedBy string     `json:"startedBy"`
	EndedAt   *time.Time `json:"endedAt"`
	EndedBy   string     `json:"endedBy"`
	Outcome   string     `json:"outcome"`
	// OverrideReason is why a promotion went past the promotion gate ("" when it did not).
	OverrideReason string      `json:"overrideReason,omitempty"`
	Compare        []CanaryArm `json:"compare"`
}

// CanaryArm is one arm and target of a canary's compare, with its totals.
type CanaryArm struct {
	Arm    string `json:"arm"`    // ArmPrimary or ArmCanary
	Target string `json:"target"` // the model id the arm served under
	ArmStats
}

// Arm returns the compare's entry of an arm (the first, when the arm served several targets), nil
// when the arm answered no call.
func (r *CanaryRecord) Arm(arm string) *CanaryArm {
	for i := range r.Compare {
		if r.Compare[i].Arm == arm {
			return &r.Compare[i]
		}
	}
	return nil
}

// CanaryList is the answer of ListCanaries.
type CanaryList struct {
	Canaries []CanaryRecord `json:"canaries"`
}

// ListCanaries returns a deployment's canaries, the newest first (the running one, if any, among
// them), each with its outcome and compare.
func (c *Client) ListCanaries(ctx context.Context, deploymentID string) ([]CanaryRecord, error) {
	p, err := c.projectPath("deployments", deploymentID, "canaries")
	if err != nil {
		return nil, err
	}
	var out CanaryList
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Canaries, nil
}

// GetCanary returns one canary of a deployment's history with its compare.
func (c *Client) GetCanary(ctx context.Context, deploymentID, canaryID string) (*CanaryRecord, error) {
	p, err := c.projectPath("deployments", deploymentID, "canaries", canaryID)
	if err != nil {
		return nil, err
	}
	var out CanaryRecord
	if err := c.do(ctx, http.MethodGet, p, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
