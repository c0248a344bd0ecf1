package core

import (
	"context"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

func TestParseUsageRange(t *testing.T) {
	now := time.Date(2026, 3, 10, 14, 37, 0, 0, time.UTC)
	cases := []struct {
		name    string
		req     UsageRequest
		from    string // RFC 3339 of the first bucket, or "" for an error
		buckets int
	}{
		{"defaults: the last 24 hours by hour", UsageRequest{}, "2026-03-09T14:00:00Z", 25},
		{"day granularity floors to the UTC day", UsageRequest{Granularity: "day"}, "2026-03-09T00:00:00Z", 2},
		{"explicit range", UsageRequest{From: "2026-03-01T00:00:00Z", To: "2026-03-08T00:00:00Z", Granularity: "day"}, "2026-03-01T00:00:00Z", 7},
		{"offsets are read as UTC", UsageRequest{From: "2026-03-10T10:30:00+02:00", To: "2026-03-10T12:00:00Z"}, "2026-03-10T08:00:00Z", 4},
		{"a month of hours", UsageRequest{From: "2026-02-01T00:00:00Z", To: "2026-03-04T00:00:00Z"}, "2026-02-01T00:00:00Z", 744},
		{"400 days", UsageRequest{From: "2025-02-03T00:00:00Z", To: "2026-03-10T00:00:00Z", Granularity: "day"}, "2025-02-03T00:00:00Z", 400},
		{"too many hours", UsageRequest{From: "2026-02-01T00:00:00Z", To: "2026-03-04T00:00:01Z"}, "", 0},
		{"too many days", UsageRequest{From: "2025-02-02T00:00:00Z", To: "2026-03-10T00:00:00Z", Granularity: "day"}, "", 0},
		{"from after to", UsageRequest{From: "2026-03-10T15:00:00Z", To: "2026-03-10T14:00:00Z"}, "", 0},
		{"from equal to to", UsageRequest{From: "2026-03-10T14:00:00Z", To: "2026-03-10T14:00:00Z"}, "", 0},
		{"not RFC 3339", UsageRequest{From: "yesterday"}, "", 0},
		{"a date alone is not a time", UsageRequest{To: "2026-03-10"}, "", 0},
		{"unknown granularity", UsageRequest{Granularity: "week"}, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseUsageRange(tc.req, now)
			if tc.from == "" {
				if edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
					t.Fatalf("want invalid_request, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.From.Format(time.RFC3339); got != tc.from || r.Buckets() != tc.buckets {
				t.Fatalf("from %s with %d buckets, want %s with %d", got, r.Buckets(), tc.from, tc.buckets)
			}
		})
	}
}

func TestHistogramQuantile(t *testing.T) {
	hist := func(latencies ...int64) Histogram {
		var h Histogram
		for _, ms := range latencies {
			h[db.LatencyBucket(ms)]++
		}
		return h
	}
	repeat := func(ms int64, n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = ms
		}
		return out
	}
	if _, ok := hist().Quantile(0.5); ok {
		t.Fatal("an empty histogram has no quantile")
	}
	// Bucket edges: a latency equal to a bound belongs to that bound's bucket.
	for ms, want := range map[int64]int{0: 0, 25: 0, 26: 1, 60000: 10, 60001: 11} {
		if got := db.LatencyBucket(ms); got != want {
			t.Errorf("db.LatencyBucket(%d) = %d, want %d", ms, got, want)
		}
	}
	cases := []struct {
		name     string
		h        Histogram
		q        float64
		min, max int64 // the estimate must fall in the bucket that holds the true quantile
	}{
		{"all fast", hist(repeat(10, 100)...), 0.5, 0, 25},
		{"p50 of a mix", hist(append(repeat(40, 60), repeat(900, 40)...)...), 0.5, 25, 50},
		{"p95 of a mix", hist(append(repeat(40, 60), repeat(900, 40)...)...), 0.95, 500, 1000},
		{"p95 with a slow tail", hist(append(repeat(80, 94), repeat(7000, 6)...)...), 0.95, 5000, 10000},
		{"beyond the last bound", hist(repeat(90_000, 10)...), 0.95, 60000, 60000},
	}
	for _, tc := range cases {
		got, ok := tc.h.Quantile(tc.q)
		if !ok || got < tc.min || got > tc.max {
			t.Errorf("%s: q%.2f = %d, want within [%d, %d]", tc.name, tc.q, got, tc.min, tc.max)
		}
	}
	// Interpolation: 4 requests evenly in (25, 50] put the median at the middle of the bucket.
	if got, _ := hist(30, 35, 40, 45).Quantile(0.5); got != 38 {
		t.Errorf("median of 4 in (25,50] = %d, want 38 (25 + 25 × 2/4, rounded)", got)
	}
}

