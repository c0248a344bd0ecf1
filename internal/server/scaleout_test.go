package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/edgesync"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/poll"
)

// Scale-out: a control plane (svc server) and svc edge processes on loopback, each a real HTTP server
// on its own listener, talking over the internal API as they do across machines.

const edgeDomain = "edge.test"

// cluster is a control plane with an anonymous SDK client scoped to its project and an edge token.
type cluster struct {
	t     *testing.T
	dir   string
	addr  string // the control plane's listen address, kept across restarts
	cp    *Server
	sdk   *cloudapi.Client
	token string
	log   *slog.Logger
	cpUp  bool
	edges []*edgeproc.Edge
	cpCfg func(*Config) // tunes the control plane's configuration, when set
}

// newCluster starts a control plane, tuned by cpCfg when given (set it here rather than restarting the
// control plane: clients would keep connections to the one that stopped).
func newCluster(t *testing.T, cpCfg ...func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if len(cpCfg) > 0 {
		c.cpCfg = cpCfg[0]
	}
	c.startCP()
	// Edges stop first, while the control plane can still take the runs they ship on the way down.
	t.Cleanup(func() {
		for _, e := range c.edges {
			e.Close()
		}
		if c.cpUp {
			c.cp.Close()
		}
	})
	ctx := context.Background()
	var err error
	if c.sdk, err = cloudapi.New(c.cp.BaseURL, "").AnonymousProject(ctx); err != nil {
		t.Fatal(err)
	}
	_, c.token, err = c.cp.Service.CreateEdgeToken(ctx, "test-edges")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startCP starts the control plane (again, on the same address and data after stopCP).
func (c *cluster) startCP() {
	c.t.Helper()
	cfg := Config{Addr: c.addr, DataDir: c.dir, Logger: c.log, EdgeFeedHeartbeat: 100 * time.Millisecond}
	if c.cpCfg != nil {
		c.cpCfg(&cfg)
	}
	cp, err := Start(context.Background(), cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.cp, c.addr, c.cpUp = cp, cp.Addr.String(), true
	if c.sdk != nil {
		c.sdk.BaseURL = cp.BaseURL
	}
}

func (c *cluster) stopCP() {
	c.t.Helper()
	c.cpUp = false
	if err := c.cp.Close(); err != nil {
		c.t.Fatal(err)
	}
}

// edge starts an edge in front of the control plane at cpURL ("" for the cluster's own), with the
// short intervals of a test.
func (c *cluster) edge(cpURL string, tune func(*edgeproc.Config)) *edgeproc.Edge {
	c.t.Helper()
	if cpURL == "" {
		cpURL = c.cp.BaseURL
	}
	cfg := edgeproc.Config{Addr: "127.0.0.1:0", ControlPlane: cpURL, EdgeToken: c.token, EndpointDomain: edgeDomain, Logger: c.log,
		Sync:    edgesync.Options{FeedIdle: time.Second, RetryDown: 50 * time.Millisecond},
		Shipper: edgesync.ShipperOptions{FlushInterval: 20 * time.Millisecond, TouchInterval: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
	if tune != nil {
		tune(&cfg)
	}
	e, err := edgeproc.Start(context.Background(), cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.edges = append(c.edges, e)
	return e
}

// deploy creates a multi-model endpoint and, in fixed-key mode, a key whose plaintext it returns.
func (c *cluster) deploy(slug, auth string) (*cloudapi.Deployment, string) {
	c.t.Helper()
	ctx := context.Background()
	d, err := c.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, AuthMode: auth, Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		c.t.Fatal(err)
	}
	if auth == "none" {
		return d, ""
	}
	k, err := c.sdk.IssueDeploymentKey(ctx, d.ID, "edge-test")
	if err != nil {
		c.t.Fatal(err)
	}
	return d, k.Plaintext
}

// answer is one edge answer.
type answer struct {
	status int
	body   string
	took   time.Duration
}

// call sends a chat completion to slug on edge e (Host <slug>.edge.test, dialled to e's listener).
func call(t *testing.T, e *edgeproc.Edge, slug, key, content string) answer {
	t.Helper()
	addr := e.Addr.String()
	client := edgeClient(addr)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, content)
	req, err := http.NewRequest("POST", "http://"+slug+"."+edgeDomain+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("edge %s: %v", addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), took: time.Since(start)}
}

// within polls slug on e until it answers want, failing when that takes longer than limit.
func within(t *testing.T, e *edgeproc.Edge, slug, key string, want int, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		a := call(t, e, slug, key, "poll")
		if a.status == want {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: edge %s still answers %d %s after %v (want %d)", what, e.Addr, a.status, a.body, time.Since(start), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// edgeGet fetches an operating route of e.
func edgeGet(t *testing.T, e *edgeproc.Edge, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + e.Addr.String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// edgeMetric returns the value of the metric line that starts with name on e's /metrics (0 if absent).
func edgeMetric(t *testing.T, e *edgeproc.Edge, name string) float64 {
	t.Helper()
	_, text := edgeGet(t, e, "/metrics")
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return v
		}
	}
	return 0
}

func TestEdgesApplyRevokeDisableDeleteWithinASecond(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	a, b := c.edge("", nil), c.edge("", nil)
	edges := []*edgeproc.Edge{a, b}
	d, key := c.deploy("shared", "fixed_api_key")
	for _, e := range edges {
		if got := call(t, e, "shared", key, "hello"); got.status != 200 {
			t.Fatalf("edge %s: %d %s", e.Addr, got.status, got.body)
		}
	}
	// The edges serve from their snapshots: more requests fetch nothing from the control plane.
	before := edgeMetric(t, a, `svc_edge_sync_snapshot_fetches_total{result="ok"}`)
	for i := 0; i < 10; i++ {
		if got := call(t, a, "shared", key, "again"); got.status != 200 {
			t.Fatalf("cached: %d %s", got.status, got.body)
		}
	}
	if after := edgeMetric(t, a, `svc_edge_sync_snapshot_fetches_total{result="ok"}`); after != before {
		t.Fatalf("cached requests fetched snapshots: %v → %v", before, after)
	}
	if st, body := edgeGet(t, a, "/readyz"); st != 200 || !strings.Contains(body, `"connected"`) {
		t.Fatalf("readyz of a synced edge: %d %s", st, body)
	}

	keys, err := c.sdk.ListDeploymentKeys(ctx, d.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %+v %v", keys, err)
	}
	if _, err := c.sdk.RevokeDeploymentKey(ctx, d.ID, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		within(t, e, "shared", key, 401, time.Second, "revoked key")
	}
	// Issuing is a change too: the new key works on both edges at once.
	k2, err := c.sdk.IssueDeploymentKey(ctx, d.ID, "second")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		within(t, e, "shared", k2.Plaintext, 200, time.Second, "new key")
	}
	off := false
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		within(t, e, "shared", k2.Plaintext, 404, time.Second, "disabled")
	}
	on := true
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		within(t, e, "shared", k2.Plaintext, 200, time.Second, "enabled again")
	}
	if err := c.sdk.DeleteDeployment(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	for _, e := range edges {
		within(t, e, "shared", k2.Plaintext, 404, time.Second, "deleted")
	}
	// A slug created after an edge answered 404 for it serves at once.
	_, k3 := c.deploy("shared", "fixed_api_key")
	for _, e := range edges {
		within(t, e, "shared", k3, 200, time.Second, "created again")
	}
}

// An svc edge answers a disabled endpoint 404, as the embedded edge does, and counts each such call in
// the endpoint's usage as refused with 404, under the key presented where it is one of the endpoint's
// (the snapshot's 404 carries the deployment and its keys); enabling it again serves at once.
func TestEdgesCountDisabledCallsInUsage(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	e := c.edge("", nil)
	d, key := c.deploy("dormant", "fixed_api_key")
	if got := call(t, e, "dormant", key, "hello"); got.status != 200 {
		t.Fatalf("enabled: %d %s", got.status, got.body)
	}
	off := false
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	within(t, e, "dormant", "", 404, time.Second, "disabled") // no key: counted without one
	type counts struct{ keyed, refused404 int64 }
	read := func() counts {
		u, err := c.sdk.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour))
		if err != nil {
			t.Fatal(err)
		}
		var n counts
		for _, b := range u.Buckets {
			n.refused404 += b.Refused[404]
		}
		for _, k := range u.Keys {
			n.keyed += k.Errors
		}
		return n
	}
	settled := func(want func(counts) bool) counts {
		var n counts
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if n = read(); want(n) {
				return n
			}
		}
		t.Fatalf("usage never settled: %+v", n)
		return n
	}
	before := settled(func(n counts) bool { return n.refused404 >= 1 })
	// What the edge held is in once the control plane acknowledged all of it.
	poll.Until(t, 5*time.Second, "the edge's runs acknowledged", func() bool { return edgeMetric(t, e, "svc_recorder_queue_depth") == 0 })
	before = read()
	for _, k := range []string{key, key, "sk-wrong"} {
		if got := call(t, e, "dormant", k, "hi"); got.status != 404 || !strings.Contains(got.body, "not_found") {
			t.Fatalf("disabled, key %q: %d %s", k[:3], got.status, got.body)
		}
	}
	after := settled(func(n counts) bool { return n.refused404 >= before.refused404+3 })
	if after.refused404 != before.refused404+3 || after.keyed != before.keyed+2 {
		t.Fatalf("usage %+v after %+v: want three more 404s, two of them under the key", after, before)
	}
	on := true
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	within(t, e, "dormant", key, 200, time.Second, "enabled again")
}

