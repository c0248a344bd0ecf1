package views

import (
	"strconv"
	"time"
)

// Canary modes, as the studio's form sends them.
const (
	CanarySplit  = "split"
	CanaryShadow = "shadow"
)

// Canary is an endpoint's canary as the studio shows it; Set is false when it has none.
type Canary struct {
	Set           bool
	ID            string
	TargetSummary string // e.g. "Checkpoint step 400 (job 1a2b3c4d)"
	Percent       int
	Mode          string
	Started       string // when it started, e.g. "Dec 2, 14:05 UTC"
	Shorthand     string // its target in the CLI's shorthand (base:<model>, …), the eval form's candidate
}

// Text is the canary in a few words, for the list's summary line and the card's head.
func (c Canary) Text() string {
	if !c.Set {
		return ""
	}
	if c.Mode == CanaryShadow {
		return "Canary (shadow): " + c.TargetSummary + " answers a copy of every call"
	}
	return "Canary: " + c.TargetSummary + " on " + strconv.Itoa(c.Percent) + "% of sessions"
}

// ArmColumn is one arm of the canary card's comparison.
type ArmColumn struct {
	Arm, Target                                      string
	Requests, Errors, PromptTokens, CompletionTokens int64
	// Latency and TTFT are the p50 / p95 pairs as LatencyPair words them ("255 / 268 ms"; "about" and
	// the error only for an estimate); P50 is the latency's p50 alone, "-" without calls.
	Latency, TTFT, P50 string
	// Estimated is set when the percentiles are estimates from histograms.
	Estimated bool
	// PerBucket are the arm's requests per bucket of the range, for the chart.
	PerBucket []int64
	// The scores given to the arm's runs (docs/API.md, "Usage by arm").
	FeedbackUp, FeedbackDown, FeedbackNeutral int64
}

// ErrorRate is the arm's errors as a share of its requests, "-" without calls.
func (a ArmColumn) ErrorRate() string {
	if a.Requests == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(a.Errors)*100/float64(a.Requests), 'f', 1, 64) + "%"
}

// Arms is the canary card's comparison: an entry per arm and target, the primary's first, of the
// calls made under the running canary; the chart is the last 24 hours' requests per arm.
type Arms struct {
	EndpointID string
	Columns    []ArmColumn
	Labels     []time.Time // the buckets' starts
	PerBucket  [][]int64   // per column, the requests of each bucket
}

// CanaryRecord is one canary of an endpoint's history as the canary card shows it.
type CanaryRecord struct {
	ID, Mode, TargetSummary, Started, Ended string
	Outcome                                 string // running, promoted, ended or replaced
	Arms                                    []ArmColumn
}

// CanaryHistory is the canary card's history: the outcome of the last canary when none runs (with the
// compare it ended on), and every past canary.
type CanaryHistory struct {
	EndpointID string
	Last       *CanaryRecord // the last canary, when it ended and none runs since
	Past       []CanaryRecord
}

// arm is the column of an arm, nil when it answered no call.
func (r CanaryRecord) arm(name string) *ArmColumn {
	for i := range r.Arms {
		if r.Arms[i].Arm == name {
			return &r.Arms[i]
		}
	}
	return nil
}

// OutcomeTitle is the outcome in a word, capitalised.
func (r CanaryRecord) OutcomeTitle() string {
	switch r.Outcome {
	case "promoted":
		return "Promoted"
	case "ended":
		return "Ended"
	case "replaced":
		return "Replaced"
	}
	return "Running"
}

// Notice is what happened to a canary and the compare it was decided on, in a sentence: "Promoted
// sim-qwen3-8b on Dec 2, 14:05 UTC: canary 16 calls, p50 365 ms vs 255 ms, 3 good / 1 bad".
func (r CanaryRecord) Notice() string {
	s := r.OutcomeTitle() + " " + r.TargetSummary
	if r.Ended != "" {
		s += " on " + r.Ended
	}
	c, p := r.arm("canary"), r.arm("primary")
	if c == nil {
		return s + ": the canary answered no call"
	}
	s += ": canary " + Count(c.Requests) + " calls, p50 " + c.P50
	if p != nil {
		s += " vs " + p.P50
	}
	return s + ", " + Count(c.FeedbackUp) + " good / " + Count(c.FeedbackDown) + " bad"
}

func (a Arms) maxRequests() int64 {
	var m int64
	for _, c := range a.PerBucket {
		for _, n := range c {
			m = max(m, n)
		}
	}
	return m
}

// viewBox fits the chart: each bucket holds a bar per arm side by side.
func (a Arms) viewBox() string {
	return "0 0 " + strconv.Itoa(len(a.Labels)*barStep) + " " + strconv.Itoa(chartHeight)
}

// armBar is the bar of column c of the comparison in bucket i: the bucket split between the arms.
func (a Arms) armBar(i, c int, v int64) bar {
	b := barAt(i, 0, v, a.maxRequests())
	n := max(len(a.Columns), 1)
	w := barWidth / n
	b.W = strconv.Itoa(w)
	b.X = strconv.Itoa(i*barStep + (barStep-barWidth)/2 + c*w)
	return b
}

// armClass colours an arm's bars: the primary as the usage card's, the canary apart.
func armClass(arm string) string {
	if arm == "canary" {
		return "bar bar-canary"
	}
	return "bar"
}

// canaryPath is the studio route of an endpoint's canary.
func canaryPath(id string, rest ...string) string {
	return endpointPath(id, append([]string{"canary"}, rest...)...)
}

// armsPath loads the canary card's comparison of a canary's calls.
func armsPath(id, canaryID string) string {
	return endpointPath(id, "usage") + "?groupBy=arm&range=" + UsageRange24h + "&canary=" + canaryID
}

func (r CanaryRecord) calls(arm string) string {
	if a := r.arm(arm); a != nil {
		return Count(a.Requests)
	}
	return "0"
}

func (r CanaryRecord) p50(arm string) string {
	if a := r.arm(arm); a != nil {
		return a.P50
	}
	return "-"
}

// latencyTitle explains percentiles: within 1%, or estimates.
func latencyTitle(estimated bool) string {
	if estimated {
		return latencyEstimate
	}
	return latencyExact
}
