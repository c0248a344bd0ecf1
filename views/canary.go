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
	TargetSummary string // e.g. "Checkpoint step 400 (job 1a2b3c4d)"
	Percent       int
	Mode          string
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
	// Percentiles in milliseconds, "-" without calls.
	P50, P95, TTFT50, TTFT95 string
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

// Arms is the canary card's comparison of the last 24 hours: an entry per arm and target, the primary's
// first.
type Arms struct {
	EndpointID string
	Columns    []ArmColumn
	Labels     []time.Time // the buckets' starts
}

func (a Arms) maxRequests() int64 {
	var m int64
	for _, c := range a.Columns {
		for _, n := range c.PerBucket {
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

// armsPath loads the canary card's comparison.
func armsPath(id string) string {
	return endpointPath(id, "usage") + "?groupBy=arm&range=" + UsageRange24h
}
