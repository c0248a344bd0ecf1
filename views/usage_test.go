package views

import (
	"context"
	"strings"
	"testing"
)

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	if got := LimitText("60", ""); got != "60 req/min" {
		t.Errorf("LimitText = %q", got)
	}
	if got := LimitText("", ""); got != "Unlimited" {
		t.Errorf("LimitText = %q", got)
	}
}

// One call next to a thousand still shows as a bar; stacked bars sit on the one below.
func TestBarGeometry(t *testing.T) {
	if b := barAt(3, 0, 1, 1000); b.H != "1.00" || b.Y != "99.00" || b.X != "31" {
		t.Errorf("a tiny bar: %+v", b)
	}
	if b := barAt(0, 50, 50, 100); b.H != "50.00" || b.Y != "0.00" {
		t.Errorf("a stacked bar: %+v", b)
	}
}

// Hours recorded before the usage sketches are estimated from the histogram (one 20 ms call read p50
// 13 ms): the card says "about" and the error there, and only there; percentiles from the sketches are
// shown as they are.
func TestUsageLatencySaysAboutOnlyForEstimates(t *testing.T) {
	render := func(errPct int) string {
		u := Usage{EndpointID: "dep_1", Range: UsageRange24h, Per: "hour", Requests: 1,
			Buckets: []UsageBucket{{Label: "15:00", Title: "15:00-16:00", Requests: 1, P50: 13, P95: 24, ErrPct: errPct}}}
		var b strings.Builder
		if err := UsageBody(u).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	estimate := render(100)
	for _, want := range []string{"max p50 about 13 ms · p95 about 24 ms", "about 13 / 24 ms (±100%)", "Estimated from a latency histogram"} {
		if !strings.Contains(estimate, want) {
			t.Errorf("an estimate's usage body lacks %q:\n%s", want, estimate)
		}
	}
	sketched := render(1)
	if strings.Contains(sketched, "about") || !strings.Contains(sketched, ">13 / 24 ms<") || !strings.Contains(sketched, "within 1%") {
		t.Errorf("percentiles from the sketches are worded as estimates:\n%s", sketched)
	}
}

// The card says how many calls were refused and with which statuses, in status order; nothing when
// none was.
func TestUsageSaysWhatWasRefused(t *testing.T) {
	u := Usage{EndpointID: "dep_1", Range: UsageRange24h, Per: "hour", Requests: 9, Errors: 6,
		Refused: map[int]int64{429: 1, 401: 3, 404: 2},
		Buckets: []UsageBucket{{Label: "15:00", Title: "15:00-16:00", Requests: 9, Errors: 6, P50: 13, P95: 24}}}
	var b strings.Builder
	if err := UsageBody(u).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if want := "6 calls refused, never run: 3 with a wrong or missing key (401), 2 to a disabled endpoint or a model it does not serve (404), 1 over a rate limit (429)"; !strings.Contains(b.String(), want) {
		t.Errorf("usage body lacks %q:\n%s", want, b.String())
	}
	u.Refused = nil
	b.Reset()
	if err := UsageBody(u).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "never run") {
		t.Errorf("a range without refused calls says Refused:\n%s", b.String())
	}
}

// The card tells admission's 429s from a rate limit's, each by its code, and says how the calls waited
// for their model's turn; a range where only admission refused says no rate limit, and one where no
// call waited says nothing of waits.
func TestUsageSaysModelBusyBudgetAndWaits(t *testing.T) {
	u := Usage{EndpointID: "dep_1", Range: UsageRange24h, Per: "hour", Requests: 12, Errors: 5,
		Buckets: []UsageBucket{{Label: "15:00", Title: "15:00-16:00", Requests: 12, Errors: 5, P50: 13, P95: 24}}}
	u.AddRefused(map[int]int64{429: 3, 401: 1}, map[string]int64{"model_busy": 1, "budget_exhausted": 1})
	u.AddRefused(map[int]int64{429: 1}, map[string]int64{"model_busy": 1})
	u.AddQueue(3, 1400)
	u.AddQueue(1, 200)
	var b strings.Builder
	if err := UsageBody(u).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"5 calls refused, never run: 1 with a wrong or missing key (401), 1 over a rate limit (429), 2 when the model stayed busy past their wait (429 model_busy), 1 past a token budget (429 budget_exhausted)",
		"4 calls waited for their model&#39;s turn: 1,600 ms in all, 400 ms on average",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage body lacks %q:\n%s", want, b.String())
		}
	}
	u = Usage{Refused: map[int]int64{429: 2}, RefusedCodes: map[string]int64{"budget_exhausted": 2}}
	if got, want := u.RefusedText(), "2 calls refused, never run: 2 past a token budget (429 budget_exhausted)"; got != want {
		t.Errorf("RefusedText() = %q, want %q", got, want)
	}
	if got := u.QueueText(); got != "" {
		t.Errorf("QueueText() without waits = %q", got)
	}
}

// The usage card says how much of the prompt the upstreams' caches held, and nothing when no upstream
// reported a cached token.
func TestUsageSaysTheCacheHitRate(t *testing.T) {
	u := Usage{EndpointID: "dep_1", Range: UsageRange24h, Per: "hour", Requests: 4, PromptTokens: 12000, CachedTokens: 10100,
		Buckets: []UsageBucket{{Label: "15:00", Title: "15:00-16:00", Requests: 4, P50: 13, P95: 24}}}
	var b strings.Builder
	if err := UsageBody(u).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if want := "Prompt cache: 84% of 12,000 tokens in"; !strings.Contains(b.String(), want) {
		t.Errorf("usage body lacks %q:\n%s", want, b.String())
	}
	u.CachedTokens = 0
	b.Reset()
	UsageBody(u).Render(context.Background(), &b)
	if strings.Contains(b.String(), "Prompt cache") {
		t.Errorf("a range without cached tokens shows a cache rate:\n%s", b.String())
	}
}

func TestUsageSaysHowRunsWereScored(t *testing.T) {
	u := Usage{EndpointID: "dep_1", Range: UsageRange24h, Per: "hour", Requests: 9, FeedbackUp: 3, FeedbackDown: 1, FeedbackNeutral: 1,
		Buckets: []UsageBucket{{Label: "15:00", Title: "15:00-16:00", Requests: 9, P50: 13, P95: 24}}}
	var b strings.Builder
	if err := UsageBody(u).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if want := "Feedback on 5 runs: 3 good, 1 bad, 1 neutral"; !strings.Contains(b.String(), want) {
		t.Errorf("usage body lacks %q:\n%s", want, b.String())
	}
	if got := (Usage{FeedbackDown: 1}).FeedbackText(); got != "Feedback on 1 run: 0 good, 1 bad" {
		t.Errorf("one run: %q", got)
	}
	if got := (Usage{Requests: 4}).FeedbackText(); got != "" {
		t.Errorf("no feedback: %q", got)
	}
}
