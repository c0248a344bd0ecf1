package studio

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// runs makes n recorded runs, newest first; the newest was made with a key.
func runs(depID string, n int) []cloudapi.RunSummary {
	key := "key_0190f3a2b4c5Zx9Qr7TuVw"
	start := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	out := make([]cloudapi.RunSummary, 0, n)
	for i := range n {
		r := cloudapi.RunSummary{
			ID: "run-" + itoa(i), DeploymentID: depID, Model: "demo-echo", Status: "ok",
			LatencyMs: 42, PromptTokens: 9, CompletionTokens: 3, CreatedAt: start.Add(-time.Duration(i) * time.Minute),
		}
		if i == 0 {
			r.KeyID = &key
		}
		if i == 1 {
			r.Status, r.StatusCode, r.ErrorCode = "error", 429, "rate_limit_exceeded"
		}
		if i == 2 {
			r.Status = "error" // recorded before runs kept their status code
		}
		out = append(out, r)
	}
	return out
}

// The JSON side is the SDK's page as it came, 20 runs at a time; cloud errors keep their status.
func TestRunListJSON(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("runs"))
	h.cloud.addRuns(d.ID, runs(d.ID, 25)...)
	path := "/api/deployments/" + d.ID + "/runs"

	var page cloudapi.RunPage
	r := h.api(http.MethodGet, path, nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &page)
	if len(page.Runs) != 20 || page.NextCursor == "" {
		t.Fatalf("first page: %d runs, nextCursor %q", len(page.Runs), page.NextCursor)
	}
	if got := page.Runs[0]; got.ID != "run-0" || got.KeyID == nil || got.LatencyMs != 42 || got.CompletionTokens != 3 {
		t.Errorf("first run %+v", got)
	}
	r = h.api(http.MethodGet, path+"?cursor="+page.NextCursor, nil)
	wantStatus(t, r, http.StatusOK)
	page = cloudapi.RunPage{}
	r.decode(t, &page)
	if len(page.Runs) != 5 || page.NextCursor != "" || page.Runs[0].ID != "run-20" {
		t.Fatalf("last page: %+v", page)
	}

	// No runs: an empty list, not null.
	empty := h.cloud.add(deployment("quiet"))
	r = h.api(http.MethodGet, "/api/deployments/"+empty.ID+"/runs", nil)
	wantStatus(t, r, http.StatusOK)
	if strings.TrimSpace(r.body) != `{"runs":[],"nextCursor":""}` {
		t.Errorf("empty page %s", r.body)
	}

	// Without the token: refused before any upstream call.
	before := h.cloud.callCount()
	r = h.do(http.MethodGet, path, nil)
	wantStatus(t, r, http.StatusForbidden)
	if e := r.envelope(t); e.Code != "csrf" || h.cloud.callCount() != before {
		t.Errorf("no token: code %q, %d upstream calls", e.Code, h.cloud.callCount()-before)
	}

	// Upstream errors keep their status, code and message.
	r = h.api(http.MethodGet, path+"?cursor=bogus", nil)
	wantStatus(t, r, http.StatusBadRequest)
	if e := r.envelope(t); e.Code != "invalid_request" || !strings.Contains(e.Message, "cursor is not valid") {
		t.Errorf("bad cursor envelope %+v", e)
	}
	r = h.api(http.MethodGet, "/api/deployments/no-such/runs", nil)
	wantStatus(t, r, http.StatusNotFound)
	if e := r.envelope(t); e.Code != "not_found" || e.Message != "No endpoint with this id." {
		t.Errorf("unknown endpoint envelope %+v", e)
	}
}

// Without a state file the runs route answers like the detail: not found, no upstream call.
func TestRunListWithoutStateMakesNoUpstreamCall(t *testing.T) {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindAnonymous)
	r := h.api(http.MethodGet, "/api/deployments/dep-1/runs", nil)
	wantStatus(t, r, http.StatusNotFound)
	if e := r.envelope(t); e.Code != "not_found" {
		t.Errorf("code %q", e.Code)
	}
	if n := h.cloud.callCount(); n != 0 || h.stateExists() {
		t.Fatalf("%d upstream calls, state written: %v", n, h.stateExists())
	}
}

