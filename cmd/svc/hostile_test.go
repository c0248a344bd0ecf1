package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// hostileUpstream is an OpenAI-compatible upstream whose every answer is what mode says: a healthy
// stream ("ok"), a line of 3 GB ("line", written lazily and never held), 1 GiB of well-formed chunks
// ("gib"), headers and a first chunk then silence ("silence"), then a byte every 1.5 s ("trickle", slower
// than the model's idleTimeoutMs of 1 s), or 200 then a cut ("cut").
func hostileUpstream(t *testing.T, mode *atomic.Value) *httptest.Server {
	chunk := func(content string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"}}]}` + "\n\n"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		flush := w.(http.Flusher).Flush
		io.WriteString(w, chunk("first"))
		flush()
		switch mode.Load().(string) {
		case "ok":
			io.WriteString(w, chunk(" answer")+"data: [DONE]\n\n")
		case "line":
			io.WriteString(w, "data: ")
			block := []byte(strings.Repeat("B", 64<<10))
			for sent := 0; sent < 3_000_000_000; sent += len(block) {
				if _, err := w.Write(block); err != nil {
					return // the edge gave up on the line
				}
			}
		case "gib":
			c := []byte(chunk(strings.Repeat("x", 32<<10)))
			for sent := 0; sent < 1<<30; sent += len(c) {
				if _, err := w.Write(c); err != nil {
					return
				}
			}
			io.WriteString(w, "data: [DONE]\n\n")
		case "silence", "trickle":
			for range 30 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(map[bool]time.Duration{true: time.Hour, false: 1500 * time.Millisecond}[mode.Load() == "silence"]):
				}
				io.WriteString(w, ":")
				flush()
			}
		case "cut":
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// vmRSS is a process's resident memory, from /proc.
func vmRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestEdgeProcessBoundedAgainstHostileUpstreams runs `svc edge` (and its control plane) in front of an
// upstream that misbehaves in each way docs/OPERATIONS.md ("Bounds") bounds. For each, the edge's resident memory
// stays under 200 MB (sampled from /proc while the call runs), the caller gets what the upstream sent
// and then the documented error event (or, for 1 GiB of answer, every byte and [DONE], its run
// recorded "truncated"), and the process serves the next call.
func TestEdgeProcessBoundedAgainstHostileUpstreams(t *testing.T) {
	if testing.Short() {
		t.Skip("streams a GiB through a process")
	}
	var mode atomic.Value
	mode.Store("ok")
	up := hostileUpstream(t, &mode)
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	models := filepath.Join(home, "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - name: hostile\n    runtime: openai\n    public: true\n    upstreamUrl: "+up.URL+
		"/v1\n    firstByteTimeoutMs: 2000\n    idleTimeoutMs: 1000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := svcEnv(home)
	_, api := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", data, "--models", models)
	token := strings.TrimSpace(runSvc(t, dir, env, "edge-tokens", "create", "edge", "--data", data).stdout)
	edge, addr := startEdge(t, dir, home, token, api, "--addr", "127.0.0.1:0", "--models", models, "--spool-dir", filepath.Join(home, "spool"))
	pid := edge.cmd.Process.Pid

	ctx := context.Background()
	sdk, err := cloudapi.New(api, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The default retention (7 days) keeps transcripts: the edge assembles each streamed answer.
	d, err := sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "hostile", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "hostile"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	// call streams a chat call in mode and returns what the caller got: its status, its size, its last
	// 2 KiB, and the edge's peak resident memory while it ran.
	call := func(m, requestID string) (status int, size int64, tail string, peak int64) {
		t.Helper()
		mode.Store(m)
		req, _ := http.NewRequest("POST", "http://hostile.edge.test/v1/chat/completions",
			strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		req.Header.Set("X-Request-Id", requestID)
		var stop atomic.Bool
		var peakRSS atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for !stop.Load() {
				if r := vmRSS(pid); r > peakRSS.Load() {
					peakRSS.Store(r)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		defer func() { stop.Store(true); wg.Wait(); peak = peakRSS.Load() }()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		defer resp.Body.Close()
		last := make([]byte, 0, 4<<10)
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			size += int64(n)
			if last = append(last, buf[:n]...); len(last) > 2<<10 {
				last = append(last[:0], last[len(last)-2<<10:]...)
			}
			if err != nil {
				break
			}
		}
		return resp.StatusCode, size, string(last), 0
	}
	const maxRSS = 200 << 20
	for _, tc := range []struct{ mode, want string }{
		{"line", `"code":"upstream_error"`},
		{"gib", "data: [DONE]"},
		{"silence", `"code":"upstream_timeout"`},
		{"trickle", `"code":"upstream_timeout"`},
		{"cut", `"code":"upstream_error"`},
	} {
		t0 := time.Now()
		status, size, tail, peak := call(tc.mode, "hostile-"+tc.mode)
		t.Logf("%s: %d, %d bytes to the caller in %v, edge peak RSS %d MB", tc.mode, status, size, time.Since(t0).Round(time.Millisecond), peak>>20)
		if status != 200 || !strings.Contains(tail, tc.want) || !strings.Contains(tail, "data: ") {
			t.Errorf("%s: status %d, the answer ends %q; want %s", tc.mode, status, tail[max(0, len(tail)-300):], tc.want)
		}
		if tc.mode == "gib" && size < 1<<30 {
			t.Errorf("gib: the caller got %d bytes, want all of 1 GiB", size)
		}
		if peak > maxRSS {
			t.Errorf("%s: the edge's RSS peaked at %d MB, want under %d MB", tc.mode, peak>>20, maxRSS>>20)
		}
		if status, _, tail, _ := call("ok", "hostile-ok-after-"+tc.mode); status != 200 || !strings.Contains(tail, "data: [DONE]") {
			t.Fatalf("the call after %s: %d %q", tc.mode, status, tail)
		}
	}
	// The GiB's run was recorded up to the cap, marked truncated.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		page, err := sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		id := ""
		for _, r := range page.Runs {
			if r.RequestID == "hostile-gib" {
				id = r.ID
			}
		}
		if id != "" {
			run, err := sdk.GetRun(ctx, d.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(run.Response), `"truncated":true`) || len(run.Response) > 5<<20 {
				t.Fatalf("the GiB's run: %d bytes of response, truncated mark: %v", len(run.Response), strings.Contains(string(run.Response), `"truncated":true`))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run of the GiB call shipped: %d runs", len(page.Runs))
		}
	}
}