// Rate limits travel in the snapshots (the deployment's and each key's), a change of limits reaches
// the edges like any other change, and each edge enforces its share of a limit (limit / edge count).
func TestEdgesEnforceTheirShareOfLimits(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	half := c.edge("", func(cfg *edgeproc.Config) { cfg.EdgeCount = 2 })
	whole := c.edge("", nil)
	d, key := c.deploy("limited", "fixed_api_key")
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{
		Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(4)}}); err != nil {
		t.Fatal(err)
	}
	served := func(e *edgeproc.Edge) int {
		t.Helper()
		n := 0
		for i := 0; i < 6; i++ {
			switch got := call(t, e, "limited", key, "hi"); got.status {
			case 200:
				n++
			case 429:
				if !strings.Contains(got.body, "rate_limit_exceeded") {
					t.Fatalf("429 body %s", got.body)
				}
			default:
				t.Fatalf("%d %s", got.status, got.body)
			}
		}
		return n
	}
	if n := served(half); n != 2 {
		t.Fatalf("an edge of two served %d of 6 calls under a limit of 4 a minute, want 2", n)
	}
	if n := served(whole); n != 4 {
		t.Fatalf("a lone edge served %d of 6 calls under a limit of 4 a minute, want 4", n)
	}
	// Lifting the limit reaches the edges at once.
	if _, err := c.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Limits: cloudapi.ClearLimits()}); err != nil {
		t.Fatal(err)
	}
	within(t, half, "limited", key, 200, time.Second, "limit lifted")
}

