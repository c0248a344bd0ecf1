package edge_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// The prompt tokens a replica's prefix cache held reach the caller on every surface: as the upstream
// said them on chat (prompt_tokens_details.cached_tokens), as cache_read_input_tokens on Messages
// (input_tokens then counting the rest), as input_tokens_details.cached_tokens on Responses.
func TestCachedTokensReachEverySurface(t *testing.T) {
	f := httptest.NewServer(mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Nanosecond}))
	t.Cleanup(f.Close)
	e := newEnvWith(t, envOptions{models: `  - name: vllm-fleet
    runtime: openai
    replicas: [` + f.URL + `/v1]
    upstreamModel: fake-model
    supportsMessages: true
`})
	d, _ := e.deploy("cached", base("vllm-fleet"), cloudapi.AuthNone, cloudapi.RetentionDays, 7)
	system := strings.Repeat("You are a careful agent with many tools. ", 80)
	twice := func(path string, body map[string]any) []byte {
		t.Helper()
		var last []byte
		for range 2 { // the second call finds the first's prompt in the replica's cache
			r := e.do("POST", "cached", path, "", body)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", path, r.status, r.body)
			}
			last = r.body
		}
		return last
	}
	var chat struct {
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	json.Unmarshal(twice("/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "system", "content": system},
		map[string]any{"role": "user", "content": "chat"}}}), &chat)
	if c := chat.Usage.PromptTokensDetails.CachedTokens; c == 0 || c > chat.Usage.PromptTokens {
		t.Errorf("chat: %+v", chat.Usage)
	}
	var msg struct {
		Usage struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(twice("/v1/messages", map[string]any{"max_tokens": 16, "system": system,
		"messages": []any{map[string]any{"role": "user", "content": "messages"}}}), &msg)
	if msg.Usage.CacheReadInputTokens == 0 || msg.Usage.InputTokens == 0 {
		t.Errorf("messages: %+v", msg.Usage)
	}
	var resp struct {
		Usage struct {
			InputTokens        int `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	json.Unmarshal(twice("/v1/responses", map[string]any{"instructions": system, "input": "responses"}), &resp)
	if c := resp.Usage.InputTokensDetails.CachedTokens; c == 0 || c > resp.Usage.InputTokens {
		t.Errorf("responses: %+v", resp.Usage)
	}

	// Each run keeps what its answer said, and the usage sums it: the endpoint's cache hit rate.
	e.srv.Flush()
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	page, err := api.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != 6 {
		t.Fatalf("runs: %+v %v", page, err)
	}
	var cached, prompt int64
	for i, r := range page.Runs {
		if i%2 == 0 && r.CachedTokens == 0 { // newest first: each surface's second call
			t.Errorf("run %s (%s) kept no cached tokens", r.ID, r.Model)
		}
		cached, prompt = cached+r.CachedTokens, prompt+r.PromptTokens
	}
	usage, err := api.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour))
	if err != nil {
		t.Fatal(err)
	}
	var uc, up int64
	for _, b := range usage.Buckets {
		uc, up = uc+b.CachedTokens, up+b.PromptTokens
	}
	if uc != cached || up != prompt || uc == 0 {
		t.Errorf("usage says %d of %d prompt tokens cached; the runs say %d of %d", uc, up, cached, prompt)
	}
}