// The usage route's arithmetic over stored hourly rows: hours and days summed, gaps filled with zero
// buckets, keys kept apart, percentiles from the summed histograms.
func TestUsageAggregation(t *testing.T) {
	s, now := newTestService(t) // 2026-01-01 12:00 UTC
	ctx := context.Background()
	// A signed-in user's project: the sweep below moves the clock far enough to retire anonymous ones.
	p, pr := userProject(t, s, "usage@example.com")
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "usage", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := s.IssueKey(ctx, pr, d.ID, "one")
	k2, _ := s.IssueKey(ctx, pr, d.ID, "two")
	add := func(key string, hour time.Time, requests, errs int64, latencyBucket int) {
		t.Helper()
		u := dbsqlc.UsageAddParams{DeploymentID: d.ID, KeyID: key, Hour: hour.UnixMilli(), Requests: requests, Errors: errs,
			PromptTokens: 10 * requests, CompletionTokens: 20 * requests, LatencySumMs: 100 * requests}
		*[...]*int64{&u.Lat25, &u.Lat50, &u.Lat100, &u.Lat250, &u.Lat500, &u.Lat1000, &u.Lat2500, &u.Lat5000,
			&u.Lat10000, &u.Lat30000, &u.Lat60000, &u.LatInf}[latencyBucket] += requests
		if err := s.q.UsageAdd(ctx, s.db, u); err != nil {
			t.Fatal(err)
		}
	}
	h := func(day, hour int) time.Time { return time.Date(2026, 1, day, hour, 0, 0, 0, time.UTC) }
	add(k1.Key.ID, h(1, 9), 3, 1, 2)  // 3 calls at 50-100 ms
	add(k2.Key.ID, h(1, 9), 1, 0, 6)  // 1 call at 1-2.5 s
	add(k1.Key.ID, h(1, 11), 2, 0, 2) // hour 10 has no calls
	add(k1.Key.ID, h(1, 9), 1, 0, 2)  // a later batch adds to the same hour
	dec30 := time.Date(2025, 12, 30, 5, 0, 0, 0, time.UTC)
	add(k1.Key.ID, dec30, 7, 0, 0) // an earlier day

	u, err := s.Usage(ctx, pr, d.ID, UsageRequest{From: "2026-01-01T08:00:00Z", To: "2026-01-01T12:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Buckets) != 4 {
		t.Fatalf("%d hourly buckets, want 4 (08, 09, 10, 11)", len(u.Buckets))
	}
	b8, b9, b10, b11 := u.Buckets[0], u.Buckets[1], u.Buckets[2], u.Buckets[3]
	if !b8.Start.Equal(h(1, 8)) || !b10.Start.Equal(h(1, 10)) {
		t.Fatalf("bucket starts %v, %v", b8.Start, b10.Start)
	}
	if b8.Requests != 0 || b8.Latency.P50Ms != nil || b10.Requests != 0 || b10.Latency.P95Ms != nil {
		t.Fatalf("empty hours must be zero buckets with null latency: %+v %+v", b8, b10)
	}
	if b9.Requests != 5 || b9.Errors != 1 || b9.PromptTokens != 50 || b9.CompletionTokens != 100 {
		t.Fatalf("09:00 = %+v, want both keys' 5 requests, 1 error, 50/100 tokens", b9)
	}
	// 4 of 5 calls at 50-100 ms, one at 1-2.5 s: p50 in the first, p95 in the slow one.
	if p := *b9.Latency.P50Ms; p < 50 || p > 100 {
		t.Errorf("09:00 p50 = %d ms", p)
	}
	if p := *b9.Latency.P95Ms; p < 1000 || p > 2500 {
		t.Errorf("09:00 p95 = %d ms", p)
	}
	if b11.Requests != 2 {
		t.Errorf("11:00 = %+v", b11)
	}
	if len(u.Keys) != 2 || u.Keys[0].Requests+u.Keys[1].Requests != 7 {
		t.Errorf("key totals %+v, want both keys with 7 requests in all", u.Keys)
	}

	// One key only.
	u, err = s.Usage(ctx, pr, d.ID, UsageRequest{From: "2026-01-01T09:00:00Z", To: "2026-01-01T10:00:00Z", KeyID: k2.Key.ID})
	if err != nil || len(u.Buckets) != 1 || u.Buckets[0].Requests != 1 || u.Keys != nil {
		t.Fatalf("key two: %+v %v", u, err)
	}

	// By day: Dec 30, Dec 31 (empty) and Jan 1 up to now.
	u, err = s.Usage(ctx, pr, d.ID, UsageRequest{From: "2025-12-30T00:00:00Z", Granularity: "day"})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Buckets) != 3 || u.Buckets[0].Requests != 7 || u.Buckets[1].Requests != 0 || u.Buckets[2].Requests != 7 {
		t.Fatalf("daily buckets %+v", u.Buckets)
	}
	if p := *u.Buckets[0].Latency.P95Ms; p > 25 {
		t.Errorf("Dec 30 p95 = %d, want at most 25 ms", p)
	}

	// Errors: an unknown key, a deployment of another project, bad input.
	if _, err := s.Usage(ctx, pr, d.ID, UsageRequest{KeyID: "key_nope"}); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Errorf("unknown key: %v", err)
	}
	_, other := anonymousProject(t, s)
	if _, err := s.Usage(ctx, other, d.ID, UsageRequest{}); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Errorf("another project's deployment: %v", err)
	}
	if _, err := s.Usage(ctx, pr, d.ID, UsageRequest{Granularity: "minute"}); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Errorf("bad granularity: %v", err)
	}

	// The sweeper keeps 400 days of usage, whatever the run retention.
	*now = dec30.AddDate(0, 0, 400).Add(30 * time.Minute)
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	s.db.QueryRow(`SELECT count(*) FROM usage_hourly`).Scan(&n)
	if n != 3 {
		t.Fatalf("%d usage rows after the sweep, want the 3 younger than 400 days", n)
	}
	*now = h(1, 12).AddDate(0, 0, 400)
	s.Sweep(ctx)
	s.db.QueryRow(`SELECT count(*) FROM usage_hourly`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d usage rows older than 400 days survived the sweep", n)
	}
}