// proxy stands between an edge and the control plane, to break what the test needs broken.
type proxy struct {
	url string
	// blockFeed refuses the change feed (the control plane stays reachable for everything else).
	blockFeed atomic.Bool
	// loseAnswers: this many run batches reach the control plane, but their answers are replaced by a
	// 502, as if the connection broke on the way back.
	loseAnswers atomic.Int32
	lost        atomic.Int32
	// hold keeps run batches waiting until it is closed.
	hold atomic.Pointer[chan struct{}]
	// inLines counts the run batches sent in lines.
	inLines atomic.Int32
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{}
	open := make(chan struct{})
	close(open)
	p.hold.Store(&open)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // the change feed streams
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case edgewire.ChangesPath:
			if p.blockFeed.Load() {
				http.Error(w, "feed blocked by the test", http.StatusServiceUnavailable)
				return
			}
		case edgewire.RunsPath:
			if r.Header.Get("Content-Type") == edgewire.ContentTypeRuns {
				p.inLines.Add(1)
			}
			select {
			case <-*p.hold.Load():
			case <-r.Context().Done():
				return
			}
			if p.loseAnswers.Add(-1) >= 0 {
				rec := &discard{header: http.Header{}}
				rp.ServeHTTP(rec, r)
				if rec.status == 200 {
					p.lost.Add(1)
				}
				http.Error(w, "answer lost by the test", http.StatusBadGateway)
				return
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	p.url = "http://" + ln.Addr().String()
	return p
}

// holdRuns makes run batches wait; the returned function lets them through.
func (p *proxy) holdRuns() func() {
	held := make(chan struct{})
	p.hold.Store(&held)
	var once sync.Once
	return func() { once.Do(func() { close(held) }) }
}

type discard struct {
	header http.Header
	status int
}

func (d *discard) Header() http.Header { return d.header }
func (d *discard) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = 200
	}
	return len(b), nil
}
func (d *discard) WriteHeader(code int) { d.status = code }

