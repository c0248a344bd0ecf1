package core

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/runs"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// Usage aggregates (docs/API.md, "Usage"): the recorder adds every edge call to an hourly row per
// deployment and key; the usage route sums those rows into hours or days.

// Usage granularities.
const (
	GranularityHour = "hour"
	GranularityDay  = "day"
)

// UsageBucket is one hour or one UTC day of calls. The latency percentiles are nil without calls.
type UsageBucket struct {
	Start                                            time.Time
	Requests, Errors, PromptTokens, CompletionTokens int64
	// CachedTokens are the prompt tokens upstreams read from their prefix caches (of PromptTokens).
	CachedTokens int64
	// Latency is the p50 and p95 of the calls answered (refused and failed calls left out) and their error.
	Latency Percentiles
	// Refused counts the errors answered with a status of RefusedStatuses, by status; nil when none.
	Refused map[int]int64
	// RefusedCodes counts, of Refused[429], the calls admission refused, by code (runs.CodeModelBusy,
	// runs.CodeBudgetExhausted); nil when none.
	RefusedCodes map[string]int64
	// Queued counts the calls that waited for their model's turn, QueueMs their wait in all (ms).
	Queued, QueueMs int64
	// Feedback counts the scores given to the bucket's runs (by the hour of the run, not of the score).
	Feedback FeedbackCounts
	// Copies counts the calls svc made itself from the callers' calls (shadow copies), which the counts
	// above leave out; nil when there were none, and always in a key's usage.
	Copies *CopyUsage
}

// admissionUsage is what admission did to a row's calls (docs/OPERATIONS.md, "Admission"): the calls
// refused because their model stayed busy (model_busy) or a budget was spent (budget_exhausted), and
// the calls that waited for their turn (queued) with the milliseconds they waited in all.
type admissionUsage struct{ ModelBusy, BudgetExhausted, Queued, QueueMs int64 }

func (a *admissionUsage) add(b admissionUsage) {
	a.ModelBusy += b.ModelBusy
	a.BudgetExhausted += b.BudgetExhausted
	a.Queued += b.Queued
	a.QueueMs += b.QueueMs
}

// CopyUsage counts the calls svc made itself from a deployment's calls (shadow copies): the
// deployment's usage, never a key's.
type CopyUsage struct{ Requests, Errors, PromptTokens, CompletionTokens int64 }

// FeedbackCounts are the feedback scores given to runs: 1 (up), -1 (down) and 0 (neutral).
type FeedbackCounts struct{ Up, Down, Neutral int64 }

// RefusedStatuses are the statuses whose error calls usage counts apart (docs/API.md, "Usage"): 401
// (a wrong or missing key), 404 (the endpoint disabled, or a model it does not serve) and 429 (a rate
// limit). The recorder writes them in this order (refused_401, refused_404, refused_429).
var RefusedStatuses = [3]int{401, 404, 429}

// KeyUsage is one key's totals over a range.
type KeyUsage struct {
	KeyID                                            string
	Requests, Errors, PromptTokens, CompletionTokens int64
}

// Usage is a range of buckets and, unless it was asked for one key, each key's totals over it.
type Usage struct {
	Buckets []UsageBucket
	Keys    []KeyUsage
}

// Histogram counts requests per latency bucket of db.LatencyBoundsMs: Histogram[i] are the requests
// slower than bound i-1 and at most bound i; the last entry those over the last bound.
type Histogram [len(db.LatencyBoundsMs) + 1]int64

// Quantile estimates the q-quantile (0 < q ≤ 1) of the latencies counted, in milliseconds, by linear
// interpolation inside the bucket that holds it (as Prometheus' histogram_quantile does). A quantile
// in the open last bucket is reported as the last bound. ok is false for an empty histogram.
func (h Histogram) Quantile(q float64) (ms int64, ok bool) {
	var total int64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	var below int64
	for i, n := range h {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		if i == len(db.LatencyBoundsMs) {
			return db.LatencyBoundsMs[len(db.LatencyBoundsMs)-1], true
		}
		lower := int64(0)
		if i > 0 {
			lower = db.LatencyBoundsMs[i-1]
		}
		upper := db.LatencyBoundsMs[i]
		return lower + int64(math.Round(float64(upper-lower)*(rank-float64(below))/float64(n))), true
	}
	return db.LatencyBoundsMs[len(db.LatencyBoundsMs)-1], true
}