func TestRunListFragments(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("runs"))
	h.cloud.addRuns(d.ID, runs(d.ID, 25)...)
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "key_0190f3a2b4c5Zx9Qr7TuVw", Label: "ci-pipeline", Prefix: "sk-ep-abcdef"})
	path := "/api/deployments/" + d.ID + "/runs"

	// The first page: a table of 20 rows with "Load more" as its last row.
	r := h.api(http.MethodGet, path, nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	if n := strings.Count(r.body, `data-testid="run-row"`); n != 20 {
		t.Errorf("%d rows, want 20", n)
	}
	for _, want := range []string{
		"<table", "Mar 4 05:06:07", `datetime="2025-03-04T05:06:07Z"`, `class="badge badge-ok" data-testid="run-status">ok<`,
		`class="badge badge-warn" data-testid="run-status" title="rate_limit_exceeded">error 429<`,
		`class="badge badge-warn" data-testid="run-status" title="">error<`, "42 ms", "9 → 3", `data-testid="run-key">ci-pipeline</span>`, "—",
		`hx-get="` + path + `/run-0"`, `data-testid="run-open"`,
		`hx-get="` + path + `?cursor=20"`, `data-testid="runs-more"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("first page lacks %q", want)
		}
	}

	// The next page: only rows, appended in place of the "Load more" row; none after the last.
	r = h.api(http.MethodGet, path+"?cursor=20", nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	if n := strings.Count(r.body, `data-testid="run-row"`); n != 5 || strings.Contains(r.body, "<table") || strings.Contains(r.body, "runs-more") {
		t.Errorf("appended page (%d rows): %s", n, r.body)
	}

	// The empty state names the retention; "Don't store" says that nothing is recorded.
	quiet := h.cloud.add(deployment("quiet"))
	r = h.api(http.MethodGet, "/api/deployments/"+quiet.ID+"/runs", nil, asHTMX)
	if !strings.Contains(r.body, "No runs yet. Calls to the endpoint appear here (retention: 7 days).") {
		t.Errorf("empty state: %s", r.body)
	}
	h.cloud.mu.Lock()
	quiet.RunRetentionMode, quiet.RunRetentionDays = cloudapi.RetentionNone, 0
	h.cloud.mu.Unlock()
	r = h.api(http.MethodGet, "/api/deployments/"+quiet.ID+"/runs", nil, asHTMX)
	if !strings.Contains(r.body, "Nothing is recorded") || strings.Contains(r.body, "No runs yet") {
		t.Errorf("retention none: %s", r.body)
	}

	// The detail page's Runs section carries the card, which loads itself once.
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID+"?section=runs", nil, asHTMX)
	for _, want := range []string{`data-testid="runs"`, `hx-get="` + path + `" hx-trigger="load"`, `data-testid="runs-refresh"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
}

// A run opens with its bodies and its key's label: JSON for programs, the dialog's body for the page.
func TestRunDetail(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("runs"))
	rs := runs(d.ID, 3)
	rs[0].Replica = "10.0.0.11:8000"     // a model with replicas: the run names the one that answered
	rs[0].RetriedFrom = "10.0.0.12:8000" // after the one that failed before answering
	h.cloud.addRuns(d.ID, rs...)
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "key_0190f3a2b4c5Zx9Qr7TuVw", Label: "ci-pipeline", Prefix: "sk-ep-abcdef"})
	path := "/api/deployments/" + d.ID + "/runs/run-0"

	var got runDetail
	r := h.api(http.MethodGet, path, nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &got)
	if got.ID != "run-0" || got.KeyLabel != "ci-pipeline" || !strings.Contains(string(got.Request), "hi from run-0") {
		t.Fatalf("run %+v", got)
	}

	r = h.api(http.MethodGet, path, nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	for _, want := range []string{`data-testid="run-detail"`, "ci-pipeline", "sk-ep-abcdef…", "42 ms", "9 → 3",
		"&#34;content&#34;: &#34;hi from run-0&#34;", "&#34;content&#34;: &#34;echo: hi&#34;", `data-testid="run-status">ok<`,
		`data-testid="run-replica"><code class="wrap-anywhere">10.0.0.11:8000<`,
		`data-testid="run-retried-from">after <code class="wrap-anywhere">10.0.0.12:8000</code> failed before answering<`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("run fragment lacks %q: %s", want, r.body)
		}
	}
	// A run made without a key says so; a failed one says why: its status, its error's code and
	// message, and its request as sent.
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID+"/runs/run-1", nil, asHTMX)
	if strings.Contains(r.body, "run-replica") || strings.Contains(r.body, "run-retried-from") {
		t.Errorf("a run no replica answered shows one: %s", r.body)
	}
	for _, want := range []string{"No key (authentication none)", `data-testid="run-status" title="rate_limit_exceeded">error 429<`,
		`data-testid="run-error-code">rate_limit_exceeded<`, `data-testid="run-reason">The key&#39;s rate limit is reached; retry after 7 seconds.<`,
		"hi from run-1"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("failed run lacks %q: %s", want, r.body)
		}
	}
	// The CSRF token is required, as on every /api/deployments route.
	wantStatus(t, h.do(http.MethodGet, path, nil), http.StatusForbidden)
	// An unknown run keeps the upstream status.
	wantStatus(t, h.api(http.MethodGet, "/api/deployments/"+d.ID+"/runs/nope", nil), http.StatusNotFound)
}