func TestEdgeWithoutFeedRevalidatesWithinItsWindow(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	p := newProxy(t, c.cp.BaseURL)
	p.blockFeed.Store(true)
	const window = 1500 * time.Millisecond // 30 s in production, shortened here
	e := c.edge(p.url, func(cfg *edgeproc.Config) { cfg.Sync.Revalidate = window })
	d, key := c.deploy("nofeed", "fixed_api_key")
	if got := call(t, e, "nofeed", key, "hi"); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if st, body := edgeGet(t, e, "/readyz"); st != 503 || !strings.Contains(body, "not synced") {
		t.Fatalf("readyz without a feed: %d %s", st, body)
	}
	keys, _ := c.sdk.ListDeploymentKeys(ctx, d.ID)
	if _, err := c.sdk.RevokeDeploymentKey(ctx, d.ID, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	within(t, e, "nofeed", key, 401, window+500*time.Millisecond, "revoked key without the feed")
}

func TestEdgeServesThroughOutageUntilMaxStale(t *testing.T) {
	c := newCluster(t)
	const maxStale = 1500 * time.Millisecond
	e := c.edge("", func(cfg *edgeproc.Config) { cfg.MaxStale = maxStale })
	_, key := c.deploy("warm", "fixed_api_key")
	c.deploy("cold", "none")
	if got := call(t, e, "warm", key, "hi"); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if got := call(t, e, "never-made", "", "hi"); got.status != 404 {
		t.Fatalf("unknown slug with the control plane up: %d %s", got.status, got.body)
	}

	c.stopCP()
	stopped := time.Now()
	if got := call(t, e, "warm", key, "hi"); got.status != 200 {
		t.Fatalf("cached slug right after the control plane stopped: %d %s", got.status, got.body)
	}
	for _, slug := range []string{"cold", "unknown-slug"} {
		got := call(t, e, slug, "", "hi")
		if got.status != 503 || !strings.Contains(got.body, "service_unavailable") {
			t.Fatalf("slug %s never seen, control plane down: %d %s", slug, got.status, got.body)
		}
		if got.took > time.Second {
			t.Fatalf("slug %s: the 503 took %v", slug, got.took)
		}
	}
	time.Sleep(maxStale / 2) // on purpose: well into the outage, within --max-stale
	if got := call(t, e, "warm", key, "hi"); got.status != 200 {
		t.Fatalf("cached slug %v into the outage (max-stale %v): %d %s", time.Since(stopped), maxStale, got.status, got.body)
	}
	if st, _ := edgeGet(t, e, "/readyz"); st != 200 {
		t.Fatalf("readyz within max-stale: %d", st)
	}
	within(t, e, "warm", key, 503, maxStale+time.Second, "past max-stale")
	if served := time.Since(stopped); served < maxStale*2/3 {
		t.Fatalf("503 already %v into the outage (max-stale %v)", served, maxStale)
	}
	// Readiness follows (the last contact may be a fetch that ended a little after the last heartbeat).
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		st, body := edgeGet(t, e, "/readyz")
		if st == 503 && strings.Contains(body, "disconnected") {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("readyz past max-stale: %d %s", st, body)
		}
	}
	if st, _ := edgeGet(t, e, "/healthz"); st != 200 {
		t.Fatalf("healthz: %d", st)
	}

	// The control plane comes back on the same address: the edge serves again by itself.
	c.startCP()
	within(t, e, "warm", key, 200, 10*time.Second, "control plane back")
	within(t, e, "cold", "", 200, time.Second, "cold slug, control plane back")
}

