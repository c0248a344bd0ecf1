//go:build ignore

// lora-fleet-check is issue 43's many-adapters proof checked by hand on a real vLLM simulator (docs/LORA.md,
// "Many adapters: loads against latency"): four llm-d-inference-sim replicas of two adapter slots each
// (--max-loras 2) behind one model routed by affinity, 12 adapter endpoints (completed jobs), and
// closed-loop clients for 10 s, first over the 12 adapters and then, the same clients, all over one
// adapter; it prints each phase's time to first token, the ratio of the p95s and the calls each
// replica answered. The simulator counts no adapter loads (filling a slot costs it nothing; a call
// whose adapter holds no slot waits), so what it shows is the latency and the spread. Knobs:
// SVC_BIN (a built svc; this tree's when unset), CLIENTS (8), SESSION (a client keeps its adapter for that many calls on average, geometric; 1 draws
// one per call), RUNS (1). Not in CI (the simulator takes minutes to build). Usage:
//
//	LLMD_SIM=/path/to/llm-d-inference-sim CLIENTS=8 SESSION=8 go run scripts/lora-fleet-check.go
package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

func envInt(name string, def int) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return cmp.Or(n, def)
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitHealthy(url string) {
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	panic(url + " not healthy in 60 s")
}

// picks reads svc_fleet_picks_total of model by replica.
func picks(base, model string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l, ok := strings.CutPrefix(sc.Text(), "svc_fleet_picks_total{")
		if !ok || !strings.Contains(l, `model="`+model+`"`) {
			continue
		}
		_, rep, _ := strings.Cut(l, `replica="`)
		rep, _, _ = strings.Cut(rep, `"`)
		f := strings.Fields(l)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[rep] += v
	}
	return out
}

