package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

func limit(n int) core.LimitChange { return core.LimitChange{Set: true, Value: &n} }

// limitKey gives the only key of a deployment its own limits.
func (e *env) limitKey(deploymentID string, c core.RateLimitsChange) {
	e.t.Helper()
	ctx := context.Background()
	keys, err := e.srv.Service.ListKeys(ctx, e.pr, deploymentID)
	if err != nil || len(keys) == 0 {
		e.t.Fatalf("keys: %v", err)
	}
	if _, err := e.srv.Service.UpdateKey(ctx, e.pr, deploymentID, keys[0].ID, core.KeyChange{Limits: c}); err != nil {
		e.t.Fatal(err)
	}
}

func TestKeyRequestsPerMinute(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("rpm-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.limitKey(d.ID, core.RateLimitsChange{RequestsPerMinute: limit(3)})
	for i := 0; i < 3; i++ {
		r := e.do("POST", "rpm-ep", "/v1/chat/completions", key, chatBody("hi"))
		if r.status != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
		if got, want := r.header.Get("X-Ratelimit-Remaining-Requests"), []string{"2", "1", "0"}[i]; got != want {
			t.Errorf("request %d: remaining %q, want %s", i+1, got, want)
		}
		if r.header.Get("X-Ratelimit-Limit-Requests") != "3" || r.header.Get("X-Ratelimit-Reset-Requests") == "" {
			t.Errorf("request %d: headers %v", i+1, r.header)
		}
	}
	// The 4th is refused before the upstream is called, in each surface's shape.
	r := e.do("POST", "rpm-ep", "/v1/chat/completions", key, chatBody("hi"))
	m := wantError(t, r, 429, "rate_limit_exceeded")
	if m["type"] != "rate_limit_error" || r.header.Get("Retry-After") == "" || r.header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("429: %s %v", r.body, r.header)
	}
	r = e.do("POST", "rpm-ep", "/v1/messages", key, map[string]any{"max_tokens": 8, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	var env struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if r.status != 429 || json.Unmarshal(r.body, &env) != nil || env.Type != "error" || env.Error.Type != "rate_limit_error" {
		t.Errorf("messages 429: %d %s", r.status, r.body)
	}
	// Listing models is not an inference call and takes nothing.
	if r := e.do("GET", "rpm-ep", "/v1/models", key, nil); r.status != 200 {
		t.Errorf("models under a spent limit: %d", r.status)
	}
	// Refusals are counted by scope.
	resp, err := http.Get(e.srv.BaseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `svc_edge_rate_limited_total{deployment="rpm-ep",scope="key"} 2`) {
		t.Errorf("rate-limited metric missing")
	}
}

func TestDeploymentLimitAppliesToEveryKey(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("dep-rpm", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	other, err := e.srv.Service.IssueKey(context.Background(), e.pr, d.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Service.UpdateDeployment(context.Background(), e.pr, d.ID,
		core.DeploymentChange{Limits: core.RateLimitsChange{RequestsPerMinute: limit(2)}}); err != nil {
		t.Fatal(err)
	}
	e.do("POST", "dep-rpm", "/v1/chat/completions", key, chatBody("a"))
	e.do("POST", "dep-rpm", "/v1/chat/completions", other.Plaintext, chatBody("b"))
	if r := e.do("POST", "dep-rpm", "/v1/chat/completions", other.Plaintext, chatBody("c")); r.status != 429 {
		t.Fatalf("third call across two keys: %d, want 429 from the deployment's limit", r.status)
	}
}

func TestTokensPerMinuteBindAfterUsage(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("tpm-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.limitKey(d.ID, core.RateLimitsChange{TokensPerMinute: limit(30)})
	long := strings.Repeat("word ", 40) // 40 completion tokens from the echo simulator, more than the limit
	r := e.do("POST", "tpm-ep", "/v1/chat/completions", key, chatBody(long))
	if r.status != 200 || r.header.Get("X-Ratelimit-Limit-Tokens") != "30" {
		t.Fatalf("first call: %d %v", r.status, r.header)
	}
	// Its usage was charged when it ended: the bucket is spent.
	r = e.do("POST", "tpm-ep", "/v1/chat/completions", key, chatBody("hi"))
	wantError(t, r, 429, "rate_limit_exceeded")
	if r.header.Get("X-Ratelimit-Remaining-Tokens") != "0" || r.header.Get("Retry-After") == "" {
		t.Errorf("tokens 429 headers: %v", r.header)
	}
}
