package views

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// LimitsForm is the rate-limits form of a deployment (KeyID empty) or of one key, with the values
// as typed ("" is unlimited) and the errors of a failed attempt, keyed by field name
// ("requestsPerMinute", "tokensPerMinute"); Message is a form-wide error.
type LimitsForm struct {
	EndpointID        string
	KeyID             string
	KeyLabel          string
	RequestsPerMinute string
	TokensPerMinute   string
	// BudgetTokens and BudgetPeriod are a key's token budget as typed ("" tokens: none; period "day"
	// or "month"); the deployment's budget has its own card (BudgetForm).
	BudgetTokens string
	BudgetPeriod string
	Errors       map[string]string
	Message      string
	Saved        bool
}

// Usage ranges the usage card offers.
const (
	UsageRange24h = "24h"
	UsageRange7d  = "7d"
	UsageRange30d = "30d"
)

// UsageRanges are the card's choices, in order, with their labels.
var UsageRanges = []struct{ Value, Label, Text string }{
	{UsageRange24h, "24 h", "24 hours"},
	{UsageRange7d, "7 d", "7 days"},
	{UsageRange30d, "30 d", "30 days"},
}

// UsageRangeText is "24 hours" for "24h"; "" for a range the card does not offer.
func UsageRangeText(r string) string {
	for _, u := range UsageRanges {
		if u.Value == r {
			return u.Text
		}
	}
	return ""
}

// Usage is the usage card's body: one range of buckets and their totals.
type Usage struct {
	EndpointID string
	Range      string // UsageRange24h, ...
	Per        string // "hour" or "day"
	Buckets    []UsageBucket

	Requests, Errors, PromptTokens, CompletionTokens int64
	// CachedTokens are the prompt tokens upstreams read from their prefix caches (of PromptTokens).
	CachedTokens int64
	// Refused counts the errors answered 401, 404 or 429 over the range, by status (docs/API.md, "Usage").
	Refused map[int]int64
	// RefusedCodes counts, of Refused[429], those admission refused, by code (model_busy,
	// budget_exhausted).
	RefusedCodes map[string]int64
	// Queued counts the calls that waited for their model's turn, QueueMs their wait in all (ms).
	Queued, QueueMs int64
	// FeedbackUp, FeedbackDown and FeedbackNeutral count the scores given to the range's runs
	// (docs/API.md, "Feedback").
	FeedbackUp, FeedbackDown, FeedbackNeutral int64
	// Copies and CopyTokens count the calls svc made itself from the callers' calls (shadow copies) and
	// their tokens (in and out), which the counts above leave out (docs/API.md, "Usage").
	Copies, CopyTokens int64
}

// AddCopies adds a bucket's copies to the totals.
func (u *Usage) AddCopies(requests, promptTokens, completionTokens int64) {
	u.Copies += requests
	u.CopyTokens += promptTokens + completionTokens
}

// CopiesText says how many calls svc made itself, apart from the callers' ("Shadow copies 10 (2,400
// tokens), not counted above"); "" when none.
func (u Usage) CopiesText() string {
	if u.Copies <= 0 {
		return ""
	}
	return "Shadow copies " + Count(u.Copies) + " (" + Count(u.CopyTokens) + " tokens), not counted above"
}

// FeedbackText says how the range's runs were scored ("Feedback on 5 runs: 3 good, 1 bad, 1
// neutral"); "" when none was.
func (u Usage) FeedbackText() string {
	total := u.FeedbackUp + u.FeedbackDown + u.FeedbackNeutral
	if total <= 0 {
		return ""
	}
	runs := " runs: "
	if total == 1 {
		runs = " run: "
	}
	parts := []string{Count(u.FeedbackUp) + " good", Count(u.FeedbackDown) + " bad"}
	if u.FeedbackNeutral > 0 {
		parts = append(parts, Count(u.FeedbackNeutral)+" neutral")
	}
	return "Feedback on " + Count(total) + runs + strings.Join(parts, ", ")
}