// Usage query bounds.
const (
	UsageRetention    = 400 * 24 * time.Hour // hourly rows older than this are swept
	DefaultUsageRange = 24 * time.Hour
	MaxHourBuckets    = 31 * 24 // a month of hours
	MaxDayBuckets     = 400
)

// UsageRequest is a usage query as the caller wrote it: from and to in RFC 3339 ("" for the
// defaults), granularity "hour" or "day" ("" for hour), and optionally one key.
type UsageRequest struct {
	From, To    string
	Granularity string
	KeyID       string
}

// UsageRange is a validated usage query: buckets of Step starting at From, the last one starting
// before To.
type UsageRange struct {
	From, To time.Time
	Step     time.Duration
}

// Buckets is the number of buckets of the range. A range past time.Duration's ~292 years saturates
// (time.Time.Sub) to more buckets than any limit, never wraps to a negative count.
func (r UsageRange) Buckets() int {
	d := r.To.Sub(r.From)
	n := d / r.Step
	if d%r.Step != 0 {
		n++
	}
	return int(n)
}

// ParseUsageRange applies the rules of the usage query: RFC 3339 times, to defaulting to now and from
// to 24 hours before to; from is moved back to the start of its hour or UTC day; from must be before
// to, and the range at most MaxHourBuckets hours or MaxDayBuckets days.
func ParseUsageRange(req UsageRequest, now time.Time) (UsageRange, error) {
	var r UsageRange
	switch strings.ToLower(req.Granularity) {
	case "", GranularityHour:
		r.Step = time.Hour
	case GranularityDay:
		r.Step = 24 * time.Hour
	default:
		return r, errorf(edgemodel.CodeInvalidRequest, "granularity must be %q or %q (got %q)", GranularityHour, GranularityDay, req.Granularity)
	}
	parse := func(name, v string) (time.Time, error) {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return t, errorf(edgemodel.CodeInvalidRequest, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q)", name, v)
		}
		return t.UTC(), nil
	}
	r.To = now.UTC()
	if req.To != "" {
		t, err := parse("to", req.To)
		if err != nil {
			return r, err
		}
		r.To = t
	}
	r.From = r.To.Add(-DefaultUsageRange)
	if req.From != "" {
		t, err := parse("from", req.From)
		if err != nil {
			return r, err
		}
		r.From = t
	}
	if !r.From.Before(r.To) {
		return r, errorf(edgemodel.CodeInvalidRequest, "from must be before to (from %s, to %s)", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	}
	// Hours and UTC days both start at multiples of their length since the Unix epoch.
	r.From = r.From.Truncate(r.Step)
	if r.Step == time.Hour && r.Buckets() > MaxHourBuckets {
		return r, errorf(edgemodel.CodeInvalidRequest, "an hourly range may span at most %d days; use granularity=day for longer ranges", MaxHourBuckets/24)
	}
	if r.Step != time.Hour && r.Buckets() > MaxDayBuckets {
		return r, errorf(edgemodel.CodeInvalidRequest, "a daily range may span at most %d days", MaxDayBuckets)
	}
	return r, nil
}

// usageRow is one hour's counts, for one key or summed over a deployment's keys.
type usageRow struct {
	hour                                             int64
	requests, errors, promptTokens, completionTokens int64
	hist                                             Histogram
	refused                                          [len(RefusedStatuses)]int64
	cachedTokens                                     int64
	feedback                                         FeedbackCounts
	latency                                          latencies
	admission                                        admissionUsage
}