// runContents lists the contents of the user messages of every run of the deployment.
func runContents(t *testing.T, c *cluster, deploymentID string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	cursor := ""
	for {
		page, err := c.sdk.ListRuns(ctx, deploymentID, cloudapi.ListRunsOptions{Limit: 200, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			run, err := c.sdk.GetRun(ctx, deploymentID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			s := string(run.Request)
			i := strings.Index(s, `"content":"`)
			if i < 0 {
				t.Fatalf("run %s request %s", r.ID, s)
			}
			s = s[i+len(`"content":"`):]
			out = append(out, s[:strings.IndexByte(s, '"')])
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// waitRuns waits until the deployment has n runs, then checks that they are exactly want, once each.
func waitRuns(t *testing.T, c *cluster, deploymentID string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for {
		got = runContents(t, c, deploymentID)
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // on purpose: nothing more should arrive; a duplicate, if any were coming, would
	got = runContents(t, c, deploymentID)
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	for _, w := range want {
		if count[w] != 1 {
			t.Fatalf("run %q recorded %d times (%d runs for %d requests)", w, count[w], len(got), len(want))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d runs for %d requests: %v", len(got), len(want), got)
	}
}

func TestRunsFromEdgesReachTheControlPlaneOnce(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	p := newProxy(t, c.cp.BaseURL)
	p.loseAnswers.Store(2)
	viaProxy := c.edge(p.url, nil)
	direct := c.edge("", nil)
	d, key := c.deploy("runs", "fixed_api_key")
	var want []string
	for i := 0; i < 8; i++ {
		for name, e := range map[string]*edgeproc.Edge{"a": viaProxy, "b": direct} {
			content := fmt.Sprintf("%s-%d", name, i)
			if got := call(t, e, "runs", key, content); got.status != 200 {
				t.Fatalf("%d %s", got.status, got.body)
			}
			want = append(want, content)
		}
	}
	waitRuns(t, c, d.ID, want)
	if p.lost.Load() != 2 {
		t.Fatalf("the proxy lost %d answers of applied batches, want 2: the retries were not exercised", p.lost.Load())
	}
	if p.inLines.Load() == 0 {
		t.Fatal("no batch went in lines: the edge did not take the control plane's hello")
	}

	// An edge restarts: what it held is shipped on the way down, and its successor adds only its own.
	if err := direct.Close(); err != nil {
		t.Fatal(err)
	}
	again := c.edge("", nil)
	for i := 0; i < 5; i++ {
		content := fmt.Sprintf("c-%d", i)
		if got := call(t, again, "runs", key, content); got.status != 200 {
			t.Fatalf("%d %s", got.status, got.body)
		}
		want = append(want, content)
	}
	waitRuns(t, c, d.ID, want)

	// lastUsedAt came back with the runs.
	keys, err := c.sdk.ListDeploymentKeys(ctx, d.ID)
	if err != nil || len(keys) != 1 || keys[0].LastUsedAt == nil || time.Since(*keys[0].LastUsedAt) > time.Minute {
		t.Fatalf("keys after edge traffic: %+v %v", keys, err)
	}
}

func TestFullRunBufferDropsAndCountsWithoutBlocking(t *testing.T) {
	c := newCluster(t)
	p := newProxy(t, c.cp.BaseURL)
	const buffer = 5
	e := c.edge(p.url, func(cfg *edgeproc.Config) { cfg.RunBuffer = buffer })
	release := p.holdRuns()
	t.Cleanup(release) // before the edge's own cleanup, which ships what it holds
	d, key := c.deploy("busy", "fixed_api_key")
	var kept []string
	for i := 0; i < 30; i++ {
		content := fmt.Sprintf("r-%d", i)
		got := call(t, e, "busy", key, content)
		if got.status != 200 {
			t.Fatalf("%d %s", got.status, got.body)
		}
		if got.took > 2*time.Second {
			t.Fatalf("request %d took %v while the control plane held the runs", i, got.took)
		}
		if i < buffer {
			kept = append(kept, content)
		}
	}
	if v := edgeMetric(t, e, "svc_recorder_runs_dropped_total"); v != 30-buffer {
		t.Fatalf("svc_recorder_runs_dropped_total = %v", v)
	}
	if v := edgeMetric(t, e, "svc_recorder_queue_depth"); v != buffer {
		t.Fatalf("svc_recorder_queue_depth = %v", v)
	}
	release()
	waitRuns(t, c, d.ID, kept)
}

// edgeClient sends every request to the edge at addr, whatever the URL's host (an endpoint's slug under
// the test's endpoint domain, which no resolver knows), one connection a request.
func edgeClient(addr string) *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
}