// held reads svc_fleet_held_total (calls held in svc for an adapter slot), over every replica.
func held(base string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "svc_fleet_held_total{"); ok {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

func main() {
	ctx := context.Background()
	sim := os.Getenv("LLMD_SIM")
	if sim == "" {
		fmt.Fprintln(os.Stderr, "set LLMD_SIM to the llm-d-inference-sim binary")
		os.Exit(2)
	}
	clients, session, runs := envInt("CLIENTS", 8), envInt("SESSION", 1), envInt("RUNS", 1)
	dir, _ := os.MkdirTemp("", "lora-fleet-check")
	svcBin := os.Getenv("SVC_BIN") // a binary built before (to compare two), or this tree's
	if svcBin == "" {
		svcBin = filepath.Join(dir, "svc")
		if out, err := exec.Command("go", "build", "-o", svcBin, "./cmd/svc").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build ./cmd/svc (run from the repository root): %v\n%s", err, out)
			os.Exit(1)
		}
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	var urls []string
	for range 4 {
		port := freePort()
		c := exec.Command(sim, "--port", fmt.Sprint(port), "--model", "meta-llama/Llama-3.1-8B-Instruct",
			"--force-dummy-tokenizer", "--mode", "random", "--max-loras", "2", "--max-num-seqs", "8", "--inter-token-latency", "3ms",
			"--time-to-first-token", "15ms", "--max-model-len", "8192")
		c.Env = append(os.Environ(), "POD_IP=127.0.0.1")
		log, _ := os.Create(filepath.Join(dir, fmt.Sprintf("sim-%d.log", port)))
		c.Stdout, c.Stderr = log, log
		if err := c.Start(); err != nil {
			panic(err)
		}
		procs = append(procs, c)
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/v1", port))
	}
	for _, u := range urls {
		waitHealthy(strings.TrimSuffix(u, "/v1") + "/health")
	}
	models := filepath.Join(dir, "models.yaml")
	os.WriteFile(models, []byte(`models:
  - name: lora-fleet
    runtime: openai
    public: true
    default: true
    upstreamModel: meta-llama/Llama-3.1-8B-Instruct
    replicas: [`+strings.Join(urls, ", ")+`]
    routing: affinity
    lora: vllm
    maxLoras: 2
`), 0o600)
	arts := filepath.Join(dir, "artifacts")
	os.MkdirAll(arts, 0o700)
	port := freePort()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	svc := exec.Command(svcBin, "server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(dir, "data"), "--models", models,
		"--base-url", base, "--artifacts-dir", arts)
	slog, _ := os.Create(filepath.Join(dir, "svc.log"))
	svc.Stdout, svc.Stderr = slog, slog
	if err := svc.Start(); err != nil {
		panic(err)
	}
	procs = append(procs, svc)
	waitHealthy(base + "/healthz")
	var cl *cloudapi.Client
	var slugs []string
	for a := range 13 { // 12 adapters, and the 13th for the one-adapter phase
		if a%4 == 0 { // an anonymous identity keeps at most 5 endpoints
			var err error
			if cl, err = cloudapi.New(base, "").AnonymousProject(ctx); err != nil {
				panic(err)
			}
		}
		slug := fmt.Sprintf("ad%d", a)
		os.WriteFile(filepath.Join(arts, slug), []byte("adapter"), 0o600)
		path := slug
		j, err := cl.CreateJob(ctx, cloudapi.CreateJobRequest{BaseModel: "lora-fleet", Status: "completed", FinalAdapter: &path})
		if err != nil {
			panic(err)
		}
		if _, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: j.ID},
			AuthMode: cloudapi.AuthNone, RunRetentionMode: cloudapi.RetentionNone}); err != nil {
			panic(err)
		}
		slugs = append(slugs, slug)
	}
	instr := make([]string, len(slugs)) // each adapter's 2 KB of instructions, its application's
	for a := range instr {
		rng := rand.New(rand.NewPCG(3, uint64(a)))
		var b strings.Builder
		fmt.Fprintf(&b, "Application %d. ", a)
		for b.Len() < 2<<10 {
			fmt.Fprintf(&b, "w%x ", rng.Uint32())
		}
		instr[a] = b.String()
	}
	client := &http.Client{Timeout: 60 * time.Second}
	phase := func(name string, adapters []int, seed uint64) (p95 time.Duration) {
		before, heldBefore := picks(base, "lora-fleet"), held(base)
		var mu sync.Mutex
		var ttfts []time.Duration
		failed := 0
		end := time.Now().Add(10 * time.Second)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(c)))
				a, left := 0, 0
				for time.Now().Before(end) {
					if left--; left <= 0 {
						a = adapters[rng.IntN(len(adapters))]
						left = 1 + int(rng.ExpFloat64()*float64(session-1))
					}
					body := fmt.Sprintf(`{"stream":true,"max_tokens":32,"messages":[{"role":"system","content":%q},{"role":"user","content":"client %d: %s"}]}`,
						instr[a], c, strings.Repeat(fmt.Sprintf("w%x ", rng.Uint32()), 100))
					req, _ := http.NewRequest("POST", base+"/e/"+slugs[a]+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != 200 {
						mu.Lock()
						failed++
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
		if os.Getenv("SHOW") != "" { // the fleet as svc sees it, halfway through
			time.Sleep(5 * time.Second)
			if m, err := cl.GetModel(ctx, "lora-fleet"); err == nil && m.Fleet != nil {
				for _, r := range m.Fleet.Replicas {
					fmt.Printf("    %s %s in flight %d waiting %d running %d adapters %v resident %v unready %v\n", r.Addr, r.State, r.InFlight, r.Waiting, r.Running,
						r.Adapters, r.ResidentAdapters, r.UnreadyAdapters)
				}
			}
		}
		wg.Wait()
		slices.Sort(ttfts)
		n := len(ttfts)
		if n == 0 {
			fmt.Println(name, "no answers; failed", failed)
			return 0
		}
		after := picks(base, "lora-fleet")
		heldAfter := held(base)
		var per []string
		for _, u := range urls {
			rep := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/v1")
			per = append(per, fmt.Sprint(after[rep]-before[rep]))
		}
		p95 = ttfts[n*95/100]
		fmt.Printf("  %-13s %5d calls, %d failed, ttft p50 %v p95 %v; calls per replica %s; %.0f held in svc for a slot\n", name, n, failed,
			ttfts[n/2].Round(time.Millisecond/10), p95.Round(time.Millisecond/10), strings.Join(per, "/"), heldAfter-heldBefore)
		return p95
	}
	fmt.Printf("4 replicas x --max-loras 2, 12 adapters, %d clients, sessions of %d calls on average\n", clients, session)
	for run := range runs {
		many := phase("12 adapters", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, uint64(run+1))
		one := phase("one adapter", []int{12}, uint64(run+1))
		if one > 0 {
			fmt.Printf("  run %d: p95 %.2fx one adapter's (proof <= 1.5x)\n", run+1, float64(many)/float64(one))
		}
	}
	fmt.Println("logs in", dir)
}
