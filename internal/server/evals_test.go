package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/mockupstream"
)

// evalModels is the catalog of the eval tests: an echo simulator, the same model as another name (an
// unchanged candidate), and a worse one whose tool calls and structured output break on 40% of
// conversations (faultShare).
const evalModels = `models:
  - name: sim-base
    runtime: simulator
    public: true
    supportsMessages: true
    simulator: {mode: echo}
  - name: sim-faulty
    runtime: simulator
    public: true
    supportsMessages: true
    simulator: {mode: echo, faultShare: 0.4}
`

func evalCluster(t *testing.T, tune ...func(*Config)) *cluster {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(evalModels), 0o600); err != nil {
		t.Fatal(err)
	}
	return newCluster(t, func(cfg *Config) {
		cfg.ModelsFile = path
		cfg.EvalLease = 2 * time.Second
		for _, f := range tune {
			f(cfg)
		}
	})
}

// evalTraffic sends n calls to an endpoint of base URL baseURL (path form), a mix of every surface the
// replay reads: chat (plain, streamed, a tool call, an agent's tool-result turn, structured output),
// Anthropic Messages (plain, a tool call) and Responses (plain, a tool call). It returns how many of
// the calls asked for a tool call. strict fails the test on an answer other than 200 (a faulty model's
// broken tool call is a 502 on the Messages API, which cannot carry it).
func evalTraffic(t *testing.T, baseURL, slug string, n int, strict bool) (toolCalls int) {
	t.Helper()
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	anthropicTools := `[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	responsesTools := `[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	schema := `{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer"}},"required":["answer","n"]}}}`
	for i := range n {
		var route, body string
		switch i % 8 {
		case 0:
			route, body = "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"hello number %d"}]}`, i)
		case 1:
			route, body = "/v1/chat/completions", fmt.Sprintf(`{"stream":true,"temperature":0.2,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"stream %d please"}]}`, i)
		case 2:
			route, body = "/v1/chat/completions", fmt.Sprintf(`{"tools":%s,"messages":[{"role":"user","content":"call get_weather for city %d"}]}`, tools, i)
			toolCalls++
		case 3:
			route, body = "/v1/chat/completions", fmt.Sprintf(`{"tools":%s,"messages":[{"role":"user","content":"call get_weather"},{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"x\"}"}}]},{"role":"tool","tool_call_id":"c%d","content":"sunny at %d"}]}`, tools, i, i, i)
		case 4:
			route, body = "/v1/chat/completions", fmt.Sprintf(`{"response_format":%s,"messages":[{"role":"user","content":"json please %d"}]}`, schema, i)
		case 5:
			route, body = "/v1/messages", fmt.Sprintf(`{"model":"sim-base","max_tokens":200,"messages":[{"role":"user","content":"anthropic %d"}]}`, i)
		case 6:
			route, body = "/v1/messages", fmt.Sprintf(`{"model":"sim-base","max_tokens":200,"tools":%s,"messages":[{"role":"user","content":"use get_weather for %d"}]}`, anthropicTools, i)
			toolCalls++
		case 7:
			if i%16 == 7 {
				route, body = "/v1/responses", fmt.Sprintf(`{"model":"sim-base","input":"responses %d"}`, i)
			} else {
				route, body = "/v1/responses", fmt.Sprintf(`{"model":"sim-base","tools":%s,"input":"get_weather for %d"}`, responsesTools, i)
				toolCalls++
			}
		}
		resp, err := http.Post(baseURL+"/e/"+slug+route, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strict && resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", route, body, resp.StatusCode, b)
		}
	}
	return toolCalls
}

// storedRuns waits until a deployment stores n runs of its callers (the recorder writes in batches);
// evals' runs are not counted.
func storedRuns(t *testing.T, sdk *cloudapi.Client, deploymentID string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := 0
		cursor := ""
		for {
			page, err := sdk.ListRuns(context.Background(), deploymentID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmPrimary, Limit: 200, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			got += len(page.Runs)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the deployment stores %d runs, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// evalDone waits for an eval to end, within limit.
func evalDone(t *testing.T, sdk *cloudapi.Client, deploymentID, evalID string, limit time.Duration) *cloudapi.Eval {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		e, err := sdk.GetEval(context.Background(), deploymentID, evalID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Finished() {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the eval is %s with progress %+v", limit, e.State, e.Progress)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allResults reads every result of an eval, page by page.
func allResults(t *testing.T, sdk *cloudapi.Client, deploymentID, evalID string) []cloudapi.EvalResult {
	t.Helper()
	var out []cloudapi.EvalResult
	cursor := ""
	for {
		page, err := sdk.EvalResults(context.Background(), deploymentID, evalID, cloudapi.ListOptions{Limit: 100, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Results...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// Fidelity: stored runs of every surface, replayed against the unchanged target, answer the same (the
// simulator is deterministic at temperature 0), tool-call turns with the same calls; each eval run is
// recorded with arm eval and its source run, and none counts as a caller's usage.
func TestEvalReplaysStoredRunsFaithfully(t *testing.T) {
	c := evalCluster(t)
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "fidelity", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	toolCalls := evalTraffic(t, c.cp.BaseURL, d.Slug, n, true)
	storedRuns(t, c.sdk, d.ID, n)

	e, err := c.sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: d.Target, Runs: cloudapi.EvalRuns{Limit: 1000}, Concurrency: 32})
	if err != nil {
		t.Fatal(err)
	}
	// Running already when the worker, woken by the create, claimed it before the create's answer was
	// read back (seen on a loaded machine).
	if (e.State != cloudapi.EvalQueued && e.State != cloudapi.EvalRunning) || e.Progress.Total != n || e.Baseline != d.Target || e.Concurrency != 32 {
		t.Fatalf("created: %+v", e)
	}
	start := time.Now()
	e = evalDone(t, c.sdk, d.ID, e.ID, 60*time.Second)
	took := time.Since(start)
	if e.State != cloudapi.EvalDone || e.Summary == nil || e.Progress.Done != n || e.Progress.Failed != 0 {
		t.Fatalf("ended: state %s, progress %+v, error %q", e.State, e.Progress, e.Error)
	}
	s := e.Summary
	if s.Pairs != n || float64(s.Identical) < 0.99*float64(n) || !s.Passed || len(s.Regressed) != 0 {
		t.Fatalf("summary: %+v", s)
	}
	results := allResults(t, c.sdk, d.ID, e.ID)
	if len(results) != n {
		t.Fatalf("%d results, want %d", len(results), n)
	}
	sameCalls, withCalls := 0, 0
	for _, r := range results {
		for _, ch := range r.Checks {
			if ch.Name == "tool_calls" {
				withCalls++
				if r.Identical && ch.Candidate {
					sameCalls++
				}
			}
		}
	}
	if withCalls != toolCalls || sameCalls != withCalls {
		t.Fatalf("tool-call turns: %d replayed with the same calls of %d checked, %d sent", sameCalls, withCalls, toolCalls)
	}
	t.Logf("%d runs replayed in %v: %d identical (%.1f%%), %d of %d tool-call turns with the same calls",
		n, took.Round(time.Millisecond), s.Identical, 100*float64(s.Identical)/float64(n), sameCalls, withCalls)

	// The eval runs: one per source run, arm eval, never a key's usage.
	evalRuns, err := c.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmEval, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(evalRuns.Runs) == 0 || evalRuns.Runs[0].EvalID != e.ID || evalRuns.Runs[0].EvalOf == "" || evalRuns.Runs[0].Arm != cloudapi.ArmEval {
		t.Fatalf("eval runs: %+v", evalRuns.Runs[:min(1, len(evalRuns.Runs))])
	}
	// Usage: the replays are the deployment's copies, not its callers' requests, and no arm of a canary.
	for deadline := time.Now().Add(10 * time.Second); ; {
		u, err := c.sdk.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var requests, copies int64
		for _, b := range u.Buckets {
			requests += b.Requests
			if b.Copies != nil {
				copies += b.Copies.Requests
			}
		}
		if copies == n {
			if requests != n {
				t.Fatalf("usage counts %d requests, want the callers' %d (the %d replays apart)", requests, n, copies)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage counts %d copies after 10 s, want %d replays", copies, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	arms, err := c.sdk.GetDeploymentUsageByArm(ctx, d.ID, cloudapi.UsageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(arms.Arms) != 0 {
		t.Fatalf("usage by arm of a deployment that never had a canary: %+v", arms.Arms)
	}
	// Feedback on an eval's run is the deployment's copies' feedback, never its callers'.
	if _, err := c.sdk.SetRunFeedback(ctx, d.ID, evalRuns.Runs[0].ID, cloudapi.SetRunFeedbackRequest{Score: 1}); err != nil {
		t.Fatal(err)
	}
	u, err := c.sdk.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range u.Buckets {
		if b.Feedback.Up != 0 {
			t.Fatalf("an eval run's thumbs-up counts in the callers' feedback: %+v", b.Feedback)
		}
	}
	primary, err := c.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmPrimary, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range primary.Runs {
		if r.EvalID != "" {
			t.Fatalf("the primary's runs list eval run %s", r.ID)
		}
	}
}

// A worse candidate (broken tool calls and JSON on a share of conversations) fails its eval; under a
// promotion gate, promote answers 409 eval_required, and an override promotes, recorded with who and
// why in the canary history.
func TestWorseCandidateIsRefusedByTheGate(t *testing.T) {
	c := evalCluster(t)
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "gated", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"}})
	if err != nil {
		t.Fatal(err)
	}
	worse := cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-faulty"}
	d, err = c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{PromoteGate: cloudapi.GateUpdate{Gate: &cloudapi.PromoteGate{MinWinRate: 0, MaxAgeHours: 24}}})
	if err != nil {
		t.Fatal(err)
	}
	if d.PromoteGate == nil || d.PromoteGate.MaxAgeHours != 24 {
		t.Fatalf("gate: %+v", d.PromoteGate)
	}
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: worse, Percent: 10, Mode: cloudapi.CanaryShadow}); err != nil {
		t.Fatal(err)
	}
	// Without any eval of the candidate: refused.
	var ce *cloudapi.Error
	if _, err := c.sdk.PromoteCanary(ctx, d.ID); !errors.As(err, &ce) || ce.Status != 409 || ce.Code != "eval_required" {
		t.Fatalf("promote without an eval: %v", err)
	}
	if _, err := c.sdk.EndCanary(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	const n = 80
	evalTraffic(t, c.cp.BaseURL, d.Slug, n, true)
	storedRuns(t, c.sdk, d.ID, n)
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: worse, Percent: 10, Mode: cloudapi.CanarySplit}); err != nil {
		t.Fatal(err)
	}

	e, err := c.sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: worse, Runs: cloudapi.EvalRuns{Arm: cloudapi.ArmPrimary, Limit: n}})
	if err != nil {
		t.Fatal(err)
	}
	e = evalDone(t, c.sdk, d.ID, e.ID, 60*time.Second)
	if e.State != cloudapi.EvalDone || e.Summary == nil {
		t.Fatalf("ended: %+v", e)
	}
	s := e.Summary
	if s.Passed || len(s.Regressed) == 0 || s.Checks.Candidate.Failed == 0 {
		t.Fatalf("the worse candidate's summary: %+v", s)
	}
	t.Logf("worse candidate: %d pairs, %d identical, checks baseline %+v candidate %+v, regressed %v", s.Pairs, s.Identical, s.Checks.Baseline, s.Checks.Candidate, s.Regressed)

	_, err = c.sdk.PromoteCanary(ctx, d.ID)
	if !errors.As(err, &ce) || ce.Status != 409 || ce.Code != "eval_required" || !strings.Contains(ce.Message, "fails checks") {
		t.Fatalf("promote after a failed eval: %v", err)
	}
	// A target PATCH to the same candidate is refused alike.
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Target: &worse}); !errors.As(err, &ce) || ce.Code != "eval_required" {
		t.Fatalf("target PATCH after a failed eval: %v", err)
	}
	promoted, err := c.sdk.PromoteCanaryOverride(ctx, d.ID, "hotfix for a customer; eval reviewed by hand")
	if err != nil {
		t.Fatal(err)
	}
	if promoted.Target != worse || promoted.Canary != nil {
		t.Fatalf("after the override: target %+v canary %+v", promoted.Target, promoted.Canary)
	}
	list, err := c.sdk.ListCanaries(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 || list[0].Outcome != cloudapi.CanaryPromoted || list[0].OverrideReason != "hotfix for a customer; eval reviewed by hand" ||
		list[0].EndedBy == "" || list[0].EndedAt == nil {
		t.Fatalf("canary history: %+v", list)
	}

	// Back to the sound model: its eval against the faulty target's stored runs regresses nothing, so
	// the gate lets the promote through without an override, and the history records none.
	evalTraffic(t, c.cp.BaseURL, d.Slug, n, false)
	storedRuns(t, c.sdk, d.ID, 2*n)
	sound := cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"}
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: sound, Percent: 10, Mode: cloudapi.CanarySplit}); err != nil {
		t.Fatal(err)
	}
	since := promoted.UpdatedAt
	good, err := c.sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: sound, Runs: cloudapi.EvalRuns{Since: &since, Limit: n}})
	if err != nil {
		t.Fatal(err)
	}
	good = evalDone(t, c.sdk, d.ID, good.ID, 60*time.Second)
	if good.Summary == nil || !good.Summary.Passed || good.Baseline != worse {
		t.Fatalf("the sound candidate's eval: %+v, summary %+v", good, good.Summary)
	}
	back, err := c.sdk.PromoteCanary(ctx, d.ID)
	if err != nil {
		t.Fatalf("promote after a passing eval: %v", err)
	}
	list, err = c.sdk.ListCanaries(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if back.Target != sound || list[0].Outcome != cloudapi.CanaryPromoted || list[0].OverrideReason != "" {
		t.Fatalf("after the gated promote: target %+v, history %+v", back.Target, list[0])
	}
}

// A judge whose truth is known: a fake upstream served as a model of svc that prefers the answer saying
// GOOD. The baseline (an echo model) says GOOD on half the runs, which callers marked good; the
// candidate (lorem text) never does. The judge, asked twice with the answers swapped, finds the
// baseline better on those runs and ties on the others; its agreement with the recorded feedback
// counts the thumbs-up runs as agreeing and the thumbs-down ones (where it tied) as not. Its calls are
// recorded as eval runs.
func TestEvalJudgeAgreesWithKnownFeedback(t *testing.T) {
	var judged atomic.Int64
	good := mockupstream.Judge("GOOD")
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		judged.Add(1)
		good.ServeHTTP(w, r)
	}))
	defer judge.Close()
	models := evalModels + `  - name: sim-lorem
    runtime: simulator
    public: true
    simulator: {mode: lorem}
  - name: judge
    runtime: openai
    upstreamUrl: ` + judge.URL + `/v1
    upstreamModel: judge
`
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, func(cfg *Config) { cfg.ModelsFile = path })
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "judged", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		text := fmt.Sprintf("plain answer %d", i)
		if i%2 == 0 {
			text = fmt.Sprintf("GOOD answer %d", i)
		}
		resp, err := http.Post(c.cp.BaseURL+"/e/judged/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, text)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	storedRuns(t, c.sdk, d.ID, n)
	page, err := c.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	downs := 0
	for _, r := range page.Runs {
		full, err := c.sdk.GetRun(ctx, d.ID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		score := 0
		switch {
		case strings.Contains(string(full.Request), "GOOD"):
			score = 1
		case downs < 5:
			score, downs = -1, downs+1
		default:
			continue
		}
		if _, err := c.sdk.SetRunFeedback(ctx, d.ID, r.ID, cloudapi.SetRunFeedbackRequest{Score: score}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := c.sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-lorem"},
		Judge: &cloudapi.EvalJudge{Model: "judge", Rubric: "prefer the answer that says GOOD"}})
	if err != nil {
		t.Fatal(err)
	}
	e = evalDone(t, c.sdk, d.ID, e.ID, 60*time.Second)
	s := e.Summary
	if e.State != cloudapi.EvalDone || s == nil || s.Judged == nil || s.Agreement == nil {
		t.Fatalf("ended: %+v %+v", e, s)
	}
	if s.Judged.Wins != 0 || s.Judged.Losses != n/2 || s.Judged.Ties != n/2 || s.Agreement.Runs != n/2+5 || s.Agreement.Agree != n/2 || s.Passed {
		t.Fatalf("judged %+v, agreement %+v, passed %v", *s.Judged, *s.Agreement, s.Passed)
	}
	if got := judged.Load(); got != 2*n {
		t.Fatalf("the judge was asked %d times, want %d (twice per pair)", got, 2*n)
	}
	t.Logf("judge: %d wins, %d ties, %d losses (win rate %.2f, 95%% %.2f-%.2f); agrees with feedback on %d of %d runs",
		s.Judged.Wins, s.Judged.Ties, s.Judged.Losses, s.Judged.WinRate, s.Judged.WinRateLow, s.Judged.WinRateHigh, s.Agreement.Agree, s.Agreement.Runs)
	results := allResults(t, c.sdk, d.ID, e.ID)
	for _, r := range results {
		want := cloudapi.VerdictTie
		if strings.Contains(r.BaselineAnswer, "GOOD") {
			want = cloudapi.VerdictBaseline
		}
		if r.Verdict == nil || *r.Verdict != want {
			t.Fatalf("run %s (baseline %q): verdict %v, want %s", r.RunID, r.BaselineAnswer, r.Verdict, want)
		}
	}
}

// An eval's judged pairs export as preference lines: with a judge that prefers the answer saying GOOD,
// and a candidate that says GOOD where the recorded answer does not (and the other way round, and
// neither), every line is the source run's conversation with the GOOD answer preferred, and ties are
// counted, not written.
func TestEvalExportsJudgedPreferences(t *testing.T) {
	reply := func(w http.ResponseWriter, text string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`, text)
	}
	lastUser := func(r *http.Request) string {
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		return body.Messages[len(body.Messages)-1].Content
	}
	judge := httptest.NewServer(mockupstream.Judge("GOOD"))
	defer judge.Close()
	// The candidate says GOOD to the questions the baseline (an echo) answers plainly, "weak" to those
	// it answers GOOD, and something plain to the rest (a tie).
	candidate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := lastUser(r)
		switch {
		case strings.HasPrefix(q, "plain"):
			reply(w, "GOOD candidate answer to "+q)
		case strings.HasPrefix(q, "GOOD"):
			reply(w, "weak answer")
		default:
			reply(w, "another plain answer")
		}
	}))
	defer candidate.Close()
	models := evalModels + `  - name: cand
    runtime: openai
    upstreamUrl: ` + candidate.URL + `/v1
    upstreamModel: cand
  - name: judge
    runtime: openai
    upstreamUrl: ` + judge.URL + `/v1
    upstreamModel: judge
`
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, func(cfg *Config) { cfg.ModelsFile = path })
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "prefs", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	questions := map[string]bool{}
	for i := range n {
		q := [...]string{"GOOD question %d", "plain question %d", "tie question %d"}[i%3]
		q = fmt.Sprintf(q, i)
		questions[q] = true
		resp, err := http.Post(c.cp.BaseURL+"/e/prefs/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q}]}`, q)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	storedRuns(t, c.sdk, d.ID, n)

	plain, err := c.sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "cand"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "cand"},
		Judge: &cloudapi.EvalJudge{Model: "judge", Rubric: "prefer the answer that says GOOD"}})
	if err != nil {
		t.Fatal(err)
	}
	e = evalDone(t, c.sdk, d.ID, e.ID, 60*time.Second)
	if s := e.Summary; e.State != cloudapi.EvalDone || s == nil || s.Judged == nil || s.Judged.Wins != n/3 || s.Judged.Losses != n/3 || s.Judged.Ties != n/3 {
		t.Fatalf("ended %s: %+v", e.State, e.Summary)
	}
	x, err := c.sdk.ExportEval(ctx, d.ID, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(x)
	x.Close()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := x.Counts()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if counts.Written != 2*n/3 || len(lines) != 2*n/3 || counts.Skipped["tie"] != n/3 || len(counts.Skipped) != 1 {
		t.Fatalf("counts %+v, %d lines:\n%s", counts, len(lines), body)
	}
	byCandidate := 0
	for _, l := range lines {
		if err := dataset.ValidatePreferenceLine([]byte(l)); err != nil {
			t.Fatalf("not a preference line: %v\n%s", err, l)
		}
		var p struct {
			Input struct {
				Messages []struct{ Role, Content string } `json:"messages"`
			} `json:"input"`
			Preferred    []struct{ Content string } `json:"preferred_output"`
			NonPreferred []struct{ Content string } `json:"non_preferred_output"`
		}
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		m := p.Input.Messages
		if len(m) != 2 || m[0].Content != "be brief" || !questions[m[1].Content] {
			t.Fatalf("input is not the source run's conversation: %s", l)
		}
		if !strings.Contains(p.Preferred[0].Content, "GOOD") || strings.Contains(p.NonPreferred[0].Content, "GOOD") {
			t.Fatalf("the judge preferred the GOOD answer, the line does not: %s", l)
		}
		if strings.HasPrefix(p.Preferred[0].Content, "GOOD candidate") {
			byCandidate++
			if p.NonPreferred[0].Content != m[1].Content {
				t.Fatalf("the other answer is not the recorded one (the echo): %s", l)
			}
		}
	}
	if byCandidate != n/3 {
		t.Fatalf("%d lines prefer the candidate, want %d", byCandidate, n/3)
	}
	t.Logf("export: %d pairs written (%d the candidate's), %d ties left out", counts.Written, byCandidate, counts.Skipped["tie"])

	// An eval without a judge has nothing ranked; an unknown eval is 404; the export takes no parameters.
	var ce *cloudapi.Error
	if _, err := c.sdk.ExportEval(ctx, d.ID, plain.ID); !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "no judge") {
		t.Fatalf("export of an eval without a judge: %v", err)
	}
	if _, err := c.sdk.ExportEval(ctx, d.ID, "eval_nope"); !errors.As(err, &ce) || ce.Status != 404 {
		t.Fatalf("export of an unknown eval: %v", err)
	}
}
