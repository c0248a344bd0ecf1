package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// started is a server with an anonymous client scoped to its project.
func started(t *testing.T, cfg Config) (*Server, *cloudapi.Client) {
	t.Helper()
	ctx := context.Background()
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	srv, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := cloudapi.New(srv.BaseURL, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func fetch(t *testing.T, method, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	srv, _ := started(t, Config{})
	resp, body := fetch(t, "GET", srv.BaseURL+"/healthz", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("healthz %d %s", resp.StatusCode, body)
	}
	if resp, body = fetch(t, "GET", srv.BaseURL+"/readyz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("readyz %d %s", resp.StatusCode, body)
	}
	srv.db.Close() // the database stops answering; the recorder has its spool (in the data folder)
	resp, body = fetch(t, "GET", srv.BaseURL+"/readyz", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"database":"not answering"`) || !strings.Contains(body, `"status":"degraded"`) {
		t.Fatalf("readyz with the database closed: %d %s", resp.StatusCode, body)
	}
	if resp, _ = fetch(t, "GET", srv.BaseURL+"/healthz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("healthz must stay 200 while the process runs: %d", resp.StatusCode)
	}
}

// metricLine returns the value of the sample whose line starts with prefix ("" when absent).
func metricLine(text, prefix string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
	return ""
}

func TestMetricsAfterEdgeTraffic(t *testing.T) {
	srv, c := started(t, Config{})
	ctx := context.Background()
	if _, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "metered", AuthMode: "none",
		Target: cloudapi.Target{Kind: "base_model", Model: "sim-llama-3.1-8b-instruct"}}); err != nil {
		t.Fatal(err)
	}
	chat := srv.BaseURL + "/e/metered/v1/chat/completions"
	for i := 0; i < 3; i++ {
		if resp, body := fetch(t, "POST", chat, `{"messages":[{"role":"user","content":"one two three"}]}`, nil); resp.StatusCode != 200 {
			t.Fatalf("chat %d %s", resp.StatusCode, body)
		}
	}
	fetch(t, "POST", chat, `{"stream":true,"messages":[{"role":"user","content":"streamed words"}]}`, nil)
	fetch(t, "POST", chat, `{"messages":"bad"}`, nil)
	fetch(t, "POST", srv.BaseURL+"/e/no-such-slug-123/v1/chat/completions", `{}`, nil)
	fetch(t, "POST", srv.BaseURL+"/e/metered/v1/chat/completions", `{}`, map[string]string{"Authorization": "Bearer sk-ep-secret-should-not-leak"})

	resp, text := fetch(t, "GET", srv.BaseURL+"/metrics", "", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for prefix, want := range map[string]string{
		`svc_edge_requests_total{code="200",deployment="metered",route="/v1/chat/completions"}`:      "4",
		`svc_edge_requests_total{code="400",deployment="metered",route="/v1/chat/completions"}`:      "2",
		`svc_edge_requests_total{code="404",deployment="",route="/v1/chat/completions"}`:             "1",
		`svc_edge_request_duration_seconds_count{deployment="metered",route="/v1/chat/completions"}`: "6",
		`svc_edge_time_to_first_token_seconds_count{deployment="metered"}`:                           "1",
		`svc_api_requests_total{code="201",route="/v1/orgs/:org/projects/:project/deployments"}`:     "1",
	} {
		if got := metricLine(text, prefix+" "); got != want {
			t.Errorf("%s = %q, want %s", prefix, got, want)
		}
	}
	if !strings.Contains(text, "\nsvc_recorder_queue_depth ") || !strings.Contains(text, "\nsvc_recorder_runs_dropped_total ") ||
		!strings.Contains(text, "\nsvc_recorder_runs_failed_total ") {
		t.Errorf("recorder metrics missing")
	}
	// The simulator counts "one two three" as 3 completion tokens, three times, and "streamed words" as 2.
	if got := metricLine(text, `svc_edge_tokens_total{deployment="metered",kind="completion"} `); got != "11" {
		t.Errorf("completion tokens %q, want 11", got)
	}
	if strings.Contains(text, "no-such-slug-123") || strings.Contains(text, "sk-ep-secret") {
		t.Error("metrics carry an unknown slug or a key")
	}
	if !strings.Contains(text, "go_goroutines") {
		t.Error("no Go runtime metrics")
	}
}

func TestMetricsOnTheirOwnListener(t *testing.T) {
	srv, _ := started(t, Config{MetricsAddr: "127.0.0.1:0"})
	if resp, _ := fetch(t, "GET", srv.BaseURL+"/metrics", "", nil); resp.StatusCode != 404 {
		t.Errorf("/metrics on the base URL answered %d with --metrics-addr set", resp.StatusCode)
	}
	resp, text := fetch(t, "GET", "http://"+srv.MetricsAddr.String()+"/metrics", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(text, "svc_recorder_queue_depth") {
		t.Fatalf("metrics listener: %d", resp.StatusCode)
	}
}

func TestAPIRequestIDs(t *testing.T) {
	srv, _ := started(t, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	resp, _ := fetch(t, "GET", srv.BaseURL+"/v1/me", "", map[string]string{"X-Request-Id": "api-trace-1"})
	if resp.Header.Get("X-Request-Id") != "api-trace-1" {
		t.Errorf("API request id %q", resp.Header.Get("X-Request-Id"))
	}
	resp, body := fetch(t, "GET", srv.BaseURL+"/v1/me", "", nil)
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("new API request id %q", id)
	}
	var env map[string]any
	if json.Unmarshal([]byte(body), &env) != nil || env["error"] == nil {
		t.Errorf("unauthorised /v1/me: %s", body)
	}
}

func TestEdgeCORS(t *testing.T) {
	srv, c := started(t, Config{EdgeCORSOrigins: []string{"https://app.example"}})
	if _, err := c.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{Slug: "browser",
		Target: cloudapi.Target{Kind: "base_model", Model: "sim-llama-3.1-8b-instruct"}}); err != nil {
		t.Fatal(err)
	}
	url := srv.BaseURL + "/e/browser/v1/chat/completions"
	preflight := func(origin string) *http.Response {
		resp, _ := fetch(t, "OPTIONS", url, "", map[string]string{"Origin": origin,
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"})
		return resp
	}
	resp := preflight("https://app.example")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight from an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp = preflight("https://evil.example")
	if resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.StatusCode == 204 {
		t.Fatalf("preflight from another origin was allowed: %d %v", resp.StatusCode, resp.Header)
	}
	// The real call from the allowed origin may read the answer and its request id; without a key it is
	// still refused (CORS opens nothing that auth closes).
	resp, _ = fetch(t, "POST", url, `{"messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Origin": "https://app.example"})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Fatalf("call from the allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	// The management API is not opened by the edge's CORS setting.
	resp, _ = fetch(t, "OPTIONS", srv.BaseURL+"/v1/me", "", map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "GET"})
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("the management API answered a CORS preflight")
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A caller's request id goes end to end: answered, stored on the run (the SDK shows it) and in the
// edge's log line, which carries no key.
func TestRequestIDEndToEnd(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, c := started(t, Config{Logger: log})
	ctx := context.Background()
	d, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "traced",
		Target: cloudapi.Target{Kind: "base_model", Model: "sim-llama-3.1-8b-instruct"}})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := c.IssueDeploymentKey(ctx, d.ID, "tracer")
	if err != nil {
		t.Fatal(err)
	}
	resp, body := fetch(t, "POST", srv.BaseURL+"/e/traced/v1/chat/completions", `{"messages":[{"role":"user","content":"hello"}]}`,
		map[string]string{"Authorization": "Bearer " + issued.Plaintext, "X-Request-Id": "trace-e2e-77"})
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "trace-e2e-77" {
		t.Fatalf("edge answer %d %q: %s", resp.StatusCode, resp.Header.Get("X-Request-Id"), body)
	}
	srv.Flush()
	page, err := c.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].RequestID != "trace-e2e-77" {
		t.Fatalf("run's request id: %+v %v", page, err)
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"edge"`) {
			json.Unmarshal([]byte(l), &line)
		}
	}
	if line["request_id"] != "trace-e2e-77" || line["deployment"] != "traced" || line["status"] != float64(200) || line["client"] != "127.0.0.1" {
		t.Fatalf("edge log line %v\nlogs:\n%s", line, logs.String())
	}
	if strings.Contains(logs.String(), issued.Plaintext) || strings.Contains(logs.String(), c.Token) {
		t.Fatal("a key or token reached the log")
	}
}
