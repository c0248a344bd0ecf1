package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/poll"
)

// TestNoisyNeighbourThroughTwoEdges is admission's promise across edges (docs/OPERATIONS.md,
// "Admission"): a control plane and two real `svc edge` processes (--edge-count 2, each admitting half
// of a model of 16 sequences), key A flooding with 80 calls at once spread over both edges while key B
// sends 4 at a time, also over both. B's calls find a place at once (at most a tenth of them wait, read
// from their runs' queueMs: 0-1 of 60 with the margin, 58 of 60 without), none is refused, B's p95 stays
// near B alone's (logged; asserted ≤ 1.6×, as CPU contention on a loaded machine blurs the issue's 1.2×),
// A's excess gets 429 model_busy, nobody a 5xx. Bounded: B's 60 calls alone, then under the flood
// (about 11 s).
//
// Each edge holds half the capacity; what keeps B's wait short on either edge is the margin a key at
// or above its fair share leaves each other key active of late (internal/admission, Gate.capOf): B's
// call finds a free place at once instead of waiting for the next of A's calls to end on its edge.
// Measured 0.97×, 1.00×, 1.00×, 1.01× (load average about 4 on 2 cores); before the margin 1.24×, 1.24×
// and 1.32×.
func TestNoisyNeighbourThroughTwoEdges(t *testing.T) {
	upstream := httptest.NewServer(mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", MaxNumSeqs: 16,
		PrefillTime: time.Microsecond, TTFTBase: 50 * time.Millisecond, ITL: 25 * time.Millisecond, Tokens: 16}))
	t.Cleanup(upstream.Close)
	noisyThroughTwoEdges(t, upstream.URL, "fake-model", nil)
}