// CacheText says how much of the prompt tokens the upstreams' prefix caches held ("Prompt cache: 84% of
// 12,000 tokens in"); "" when no upstream reported a cached token (one upstream without a cache, or
// none reporting it).
func (u Usage) CacheText() string {
	if u.CachedTokens <= 0 || u.PromptTokens <= 0 {
		return ""
	}
	pct := u.CachedTokens * 100 / u.PromptTokens
	return "Prompt cache: " + strconv.FormatInt(pct, 10) + "% of " + Count(u.PromptTokens) + " tokens in"
}

// AddRefused adds a bucket's refused calls: by status, and of the 429s by admission's code.
func (u *Usage) AddRefused(byStatus map[int]int64, byCode map[string]int64) {
	for status, n := range byStatus {
		if u.Refused == nil {
			u.Refused = map[int]int64{}
		}
		u.Refused[status] += n
	}
	for code, n := range byCode {
		if u.RefusedCodes == nil {
			u.RefusedCodes = map[string]int64{}
		}
		u.RefusedCodes[code] += n
	}
}

// AddQueue adds a bucket's calls that waited for their model's turn and their wait in all (ms).
func (u *Usage) AddQueue(queued, queueMs int64) {
	u.Queued += queued
	u.QueueMs += queueMs
}

// QueueText says how the range's calls waited for their model's turn ("12 calls waited for their
// model's turn: 3,400 ms in all, 283 ms on average"); "" when none did.
func (u Usage) QueueText() string {
	if u.Queued <= 0 {
		return ""
	}
	calls := " calls"
	if u.Queued == 1 {
		calls = " call"
	}
	return Count(u.Queued) + calls + " waited for their model's turn: " + Count(u.QueueMs) + " ms in all, " +
		Count(u.QueueMs/u.Queued) + " ms on average"
}

// admissionCodes are the 429s admission refuses, in the order RefusedText says them, with their words.
var admissionCodes = []struct{ code, why string }{
	{"model_busy", "when the model stayed busy past their wait"},
	{"budget_exhausted", "past a token budget"},
}

// RefusedText says in words how many calls were refused before reaching a model, and why, in status
// order ("6 calls refused, never run: 3 with a wrong or missing key (401), 2 to a disabled endpoint or
// a model it does not serve (404), 1 over a rate limit (429)"), the 429s of admission by their code
// ("2 when the model stayed busy past their wait (429 model_busy), 1 past a token budget (429
// budget_exhausted)"); "" when none was.
func (u Usage) RefusedText() string {
	statuses := make([]int, 0, len(u.Refused))
	var total int64
	for status, n := range u.Refused {
		if n > 0 {
			statuses = append(statuses, status)
			total += n
		}
	}
	if total == 0 {
		return ""
	}
	sort.Ints(statuses)
	parts := make([]string, len(statuses))
	for i, status := range statuses {
		n := u.Refused[status]
		if status == 429 {
			for _, a := range admissionCodes {
				n -= u.RefusedCodes[a.code]
			}
		}
		parts[i] = Count(n) + " " + refusedWhy(status) + " (" + strconv.Itoa(status) + ")"
	}
	if u.Refused[429] > 0 {
		// The 429s split: over a rate limit (dropped when none), then admission's, each by its code.
		i := slices.Index(statuses, 429)
		split := []string{}
		if rest := u.Refused[429] - u.RefusedCodes["model_busy"] - u.RefusedCodes["budget_exhausted"]; rest > 0 {
			split = append(split, parts[i])
		}
		for _, a := range admissionCodes {
			if n := u.RefusedCodes[a.code]; n > 0 {
				split = append(split, Count(n)+" "+a.why+" (429 "+a.code+")")
			}
		}
		parts = slices.Concat(parts[:i], split, parts[i+1:])
	}
	calls := " calls"
	if total == 1 {
		calls = " call"
	}
	return Count(total) + calls + " refused, never run: " + strings.Join(parts, ", ")
}

// refusedWhy is why the edge refuses a call with status, in words.
func refusedWhy(status int) string {
	switch status {
	case 401:
		return "with a wrong or missing key"
	case 403:
		return "with a key not allowed here"
	case 404:
		return "to a disabled endpoint or a model it does not serve"
	case 413:
		return "too large"
	case 429:
		return "over a rate limit"
	}
	return "answered " + http.StatusText(status)
}

