package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

// The whole path of usage: calls through the edge (path form), the recorder's batch, the usage route
// read through the SDK. Retention none stores no run but counts the calls.
func TestUsageThroughTheEdge(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	tok := must(cloudapi.New(srv.BaseURL, "").MintAnonymous(ctx))
	c := cloudapi.New(srv.BaseURL, tok.Token)
	scope := must(c.AnonymousScope(ctx))
	c = c.WithProject(scope.OrgSlug, scope.ProjectSlug)

	target := cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"}
	kept := must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "usage-kept", Target: cloudapi.Target{Kind: cloudapi.TargetMultiModel}}))
	k1 := must(c.IssueDeploymentKey(ctx, kept.ID, "one"))
	k2 := must(c.IssueDeploymentKey(ctx, kept.ID, "two"))
	dropped := must(c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "usage-none", Target: target,
		AuthMode: cloudapi.AuthNone, RunRetentionMode: cloudapi.RetentionNone}))

	call := func(slug, key, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/"+slug+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	hello := `{"messages":[{"role":"user","content":"hello there"}]}`
	for i := 0; i < 3; i++ {
		call("usage-kept", k1.Plaintext, hello)
	}
	call("usage-kept", k2.Plaintext, hello)
	// A call the edge answers with an error (an unknown model) counts as a request and an error.
	if code := call("usage-kept", k2.Plaintext, `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`); code != 404 {
		t.Fatalf("unknown model: HTTP %d", code)
	}
	call("usage-kept", "sk-ep-wrong", hello) // refused (401): a request and an error in usage, never a run
	call("usage-none", "", hello)
	call("usage-none", "", hello)
	srv.Flush()

	u := must(c.GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageOptions{}))
	if len(u.Buckets) < 24 {
		t.Fatalf("%d buckets for the default 24 hours", len(u.Buckets))
	}
	var total, errs, prompt, completion int64
	var withCalls []cloudapi.UsageBucket
	for _, b := range u.Buckets {
		total, errs, prompt, completion = total+b.Requests, errs+b.Errors, prompt+b.PromptTokens, completion+b.CompletionTokens
		if b.Requests > 0 {
			withCalls = append(withCalls, b)
		} else if b.LatencyP50Ms != nil {
			t.Errorf("an empty bucket has a latency: %+v", b)
		}
	}
	runs := must(c.ListRuns(ctx, kept.ID, cloudapi.ListRunsOptions{}))
	var runPrompt, runCompletion int64
	for _, r := range runs.Runs {
		runPrompt, runCompletion = runPrompt+r.PromptTokens, runCompletion+r.CompletionTokens
	}
	if total != 6 || errs != 2 || len(runs.Runs) != 5 || prompt != runPrompt || completion != runCompletion || completion == 0 {
		t.Fatalf("usage %d requests, %d errors, %d/%d tokens; runs %d with %d/%d tokens",
			total, errs, prompt, completion, len(runs.Runs), runPrompt, runCompletion)
	}
	// The refused calls by status: the unknown model's 404 and the wrong key's 401.
	refused := map[int]int64{}
	for _, b := range u.Buckets {
		for status, n := range b.Refused {
			refused[status] += n
		}
	}
	if len(refused) != 2 || refused[401] != 1 || refused[404] != 1 {
		t.Fatalf("refused by status %v, want 401: 1, 404: 1", refused)
	}
	if b := withCalls[len(withCalls)-1]; b.LatencyP50Ms == nil || b.LatencyP95Ms == nil || *b.LatencyP95Ms < *b.LatencyP50Ms {
		t.Fatalf("latency percentiles of the last busy hour: %+v", b)
	}
	byKey := map[string]int64{}
	for _, k := range u.Keys {
		byKey[k.KeyID] = k.Requests
	}
	if byKey[k1.Key.ID] != 3 || byKey[k2.Key.ID] != 2 {
		t.Fatalf("key totals %+v", u.Keys)
	}

	// One key, by day.
	u = must(c.GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageWindow(time.Now(), 7, cloudapi.GranularityDay)))
	if len(u.Buckets) != 7 || u.Buckets[6].Requests != 6 || !u.Buckets[6].Start.Equal(time.Now().UTC().Truncate(24*time.Hour)) {
		t.Fatalf("7 days: %+v", u.Buckets)
	}
	opts := cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour)
	opts.KeyID = k2.Key.ID
	u = must(c.GetDeploymentUsage(ctx, kept.ID, opts))
	if len(u.Buckets) != 2 || u.Buckets[0].Requests+u.Buckets[1].Requests != 2 {
		t.Fatalf("key two: %+v", u.Buckets)
	}

	// Retention none: no run stored, every call counted.
	if runs := must(c.ListRuns(ctx, dropped.ID, cloudapi.ListRunsOptions{})); len(runs.Runs) != 0 {
		t.Fatalf("retention none stored %d runs", len(runs.Runs))
	}
	u = must(c.GetDeploymentUsage(ctx, dropped.ID, cloudapi.UsageWindow(time.Now(), 1, cloudapi.GranularityDay)))
	if len(u.Buckets) != 1 || u.Buckets[0].Requests != 2 || u.Buckets[0].CompletionTokens == 0 {
		t.Fatalf("retention none usage: %+v", u.Buckets)
	}

	// Bad input is a 400 naming the parameter; other projects get 404.
	_, err = c.GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageOptions{Granularity: "week"})
	wantErr(t, err, 400, "invalid_request")
	_, err = c.GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageOptions{From: time.Now(), To: time.Now().Add(-time.Hour)})
	wantErr(t, err, 400, "invalid_request")
	_, err = c.GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageOptions{From: time.Now().AddDate(0, -2, 0)})
	wantErr(t, err, 400, "invalid_request")
	if !strings.Contains(err.Error(), "granularity=day") {
		t.Errorf("a too-long hourly range should suggest days: %v", err)
	}
	_, err = c.GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageOptions{KeyID: "key_nope"})
	wantErr(t, err, 404, "not_found")
	stranger := cloudapi.New(srv.BaseURL, must(cloudapi.New(srv.BaseURL, "").MintAnonymous(ctx)).Token)
	sc := must(stranger.AnonymousScope(ctx))
	_, err = stranger.WithProject(sc.OrgSlug, sc.ProjectSlug).GetDeploymentUsage(ctx, kept.ID, cloudapi.UsageOptions{})
	wantErr(t, err, 404, "not_found")
}

// A usage range past time.Duration's ~292 years (year 1 to 9999, say) is refused in the API's envelope,
// 400 invalid_request, by hour, by day and by arm: its bucket count once wrapped to a negative number
// that passed the range check and panicked (a 500 with a stack trace in the log).
func TestUsageRangesPastDurationAreRefused(t *testing.T) {
	e := newEnv(t)
	c := e.user()
	kept := must(c.CreateDeployment(context.Background(), base("ages")))
	for _, q := range []string{
		"from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z&granularity=day",
		"from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z",
		"from=1700-01-01T00:00:00Z&to=2000-01-01T00:00:00Z&granularity=day",
		"from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z&granularity=day&groupBy=arm",
	} {
		if st, body := e.raw(c, "GET", "/deployments/"+kept.ID+"/usage?"+q, ""); st != 400 || !strings.Contains(body, `"code":"invalid_request"`) {
			t.Errorf("usage?%s: %d %s, want 400 invalid_request", q, st, body)
		}
	}
}
