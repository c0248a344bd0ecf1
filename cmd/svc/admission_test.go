package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTwoEdgesShareAModelsCapacity runs the real binaries: a control plane and two `svc edge` processes
// with --edge-count 2, serving a model of maxConcurrency 2 on an upstream that holds every call until
// the test lets it go. Each edge admits its share, one call at once: a second call on the same edge is
// 429 model_busy after the queue timeout without reaching the upstream, while the other edge's first
// call reaches it; both edges export a capacity of 1.
func TestTwoEdgesShareAModelsCapacity(t *testing.T) {
	var inFlight atomic.Int64
	entered, let := make(chan struct{}, 8), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		inFlight.Add(1)
		defer inFlight.Add(-1)
		entered <- struct{}{}
		select { // bounded: an edge admitting more than its share fails the test, it does not hang it
		case <-let:
		case <-time.After(5 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(upstream.Close)

	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	models := filepath.Join(home, "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - name: one\n    runtime: openai\n    upstreamUrl: "+upstream.URL+
		"/v1\n    public: true\n    maxConcurrency: 2\n    queueTimeoutMs: 300\n"), 0o600); err != nil {
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
	_, _, key := multiModelEndpoint(t, api, "shared")
	chat := func(edge int) (int, string) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, edges[edge])
			}}}
		req, _ := http.NewRequest("POST", "http://shared.edge.test/v1/chat/completions", strings.NewReader(`{"model":"one","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	waitEntered := func(what string) {
		t.Helper()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never reached the upstream", what)
		}
	}

	first := make(chan int, 2)
	go func() { st, _ := chat(0); first <- st }()
	waitEntered("edge 0's first call")
	if st, body := chat(0); st != http.StatusTooManyRequests || !strings.Contains(body, "model_busy") {
		t.Errorf("edge 0's second call: %d %s, want 429 model_busy (its share is 1)", st, body)
	}
	go func() { st, _ := chat(1); first <- st }()
	waitEntered("edge 1's first call (the other half of the capacity)")
	if st, body := chat(1); st != http.StatusTooManyRequests || !strings.Contains(body, "model_busy") {
		t.Errorf("edge 1's second call: %d %s, want 429 model_busy", st, body)
	}
	if n := inFlight.Load(); n != 2 {
		t.Errorf("%d calls on the upstream, want 2 (the model's capacity)", n)
	}
	for _, addr := range edges {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`svc_admission_capacity{model="one"} 1`, `svc_admission_refused_total{lane="interactive",model="one"} 1`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("edge %s: metrics lack %s", addr, want)
			}
		}
	}
	close(let)
	for range 2 {
		if st := <-first; st != http.StatusOK {
			t.Errorf("a first call ended %d", st)
		}
	}
}
