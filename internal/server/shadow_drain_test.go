package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/mockupstream"
)

// Shadow copies at shutdown: a stopping process (svc server, svc edge) lets the copies queued and
// under way finish within its grace and records them; what the grace cuts is dropped, counted and
// logged once. The canary's upstream is a real HTTP server on loopback that answers slowly.

// shadowModels: a quick primary and a canary whose upstream is the slow mock at %s.
const shadowModels = `models:
  - name: sim-quick
    runtime: simulator
    public: true
    default: true
    simulator: {mode: lorem, loremTokens: 4, itlMs: 1}
  - name: slow-canary
    runtime: openai
    upstreamUrl: %s/v1
    upstreamModel: mock-model
    public: true
    timeoutMs: 60000
`

// shadowCluster is a control plane serving shadowModels, its log in a buffer, its grace set by grace.
func shadowCluster(t *testing.T, grace *time.Duration) (c *cluster, mock *mockupstream.Server, logs *syncBuffer, models string) {
	t.Helper()
	mock = mockupstream.New(mockupstream.Config{Tokens: 4}, true)
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	models = modelsFile(t, shadowModels, up.URL)
	logs = &syncBuffer{}
	c = newCluster(t, func(cfg *Config) {
		cfg.ModelsFile, cfg.ShutdownGrace = models, *grace
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	return c, mock, logs, models
}

// shadowed makes an endpoint of sim-quick whose shadow canary is slow-canary.
func (c *cluster) shadowed(slug string) *cloudapi.Deployment {
	c.t.Helper()
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-quick"}})
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.sdk.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "slow-canary"},
		Percent: 50, Mode: cloudapi.CanaryShadow}); err != nil {
		c.t.Fatal(err)
	}
	return d
}

// callAt sends a chat completion to the endpoint slug on the listener at addr, for endpoints under domain.
func callAt(t *testing.T, addr, domain, slug, content string) {
	t.Helper()
	client := edgeClient(addr)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, content)
	resp, err := client.Post("http://"+slug+"."+domain+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", slug, resp.StatusCode)
	}
}

// waitUpstream waits until the canary's upstream has been asked n calls in all.
func waitUpstream(t *testing.T, mock *mockupstream.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(mock.Requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the canary's upstream got %d calls, want %d", len(mock.Requests()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// shadowRuns reads a deployment's runs: the primaries' ids, and the shadow copies' pairs (primary id ->
// copies of it), failing on a copy that is not ok or not on the canary.
func (c *cluster) shadowRuns(id string) (primaries map[string]bool, copies map[string]int) {
	c.t.Helper()
	page, err := c.sdk.ListRuns(context.Background(), id, cloudapi.ListRunsOptions{Limit: 200})
	if err != nil {
		c.t.Fatal(err)
	}
	primaries, copies = map[string]bool{}, map[string]int{}
	for _, r := range page.Runs {
		if r.ShadowOf == "" {
			primaries[r.ID] = true
			continue
		}
		if r.Arm != cloudapi.ArmCanary || r.Model != "slow-canary" || r.Status != "ok" {
			c.t.Fatalf("shadow run %s: arm %q model %q status %q", r.ID, r.Arm, r.Model, r.Status)
		}
		copies[r.ShadowOf]++
	}
	return primaries, copies
}

// paired fails unless every primary has exactly one copy, and every copy a primary.
func paired(t *testing.T, primaries map[string]bool, copies map[string]int, want int) {
	t.Helper()
	if len(primaries) != want || len(copies) != want {
		t.Fatalf("%d primary runs and copies of %d, want %d of each", len(primaries), len(copies), want)
	}
	for p, n := range copies {
		if !primaries[p] || n != 1 {
			t.Fatalf("primary run %s (recorded: %v) has %d shadow copies", p, primaries[p], n)
		}
	}
}

func TestServerShutdownDrainsShadowCopies(t *testing.T) {
	grace := 10 * time.Second
	c, mock, logs, _ := shadowCluster(t, &grace)
	d := c.shadowed("drained")
	domain := c.cp.EndpointDomain

	// Within the grace: 8 calls answered at once, their copies taking 2 s each, all under way upstream
	// at shutdown. Every one finishes and is recorded.
	mock.Configure(mockupstream.Config{Tokens: 4, TTFT: 2 * time.Second})
	for i := range 8 {
		callAt(t, c.cp.Addr.String(), domain, "drained", fmt.Sprintf("call %d", i))
	}
	waitUpstream(t, mock, 8)
	start := time.Now()
	c.stopCP()
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("shutdown took %v; the copies take 2 s, side by side", took)
	}
	if n := c.cp.edge.ShadowStats().ShadowDropped(); n != 0 {
		t.Fatalf("%d copies dropped within the grace", n)
	}
	if strings.Contains(logs.String(), "shadow copies dropped") {
		t.Fatalf("a drop logged within the grace:\n%s", logs)
	}
	c.startCP()
	primaries, copies := c.shadowRuns(d.ID)
	paired(t, primaries, copies, 8)

	// Beyond the grace: 6 calls whose copies would take 30 s, all under way at once (waitUpstream gives
	// up after 10 s: copies served a few at a time would fail here); the grace of 1 s cuts them: 6
	// dropped, logged once, none recorded, every primary recorded.
	grace = time.Second
	c.stopCP()
	c.startCP()
	domain = c.cp.EndpointDomain
	mock.Configure(mockupstream.Config{Tokens: 4, TTFT: 30 * time.Second})
	asked := len(mock.Requests())
	for i := range 6 {
		callAt(t, c.cp.Addr.String(), domain, "drained", fmt.Sprintf("late call %d", i))
	}
	waitUpstream(t, mock, asked+6)
	start = time.Now()
	stopped := c.cp
	c.stopCP()
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("shutdown took %v with a grace of 1 s", took)
	}
	if n := stopped.edge.ShadowStats().ShadowDropped(); n != 6 {
		t.Fatalf("%d copies counted dropped, want the 6 cut", n)
	}
	if n := strings.Count(logs.String(), "shadow copies dropped at shutdown"); n != 1 || !strings.Contains(logs.String(), "count=6") {
		t.Fatalf("the drop logged %d times, want once with count=6:\n%s", n, logs)
	}
	for _, r := range mock.Requests()[asked:] {
		select {
		case <-r.Cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("a copy cut at shutdown still holds its upstream call")
		}
	}
	c.startCP()
	primaries, copies = c.shadowRuns(d.ID)
	if len(primaries) != 8+6 || len(copies) != 8 {
		t.Fatalf("%d primary runs and %d shadow runs after the cut, want 14 and 8", len(primaries), len(copies))
	}
}

// An svc edge process drains its copies the same way, and ships their runs to the control plane
// before it stops.
func TestEdgeProcessShutdownDrainsShadowCopies(t *testing.T) {
	grace := 10 * time.Second
	c, mock, _, models := shadowCluster(t, &grace)
	d := c.shadowed("edge-drained")
	e := c.edge("", func(cfg *edgeproc.Config) { cfg.ModelsFile, cfg.ShutdownGrace = models, grace })
	mock.Configure(mockupstream.Config{Tokens: 4, TTFT: time.Second})
	for i := range 6 {
		if r := call(t, e, "edge-drained", "", fmt.Sprintf("call %d", i)); r.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	waitUpstream(t, mock, 4)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	primaries, copies := c.shadowRuns(d.ID)
	paired(t, primaries, copies, 6)
}

// modelsFile writes a models file, the template with the upstream's URL for its %s (or %[1]s), and
// returns its path, for the control plane and the edges alike.
func modelsFile(t *testing.T, template, upstreamURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(template, upstreamURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