// TestNoisyNeighbourThroughTwoEdgesOnTheSim is the same promise against an llm-d-inference-sim replica
// of 16 sequences (issue 42's proof names it), paced as the fake
// above (50 ms to the first token, 25 ms between tokens, ignore_eos so that an answer is max_tokens
// long). It runs only when LLMD_SIM names the simulator's binary, which is too long a build for CI.
func TestNoisyNeighbourThroughTwoEdgesOnTheSim(t *testing.T) {
	sim := os.Getenv("LLMD_SIM")
	if sim == "" {
		t.Skip("LLMD_SIM does not name llm-d-inference-sim's binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	cmd := exec.Command(sim, "--port", strconv.Itoa(port), "--model", model, "--force-dummy-tokenizer", "--mode", "random",
		"--max-num-seqs", "16", "--max-model-len", "8192", "--time-to-first-token", "50ms", "--inter-token-latency", "25ms")
	cmd.Env = append(os.Environ(), "POD_IP=127.0.0.1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	poll.Until(t, 20*time.Second, "llm-d-inference-sim answering /v1/models", func() bool {
		resp, err := http.Get(url + "/v1/models")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	noisyThroughTwoEdges(t, url, model, map[string]any{"ignore_eos": true})
}

// noisyThroughTwoEdges runs the noisy neighbour through two svc edge processes in front of the upstream
// at upstreamURL (a model of 16 sequences serving upstreamModel); extra goes into every call's body.
func noisyThroughTwoEdges(t *testing.T, upstreamURL, upstreamModel string, extra map[string]any) {
	const floodWorkers, steadyWorkers, steadyCalls = 80, 4, 15
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	models := filepath.Join(home, "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - name: one\n    runtime: openai\n    upstreamUrl: "+upstreamURL+
		"/v1\n    upstreamModel: "+upstreamModel+"\n    public: true\n    maxConcurrency: 16\n    queueTimeoutMs: 1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := svcEnv(home)
	_, api := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", data, "--models", models)
	token := strings.TrimSpace(runSvc(t, dir, env, "edge-tokens", "create", "edges", "--data", data).stdout)
	var edges []string
	for i := range 2 {
		_, addr := startEdge(t, dir, home, token, api, "--addr", "127.0.0.1:0", "--models", models, "--edge-count", "2",
			"--spool-dir", filepath.Join(home, "spool"+strconv.Itoa(i)))
		edges = append(edges, addr)
	}
	// Runs kept (a day), so that B's runs say whether they waited for a place (queueMs).
	sdk, err := cloudapi.New(api, "").AnonymousProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, err := sdk.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{Slug: "noisy2", Target: cloudapi.Target{Kind: "multi_model"},
		RunRetentionMode: cloudapi.RetentionDays, RunRetentionDays: 1})
	if err != nil {
		t.Fatal(err)
	}
	keyA, err := sdk.IssueDeploymentKey(context.Background(), d.ID, "flood")
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := sdk.IssueDeploymentKey(context.Background(), d.ID, "steady")
	if err != nil {
		t.Fatal(err)
	}

	clients := make([]*http.Client, 2)
	for i := range clients {
		addr := edges[i]
		tr := &http.Transport{MaxIdleConnsPerHost: 256, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		t.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	call := func(edge int, key string, tokens int) (int, time.Duration) {
		fields := map[string]any{"model": "one", "max_tokens": tokens, "messages": []any{map[string]any{"role": "user", "content": "hello there"}}}
		maps.Copy(fields, extra)
		body, _ := json.Marshal(fields)
		req, _ := http.NewRequest("POST", "http://noisy2.edge.test/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := clients[edge].Do(req)
		if err != nil {
			return 0, time.Since(start)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	// Wait until both edges serve the endpoint (their snapshots carry it).
	for i := range edges {
		poll.Until(t, 15*time.Second, fmt.Sprintf("edge %d serving the endpoint", i), func() bool {
			st, _ := call(i, keyB.Plaintext, 1)
			return st == http.StatusOK
		})
	}
	steady := func() []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for w := range steadyWorkers {
			wg.Go(func() {
				for i := range steadyCalls {
					status, took := call((w+i)%2, keyB.Plaintext, 4+(w*7+i*3)%13)
					if status != http.StatusOK {
						t.Errorf("B's call answered %d", status)
					}
					mu.Lock()
					lat = append(lat, took)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat
	}
	p95 := func(l []time.Duration) time.Duration { return l[len(l)*95/100] }

	alone := p95(steady())
	stop := make(chan struct{})
	var mu sync.Mutex
	codes := map[int]int{}
	var flood sync.WaitGroup
	for w := range floodWorkers {
		flood.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				status, _ := call((w+i)%2, keyA.Plaintext, 16)
				mu.Lock()
				codes[status]++
				mu.Unlock()
				if status == http.StatusTooManyRequests {
					time.Sleep(20 * time.Millisecond) // a client backing off a little, as SDKs do
				}
			}
		})
	}
	// The flood fills both edges' shares and queues: measure once A is being turned away.
	poll.Until(t, 10*time.Second, "A's flood refused model_busy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return codes[http.StatusTooManyRequests] > 0
	})
	underFrom := time.Now()
	under := p95(steady())
	close(stop)
	flood.Wait()
	ratio := float64(under) / float64(alone)
	t.Logf("B p95 alone %v, under A's flood through two edges %v (×%.2f); A: %v", alone, under, ratio, codes)
	for code, n := range codes {
		if code >= 500 || code == 0 {
			t.Errorf("A got %d answers %d", n, code)
		}
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("A's flood of %d calls was never refused model_busy: %v", floodWorkers, codes)
	}
	// What keeps B's calls quick is that they find a place at once on either edge: read from B's runs
	// (their queueMs, recorded by the edges), which CPU contention on a loaded machine does not blur.
	// Without the margin most of B's calls under the flood waited for one of A's calls to end.
	var waited, seen int
	poll.Until(t, 20*time.Second, "B's runs under the flood stored", func() bool {
		page, err := sdk.ListRuns(context.Background(), d.ID, cloudapi.ListRunsOptions{KeyID: keyB.Key.ID, Since: underFrom, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		waited, seen = 0, len(page.Runs)
		for _, r := range page.Runs {
			if r.QueueMs > 0 {
				waited++
			}
		}
		return seen >= steadyWorkers*steadyCalls
	})
	t.Logf("B's calls under the flood that waited for a place: %d of %d", waited, seen)
	if waited > seen/10 {
		t.Errorf("%d of B's %d calls under A's flood waited for a place (want at most a tenth: B keeps a margin on either edge)", waited, seen)
	}
	// The issue's figure is B's p95 within 1.2× of B alone (0.97-1.01× in runs at load 2-5 on 2 cores);
	// a full test run on the same machine read 1.30× once, the edges starved of CPU by the other
	// packages' tests, not of places. The test holds a bound that only a broken admission crosses.
	if ratio > 1.6 {
		t.Errorf("B's p95 under A's flood is %.2f× B's alone (%v vs %v), want ≤ 1.2× (≤ 1.6× under a loaded machine's noise)", ratio, under, alone)
	}
}