// UsageBucket is one bar of the charts. Label is short ("15:00", "Jan 2"), Title is the bucket in full.
type UsageBucket struct {
	Label, Title                                     string
	Requests, Errors, PromptTokens, CompletionTokens int64
	P50, P95                                         int64 // ms; 0 without calls
	// ErrPct is the percentiles' largest relative error in percent: 1 from the usage sketches, more
	// for hours recorded before them (estimates from a histogram); 0 without calls.
	ErrPct int
}

// Latency is the bucket's p50 / p95 as every surface words them (LatencyPair).
func (b UsageBucket) Latency() string {
	e := b.ErrPct
	return LatencyPair(&b.P50, &b.P95, &e)
}

// about is "about " when a percentile of the range is an estimate, "" when all are within 1%.
func (u Usage) about() string {
	for _, b := range u.Buckets {
		if b.ErrPct > 1 {
			return "about "
		}
	}
	return ""
}

// latencyTitle explains the range's percentiles.
func (u Usage) latencyTitle() string { return latencyTitle(u.about() != "") }

// Empty reports whether the range saw no call at all.
func (u Usage) Empty() bool { return u.Requests == 0 }

// chart geometry: every bucket is barStep units wide in a viewBox chartHeight units high; the SVG is
// stretched to the card's width (preserveAspectRatio none), so it reads the same at any width, and
// all text stays in HTML around it.
const (
	barStep     = 10
	barWidth    = 8
	chartHeight = 100
)

func (u Usage) viewBox() string {
	return "0 0 " + strconv.Itoa(len(u.Buckets)*barStep) + " " + strconv.Itoa(chartHeight)
}

func (u Usage) maxRequests() int64 {
	var m int64
	for _, b := range u.Buckets {
		m = max(m, b.Requests)
	}
	return m
}

func (u Usage) maxTokens() int64 {
	var m int64
	for _, b := range u.Buckets {
		m = max(m, b.PromptTokens+b.CompletionTokens)
	}
	return m
}

func (u Usage) maxLatency() int64 {
	var m int64
	for _, b := range u.Buckets {
		m = max(m, b.P95)
	}
	return m
}

func (u Usage) maxP50() int64 {
	var m int64
	for _, b := range u.Buckets {
		m = max(m, b.P50)
	}
	return m
}

// bar is one rectangle of a chart, in viewBox units.
type bar struct {
	X, Y, W, H string
}

// barAt is the rectangle of bucket i for value v on top of base (stacked bars), scaled to top. A
// non-zero value is at least one unit high, so that a single call stays visible next to a thousand.
func barAt(i int, base, v, top int64) bar {
	if top <= 0 {
		top = 1
	}
	h := float64(v) * chartHeight / float64(top)
	if v > 0 && h < 1 {
		h = 1
	}
	b := float64(base) * chartHeight / float64(top)
	return bar{
		X: strconv.Itoa(i*barStep + (barStep-barWidth)/2),
		Y: fmtUnits(chartHeight - b - h),
		W: strconv.Itoa(barWidth),
		H: fmtUnits(h),
	}
}

func fmtUnits(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// Count writes n with thousands separators: 1,234,567.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// LimitText is a key's or deployment's limits in a few words: "60 req/min · 1,000 tokens/min",
// "Unlimited" when neither is set.
func LimitText(rpm, tpm string) string {
	var parts []string
	if n, err := strconv.ParseInt(rpm, 10, 64); err == nil {
		parts = append(parts, Count(n)+" req/min")
	}
	if n, err := strconv.ParseInt(tpm, 10, 64); err == nil {
		parts = append(parts, Count(n)+" tokens/min")
	}
	if len(parts) == 0 {
		return "Unlimited"
	}
	return strings.Join(parts, " · ")
}

// usagePath is the studio route of an endpoint's usage card for a range.
func usagePath(endpointID, rng string) string {
	return endpointPath(endpointID, "usage") + "?range=" + rng
}

// latencyEstimate says why percentiles of hours recorded before the usage sketches are labelled "about": they are read from a
// latency histogram (docs/API.md, usage), so one 20 ms call can show p50 13 ms; a run's own latency
// is exact in Runs.
const latencyEstimate = "Estimated from a latency histogram, so a few calls can read a little off; each run's exact latency is in Runs."
