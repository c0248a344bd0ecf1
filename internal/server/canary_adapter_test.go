package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// A canary whose target is an adapter has it loaded on the model's replicas when the canary starts,
// before its first call (docs/LORA.md, "Fleets"; docs/API.md, "Canary"): fake vLLM
// replicas on loopback list it through their LoRA API with no chat call sent.
func TestACanarysAdapterIsLoadedOnTheReplicasBeforeItsFirstCall(t *testing.T) {
	var urls []string
	var servers []*mockupstream.Engine
	for range 2 {
		s := mockupstream.NewEngine(mockupstream.EngineConfig{MaxLoras: 2})
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		servers, urls = append(servers, s), append(urls, srv.URL+"/v1")
	}
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(fmt.Sprintf("models:\n  - name: fleet\n    runtime: openai\n    upstreamModel: fake-model\n    public: true\n"+
		"    replicas: [%s, %s]\n    lora: vllm\n    maxLoras: 2\n", urls[0], urls[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	artifacts := t.TempDir()
	c := newCluster(t, func(cfg *Config) { cfg.ModelsFile, cfg.ArtifactsDir = models, artifacts })
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "canary-lora", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "fleet"}})
	if err != nil {
		t.Fatal(err)
	}
	adapter := filepath.Join(artifacts, "adapter")
	if err := os.WriteFile(adapter, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	completed := "completed"
	job, err := c.sdk.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "fleet", Status: completed, FinalAdapter: &adapter})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: job.ID},
		Percent: 30, Mode: cloudapi.CanarySplit}); err != nil {
		t.Fatal(err)
	}
	t.Logf("SetCanary answered in %v", time.Since(before).Round(time.Millisecond))
	for i, u := range urls {
		ids := listModels(t, u)
		if !slices.ContainsFunc(ids, func(id string) bool { return id != "fake-model" }) {
			t.Errorf("replica %d lists %v when the canary has started: its adapter is not loaded", i, ids)
		}
		if n := servers[i].PromptTokens.Load(); n != 0 {
			t.Errorf("replica %d served %d prompt tokens: a call was made", i, n)
		}
	}
}

// listModels returns the model ids a replica lists (its base model and the adapters loaded).
func listModels(t *testing.T, base string) []string {
	t.Helper()
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Data []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}
