package core

import (
	"context"
	"sort"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
)

// Usage by arm (docs/API.md, "Usage by arm"): the recorder adds every call an arm of a canary answered
// to an hourly row per deployment, arm and the arm's target (usage_arm_hourly), beside the per-key rows.

// Usage groupings.
const (
	GroupByKey = ""    // the default: buckets of every key's calls, and each key's totals
	GroupByArm = "arm" // an entry per canary arm and target
)

// ArmStats are an arm's calls over a bucket or a range; the percentiles (of the calls answered) are
// nil without calls.
type ArmStats struct {
	Requests, Errors, PromptTokens, CompletionTokens int64
	Latency, TTFT                                    Percentiles
	Feedback                                         FeedbackCounts // the scores given to the arm's runs
}

// ArmBucket is one hour or UTC day of an arm's calls.
type ArmBucket struct {
	Start time.Time
	ArmStats
}

// ArmUsage is one arm and target's totals and buckets over a range.
type ArmUsage struct {
	Arm, Target string
	Totals      ArmStats
	Buckets     []ArmBucket
}

// armSums are an arm's counts summed and its latencies merged.
type armSums struct {
	requests, errors, prompt, completion int64
	feedback                             FeedbackCounts
	latency, ttft                        latencies
}

func (a *armSums) add(r dbsqlc.UsageArmListRow) {
	a.requests += r.Requests
	a.errors += r.Errors
	a.prompt += r.PromptTokens
	a.completion += r.CompletionTokens
	a.feedback.Up += r.FeedbackUp
	a.feedback.Down += r.FeedbackDown
	a.feedback.Neutral += r.FeedbackNeutral
	lat := Histogram{r.Lat25, r.Lat50, r.Lat100, r.Lat250, r.Lat500, r.Lat1000, r.Lat2500, r.Lat5000, r.Lat10000, r.Lat30000, r.Lat60000, r.LatInf}
	ttft := Histogram{r.Ttft25, r.Ttft50, r.Ttft100, r.Ttft250, r.Ttft500, r.Ttft1000, r.Ttft2500, r.Ttft5000, r.Ttft10000, r.Ttft30000, r.Ttft60000, r.TtftInf}
	if r.LatencySketch == nil && r.Requests > 0 {
		a.latency.addHistogram(lat) // a row written before the sketches
		a.ttft.addHistogram(ttft)
		return
	}
	a.latency.add(r.LatencySketch, lat)
	a.ttft.add(r.TtftSketch, ttft)
}

func (a *armSums) stats() ArmStats {
	return ArmStats{Requests: a.requests, Errors: a.errors, PromptTokens: a.prompt, CompletionTokens: a.completion, Feedback: a.feedback,
		Latency: a.latency.percentiles(), TTFT: a.ttft.percentiles()}
}

// UsageByArm returns a deployment's usage per canary arm and target over a range (the range rules of
// Usage): the primary's entries first, then the canary's, each with every bucket of the range.
func (s *Service) UsageByArm(ctx context.Context, pr Project, deploymentID string, req UsageRequest) ([]ArmUsage, error) {
	if req.KeyID != "" {
		return nil, errorf(edgemodel.CodeInvalidRequest, "groupBy=arm takes no keyId: arms are counted over every key")
	}
	rng, err := ParseUsageRange(req, s.now())
	if err != nil {
		return nil, err
	}
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	return s.armUsage(ctx, d.ID, "", rng)
}

// armUsage sums a deployment's arm rows over a range, of one canary's calls when canaryID is not "".
func (s *Service) armUsage(ctx context.Context, deploymentID, canaryID string, rng UsageRange) ([]ArmUsage, error) {
	rows, err := s.q.UsageArmList(ctx, s.db, dbsqlc.UsageArmListParams{DeploymentID: deploymentID, CanaryID: canaryID, FromHour: ms(rng.From), ToHour: ms(rng.To)})
	if err != nil {
		return nil, err
	}
	type armOf struct{ arm, target string }
	n, step, from := rng.Buckets(), rng.Step.Milliseconds(), ms(rng.From)
	totals := map[armOf]*armSums{}
	buckets := map[armOf][]armSums{}
	var order []armOf
	for _, r := range rows {
		k := armOf{r.Arm, r.ArmTarget}
		if totals[k] == nil {
			totals[k], buckets[k] = &armSums{}, make([]armSums, n)
			order = append(order, k)
		}
		totals[k].add(r)
		if i := int((r.Hour - from) / step); i >= 0 && i < n {
			buckets[k][i].add(r)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].arm != order[j].arm {
			return order[i].arm == edgemodel.ArmPrimary
		}
		return order[i].target < order[j].target
	})
	out := make([]ArmUsage, 0, len(order))
	for _, k := range order {
		u := ArmUsage{Arm: k.arm, Target: k.target, Totals: totals[k].stats(), Buckets: make([]ArmBucket, n)}
		for i := range u.Buckets {
			u.Buckets[i] = ArmBucket{Start: rng.From.Add(time.Duration(i) * rng.Step), ArmStats: buckets[k][i].stats()}
		}
		out = append(out, u)
	}
	return out, nil
}