// hourLatencies reads the latency sketches of a deployment's rows in [from, to) (one key's when keyID
// is not ""), merged per hour; an hour with a row that has calls and no sketch (written before the
// sketches) is left out, to be estimated from its histogram.
func (s *Service) hourLatencies(ctx context.Context, deploymentID, keyID string, from, to int64) (map[int64]*latencies, error) {
	list, err := s.q.UsageSketchList(ctx, s.db, dbsqlc.UsageSketchListParams{DeploymentID: deploymentID, KeyID: keyID, FromHour: from, ToHour: to})
	if err != nil {
		return nil, err
	}
	out := map[int64]*latencies{}
	unsketched := map[int64]bool{}
	for _, r := range list {
		if r.LatencySketch == nil {
			if r.Requests > 0 {
				unsketched[r.Hour] = true
			}
			continue
		}
		l := out[r.Hour]
		if l == nil {
			l = &latencies{}
			out[r.Hour] = l
		}
		l.add(r.LatencySketch, Histogram{})
	}
	for h := range unsketched {
		delete(out, h)
	}
	return out, nil
}

// Usage returns a deployment's usage per hour or day over a range, every bucket of the range present
// (zero where there were no calls), and each key's totals unless the query is for one key.
func (s *Service) Usage(ctx context.Context, pr Project, deploymentID string, req UsageRequest) (*Usage, error) {
	rng, err := ParseUsageRange(req, s.now())
	if err != nil {
		return nil, err
	}
	d, err := s.getDeployment(ctx, s.db, pr, deploymentID)
	if err != nil {
		return nil, err
	}
	from, to := ms(rng.From), ms(rng.To)
	var rows []usageRow
	out := &Usage{}
	if req.KeyID != "" {
		if _, err := s.q.KeyGet(ctx, s.db, dbsqlc.KeyGetParams{ID: req.KeyID, DeploymentID: d.ID}); err != nil {
			if errors.Is(db.Map(err), db.ErrNotFound) {
				return nil, notFound("key")
			}
			return nil, err
		}
		list, err := s.q.UsageListByKey(ctx, s.db, dbsqlc.UsageListByKeyParams{DeploymentID: d.ID, KeyID: req.KeyID, FromHour: from, ToHour: to})
		if err != nil {
			return nil, err
		}
		for _, r := range list {
			rows = append(rows, usageRow{r.Hour, r.Requests, r.Errors, r.PromptTokens, r.CompletionTokens,
				Histogram{r.Lat25, r.Lat50, r.Lat100, r.Lat250, r.Lat500, r.Lat1000, r.Lat2500, r.Lat5000, r.Lat10000, r.Lat30000, r.Lat60000, r.LatInf},
				[3]int64{r.Refused401, r.Refused404, r.Refused429}, r.CachedTokens, FeedbackCounts{r.FeedbackUp, r.FeedbackDown, r.FeedbackNeutral}, latencies{},
				admissionUsage{r.RefusedBusy, r.RefusedBudget, r.Queued, r.QueueMsSum}})
		}
	} else {
		list, err := s.q.UsageListByDeployment(ctx, s.db, dbsqlc.UsageListByDeploymentParams{DeploymentID: d.ID, FromHour: from, ToHour: to})
		if err != nil {
			return nil, err
		}
		for _, r := range list {
			rows = append(rows, usageRow{r.Hour, r.Requests, r.Errors, r.PromptTokens, r.CompletionTokens,
				Histogram{r.Lat25, r.Lat50, r.Lat100, r.Lat250, r.Lat500, r.Lat1000, r.Lat2500, r.Lat5000, r.Lat10000, r.Lat30000, r.Lat60000, r.LatInf},
				[3]int64{r.Refused401, r.Refused404, r.Refused429}, r.CachedTokens, FeedbackCounts{r.FeedbackUp, r.FeedbackDown, r.FeedbackNeutral}, latencies{},
				admissionUsage{r.RefusedBusy, r.RefusedBudget, r.Queued, r.QueueMsSum}})
		}
		totals, err := s.q.UsageTotalsByKey(ctx, s.db, dbsqlc.UsageTotalsByKeyParams{DeploymentID: d.ID, FromHour: from, ToHour: to})
		if err != nil {
			return nil, err
		}
		out.Keys = make([]KeyUsage, 0, len(totals))
		for _, t := range totals {
			out.Keys = append(out.Keys, KeyUsage{KeyID: t.KeyID, Requests: t.Requests, Errors: t.Errors,
				PromptTokens: t.PromptTokens, CompletionTokens: t.CompletionTokens})
		}
	}
	sketched, err := s.hourLatencies(ctx, d.ID, req.KeyID, from, to)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if l := sketched[rows[i].hour]; l != nil {
			rows[i].latency = *l
		} else {
			rows[i].latency.addHistogram(rows[i].hist)
		}
	}
	out.Buckets = bucketize(rng, rows)
	if req.KeyID == "" {
		if err := s.addCopies(ctx, d.ID, rng, out.Buckets); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addCopies sets the buckets' Copies: the calls svc made itself from the deployment's calls in their
// hours (runs.CopiesKey's rows), which the callers' counts leave out.
func (s *Service) addCopies(ctx context.Context, deploymentID string, rng UsageRange, buckets []UsageBucket) error {
	list, err := s.q.UsageCopiesByDeployment(ctx, s.db, dbsqlc.UsageCopiesByDeploymentParams{DeploymentID: deploymentID, FromHour: ms(rng.From), ToHour: ms(rng.To)})
	if err != nil {
		return err
	}
	step, from := rng.Step.Milliseconds(), ms(rng.From)
	for _, r := range list {
		i := int((r.Hour - from) / step)
		if i < 0 || i >= len(buckets) {
			continue
		}
		c := buckets[i].Copies
		if c == nil {
			c = &CopyUsage{}
			buckets[i].Copies = c
		}
		c.Requests += r.Requests
		c.Errors += r.Errors
		c.PromptTokens += r.PromptTokens
		c.CompletionTokens += r.CompletionTokens
	}
	return nil
}

// bucketize sums hourly rows (in hour order) into the range's buckets, leaving none out.
func bucketize(rng UsageRange, rows []usageRow) []UsageBucket {
	n := rng.Buckets()
	sums := make([]usageRow, n)
	step := rng.Step.Milliseconds()
	from := ms(rng.From)
	for _, r := range rows {
		i := int((r.hour - from) / step)
		if i < 0 || i >= n {
			continue
		}
		b := &sums[i]
		b.requests += r.requests
		b.errors += r.errors
		b.promptTokens += r.promptTokens
		b.completionTokens += r.completionTokens
		b.cachedTokens += r.cachedTokens
		b.feedback.Up += r.feedback.Up
		b.feedback.Down += r.feedback.Down
		b.feedback.Neutral += r.feedback.Neutral
		b.latency.merge(&r.latency)
		b.admission.add(r.admission)
		for j := range b.refused {
			b.refused[j] += r.refused[j]
		}
	}
	out := make([]UsageBucket, n)
	for i, b := range sums {
		out[i] = UsageBucket{
			Start: rng.From.Add(time.Duration(i) * rng.Step), Requests: b.requests, Errors: b.errors,
			PromptTokens: b.promptTokens, CompletionTokens: b.completionTokens, CachedTokens: b.cachedTokens,
			Feedback: b.feedback, Latency: b.latency.percentiles(), Queued: b.admission.Queued, QueueMs: b.admission.QueueMs,
		}
		for code, n := range map[string]int64{runs.CodeModelBusy: b.admission.ModelBusy, runs.CodeBudgetExhausted: b.admission.BudgetExhausted} {
			if n > 0 {
				if out[i].RefusedCodes == nil {
					out[i].RefusedCodes = map[string]int64{}
				}
				out[i].RefusedCodes[code] = n
			}
		}
		for j, n := range b.refused {
			if n > 0 {
				if out[i].Refused == nil {
					out[i].Refused = map[int]int64{}
				}
				out[i].Refused[RefusedStatuses[j]] = n
			}
		}
	}
	return out
}
