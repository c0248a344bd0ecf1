//go:build ignore

// lora-check is a check by hand of svc's adapter routing against a real vLLM simulator (docs/LORA.md,
// "Fleets"): four llm-d-inference-sim replicas of one adapter slot each (--max-loras 1) on loopback,
// two behind a model routed by affinity and two behind one routed round-robin, three adapter endpoints
// (completed jobs) on each, and six clients drawing an adapter at random for 10 s. It prints each
// model's calls, failures and time to first token, and what svc held for a slot. Not in CI: the
// simulator takes minutes to build (docs/LORA.md, "Fleets", says which was used). Usage:
//
//	LLMD_SIM=/path/to/llm-d-inference-sim go run scripts/lora-check.go
package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

func main() {
	ctx := context.Background()
	sim := os.Getenv("LLMD_SIM")
	if sim == "" {
		fmt.Fprintln(os.Stderr, "set LLMD_SIM to the llm-d-inference-sim binary")
		os.Exit(2)
	}
	dir, _ := os.MkdirTemp("", "lora-check")
	svcBin := filepath.Join(dir, "svc")
	if out, err := exec.Command("go", "build", "-o", svcBin, "./cmd/svc").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/svc (run from the repository root): %v\n%s", err, out)
		os.Exit(1)
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
		}
	}()
	for _, port := range []int{8131, 8132, 8133, 8134} {
		c := exec.Command(sim, "--port", fmt.Sprint(port), "--model", "meta-llama/Llama-3.1-8B-Instruct",
			"--force-dummy-tokenizer", "--mode", "random", "--max-loras", "1", "--max-num-seqs", "4", "--inter-token-latency", "2ms",
			"--prefill-time-per-token", "100us", "--time-to-first-token", "5ms")
		c.Env = append(os.Environ(), "POD_IP=127.0.0.1")
		log, _ := os.Create(filepath.Join(dir, fmt.Sprintf("sim-%d.log", port)))
		c.Stdout, c.Stderr = log, log
		if err := c.Start(); err != nil {
			panic(err)
		}
		procs = append(procs, c)
	}
	models := filepath.Join(dir, "models.yaml")
	os.WriteFile(models, []byte(`models:
  - name: lora-aff
    runtime: openai
    public: true
    default: true
    upstreamModel: meta-llama/Llama-3.1-8B-Instruct
    replicas: [http://127.0.0.1:8131/v1, http://127.0.0.1:8132/v1]
    routing: affinity
    lora: vllm
    maxLoras: 1
  - name: lora-rr
    runtime: openai
    public: true
    upstreamModel: meta-llama/Llama-3.1-8B-Instruct
    replicas: [http://127.0.0.1:8133/v1, http://127.0.0.1:8134/v1]
    routing: round-robin
    lora: vllm
    maxLoras: 1
`), 0o600)
	arts := filepath.Join(dir, "artifacts")
	os.MkdirAll(arts, 0o700)
	base := "http://127.0.0.1:8195"
	svc := exec.Command(svcBin, "server", "--addr", "127.0.0.1:8195", "--data", filepath.Join(dir, "data"), "--models", models,
		"--base-url", base, "--artifacts-dir", arts)
	slog, _ := os.Create(filepath.Join(dir, "svc.log"))
	svc.Stdout, svc.Stderr = slog, slog
	if err := svc.Start(); err != nil {
		panic(err)
	}
	procs = append(procs, svc)
	time.Sleep(3 * time.Second)
	slugs := map[string][]string{}
	for _, m := range []string{"lora-aff", "lora-rr"} {
		cl, err := cloudapi.New(base, "").AnonymousProject(ctx)
		if err != nil {
			panic(err)
		}
		for a := range 3 {
			slug := fmt.Sprintf("%s-a%d", m, a)
			os.WriteFile(filepath.Join(arts, slug), []byte("adapter"), 0o600)
			path := slug
			j, err := cl.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: m, Status: "completed", FinalAdapter: &path})
			if err != nil {
				panic(err)
			}
			if _, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: j.ID},
				AuthMode: cloudapi.AuthNone, RunRetentionMode: cloudapi.RetentionNone}); err != nil {
				panic(err)
			}
			slugs[m] = append(slugs[m], slug)
		}
	}
	client := &http.Client{Timeout: 60 * time.Second}
	for _, m := range []string{"lora-rr", "lora-aff"} {
		var mu sync.Mutex
		var ttfts []time.Duration
		failed := 0
		var firstErr string
		end := time.Now().Add(10 * time.Second)
		var wg sync.WaitGroup
		for c := range 6 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(1, uint64(c)))
				for time.Now().Before(end) {
					slug := slugs[m][rng.IntN(3)]
					body := fmt.Sprintf(`{"stream":true,"max_tokens":40,"messages":[{"role":"user","content":"client %d says %s"}]}`, c, strings.Repeat("hello ", 200))
					req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
					req.Host = slug + ".localhost:8195"
					req.Header.Set("Content-Type", "application/json")
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != 200 {
						mu.Lock()
						failed++
						if firstErr == "" {
							if err != nil {
								firstErr = err.Error()
							} else {
								b := make([]byte, 300)
								n, _ := resp.Body.Read(b)
								firstErr = fmt.Sprint(resp.StatusCode, " ", string(b[:n]))
							}
						}
						mu.Unlock()
						if resp != nil {
							resp.Body.Close()
						}
						continue
					}
					br := bufio.NewReader(resp.Body)
					br.ReadByte()
					ttft := time.Since(t0)
					for {
						if _, err := br.ReadString('\n'); err != nil {
							break
						}
					}
					resp.Body.Close()
					mu.Lock()
					ttfts = append(ttfts, ttft)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(ttfts)
		n := len(ttfts)
		if n == 0 {
			fmt.Println(m, "no answers; failed", failed, firstErr)
			continue
		}
		fmt.Printf("%s: %d calls, %d failed (%s), ttft p50 %v p95 %v\n", m, n, failed, firstErr, ttfts[n/2].Round(time.Millisecond), ttfts[n*95/100].Round(time.Millisecond))
	}
	resp, err := http.Get(base + "/metrics")
	if err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l := sc.Text()
			if (strings.HasPrefix(l, "svc_fleet_held") || strings.HasPrefix(l, "svc_fleet_picks_total")) && !strings.HasSuffix(l, " 0") {
				fmt.Println(l)
			}
		}
	}
	fmt.Println("logs in", dir)
}
