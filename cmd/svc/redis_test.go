package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/redistest"
)

// TestRedisLimitIsOneCountAcrossEdgeProcesses runs the real binaries: a control plane and two edges
// with --redis (and --edge-count 2 for when Redis is gone). A key limited to 60 requests a minute
// admits 60 across both edges under concurrent load, however lopsided the split (plus the one a second
// that refills while the load runs); with Redis stopped, the edges keep serving, each on its own buckets
// (30 a minute), and count the fallback.
func TestRedisLimitIsOneCountAcrossEdgeProcesses(t *testing.T) {
	rds := redistest.Start(t)
	home, dir := t.TempDir(), t.TempDir()
	data := filepath.Join(home, "data")
	env := svcEnv(home, "SVC_REDIS_URL="+rds.URL)
	_, api := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", data)
	token := strings.TrimSpace(runSvc(t, dir, env, "edge-tokens", "create", "edges", "--data", data).stdout)
	var edges []string
	for i := 0; i < 2; i++ {
		_, addr := startEdge(t, dir, home, token, api, "--addr", "127.0.0.1:0", "--edge-count", "2",
			"--spool-dir", filepath.Join(home, "spool"+strconv.Itoa(i)), "--redis", rds.URL)
		edges = append(edges, addr)
	}

	ctx := context.Background()
	sdk, d, key := multiModelEndpoint(t, api, "shared")
	if _, err := sdk.UpdateDeploymentKey(ctx, d.ID, key.Key.ID, cloudapi.UpdateKeyRequest{
		Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(60)}}); err != nil {
		t.Fatal(err)
	}
	clients := make([]*http.Client, len(edges))
	for i, addr := range edges {
		clients[i] = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}}
	}
	chat := func(edge int) (int, http.Header) {
		req, _ := http.NewRequest("POST", "http://shared.edge.test/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		resp, err := clients[edge].Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	// Both edges learn the key's limit (its snapshot) before the load: a snapshot fetched before the
	// update would carry no limit. The warm-up requests count: after them a fresh bucket is used up
	// by what the load admits, so they are part of the 60.
	warm := 0
	for i := range edges {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			st, h := chat(i)
			if st == 200 {
				warm++
			}
			if h.Get("X-Ratelimit-Limit-Requests") == "60" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("edge %d never applied the key's limit: %d %v", i, st, h)
			}
		}
	}

	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	// A lopsided split: one caller sends 10 requests to the second edge, seven send the rest to the
	// first. Shares (30 each) would admit 30 + 10, whole limits per edge 60 + 10: only one count
	// admits 60.
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			edge, n := 0, 27
			if w == 0 {
				edge, n = 1, 10
			}
			for i := 0; i < n; i++ {
				switch st, _ := chat(edge); st {
				case 200:
					admitted.Add(1)
				case 429:
					refused.Add(1)
				default:
					t.Errorf("status %d under load", st)
				}
			}
		}(w)
	}
	wg.Wait()
	took := time.Since(start)
	refill := int64(took / time.Second)
	if got := admitted.Load() + int64(warm); got < 59 || got > 61+refill {
		t.Fatalf("the two edges admitted %d requests of a key limited to 60 a minute (%d warm-up, %d refused) in %v; want 60 ±1 (+%d refilled)",
			got, warm, refused.Load(), took, refill)
	}
	t.Logf("admitted %d (+%d warm-up), refused %d, in %v", admitted.Load(), warm, refused.Load(), took)

	// Redis goes away: each edge now enforces its share (30 a minute) with its own buckets, fresh.
	rds.Stop()
	for i := range edges {
		served := 0
		for j := 0; j < 40; j++ {
			st, h := chat(i)
			switch st {
			case 200:
				served++
			case 429:
				if h.Get("Retry-After") == "" {
					t.Fatal("a 429 without Retry-After")
				}
			default:
				t.Fatalf("edge %d with Redis down: %d", i, st)
			}
		}
		if served != 30 {
			t.Fatalf("edge %d served %d of 40 with Redis down; want its share, 30", i, served)
		}
		metrics := get(t, "http://"+edges[i]+"/metrics", nil)
		m := regexp.MustCompile(`svc_ratelimit_fallback_total\{limiter="edge"\} (\d+)`).FindStringSubmatch(metrics)
		if m == nil || m[1] != "40" {
			t.Fatalf("edge %d's fallback count: %v", i, m)
		}
	}
}