// The errors refused with 401, 404 or 429 are summed by status into each bucket's Refused, absent
// from a bucket without any.
func TestUsageRefusedByStatus(t *testing.T) {
	s, _ := newTestService(t) // 2026-01-01 12:00 UTC
	ctx := context.Background()
	p, pr := userProject(t, s, "refused@example.com")
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "refused", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := s.IssueKey(ctx, pr, d.ID, "one")
	nine := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli()
	for _, u := range []dbsqlc.UsageAddParams{
		{DeploymentID: d.ID, KeyID: "", Hour: nine, Requests: 3, Errors: 3, Lat25: 3, Refused401: 3},
		{DeploymentID: d.ID, KeyID: k.Key.ID, Hour: nine, Requests: 4, Errors: 3, Lat25: 4, Refused404: 2},
		{DeploymentID: d.ID, KeyID: k.Key.ID, Hour: nine + 3_600_000, Requests: 1, Lat25: 1},
	} {
		if err := s.q.UsageAdd(ctx, s.db, u); err != nil {
			t.Fatal(err)
		}
	}
	u, err := s.Usage(ctx, pr, d.ID, UsageRequest{From: "2026-01-01T09:00:00Z", To: "2026-01-01T11:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Buckets[0].Refused; len(got) != 2 || got[401] != 3 || got[404] != 2 {
		t.Fatalf("09:00 refused %v, want 401: 3, 404: 2", got)
	}
	if got := u.Buckets[1].Refused; got != nil {
		t.Fatalf("10:00 refused %v, want none", got)
	}
	u, err = s.Usage(ctx, pr, d.ID, UsageRequest{From: "2026-01-01T09:00:00Z", To: "2026-01-01T10:00:00Z", KeyID: k.Key.ID})
	if err != nil || len(u.Buckets[0].Refused) != 1 || u.Buckets[0].Refused[404] != 2 {
		t.Fatalf("the key's refused calls: %+v %v", u, err)
	}
}
