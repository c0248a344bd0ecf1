package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/bench"
)

// The KV-events row (-rows kv): issue 43's exact cache state, end to end through `svc server`'s edge on
// llm-d-inference-sim replicas (LLMD_SIM; skipped without). Two models of kvReplicas simulator replicas
// each, with prefix caches smaller than the working set; one names kvEvents (its replicas publish their
// KV events to svc, which tokenizes each answered conversation call through the replica, off the
// request path, and places the next turn where the events say its prompt is held), the other routes by
// the prompts svc sent (the routed chains). The same multi-turn sessions run on both at the same time;
// the row prints, per model, the share of prompt tokens the replicas reported cached (and against the
// ideal of every earlier turn cached), TTFT p50/p95 and the turns placed by the events and by the
// routed chains (svc_fleet_kv_picks_total).
const (
	kvReplicas = 4
	kvCache    = 192 // blocks of 16 tokens a replica: less than the sessions' prompts placed on it
	kvSessions = 32
	kvTurns    = 8
	kvCalls    = 4 // in flight at once on each model
)

// kvRowsTime is about how long the KV-events row takes.
const kvRowsTime = 40 * time.Second

type kvResult struct {
	ttft                  []time.Duration
	prompt, cached, ideal int
	failed                int
	firstErr              error
}

func kvRows(ctx context.Context, svcBin, tmp string, logFile io.Writer) error {
	sim := os.Getenv("LLMD_SIM")
	if sim == "" {
		fmt.Println("\nKV-events row: skipped (LLMD_SIM names no llm-d-inference-sim binary)")
		return nil
	}
	zport, err := freePort()
	if err != nil {
		return err
	}
	zmq := fmt.Sprintf("tcp://127.0.0.1:%d", zport)
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	startSims := func(events bool) ([]string, error) {
		var urls []string
		for range kvReplicas {
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			endpoint := zmq
			if !events {
				p, err := freePort()
				if err != nil {
					return nil, err
				}
				endpoint = fmt.Sprintf("tcp://127.0.0.1:%d", p) // nobody listens: the routed model's replicas publish to no one
			}
			c, err := startWith(sim, []string{"--port", fmt.Sprint(port), "--model", model, "--force-dummy-tokenizer", "--mode", "echo",
				"--enable-kvcache", "--kv-cache-size", fmt.Sprint(kvCache), "--block-size", "16", "--prefill-time-per-token", "200us",
				"--prefill-overhead", "2ms", "--inter-token-latency", "1ms", "--max-num-seqs", "2", "--max-model-len", "16384",
				"--event-batch-size", "1", "--zmq-endpoint", endpoint}, []string{"POD_IP=127.0.0.1"}, fmt.Sprintf("http://127.0.0.1:%d", port), logFile)
			if err != nil {
				return nil, fmt.Errorf("llm-d-inference-sim: %w", err)
			}
			stops = append(stops, c.stop)
			urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d/v1", port))
		}
		return urls, nil
	}
	kvURLs, err := startSims(true)
	if err != nil {
		return err
	}
	routedURLs, err := startSims(false)
	if err != nil {
		return err
	}
	yaml := fmt.Sprintf("models:\n  - name: kv-events\n    runtime: openai\n    upstreamModel: %s\n    public: true\n    default: true\n    replicas: [%s]\n    kvEvents: {listen: %q}\n"+
		"  - name: routed\n    runtime: openai\n    upstreamModel: %s\n    public: true\n    replicas: [%s]\n",
		model, strings.Join(kvURLs, ", "), zmq, model, strings.Join(routedURLs, ", "))
	models := filepath.Join(tmp, "kv-models.yaml")
	if err := os.WriteFile(models, []byte(yaml), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	kvTmp := filepath.Join(tmp, "kv")
	if err := os.MkdirAll(kvTmp, 0o700); err != nil {
		return err
	}
	svc, err := start(svcBin, []string{"server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(kvTmp, "data"),
		"--models", models, "--base-url", base}, base, logFile)
	if err != nil {
		return err
	}
	defer svc.stop()
	cl, err := cloudapi.New(base, "").AnonymousProject(ctx)
	if err != nil {
		return err
	}
	for _, m := range []string{"kv-events", "routed"} {
		if _, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "kv-" + m, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: m},
			AuthMode: cloudapi.AuthNone, RunRetentionMode: cloudapi.RetentionNone}); err != nil {
			return fmt.Errorf("endpoint of %s: %w", m, err)
		}
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}}
	// The simulators dial svc's socket every second until it is bound (after they started): call each
	// directly until svc's index has heard from every one (a prompt of a block or more stores some).
	deadline := time.Now().Add(20 * time.Second)
	for kvStatesKnown(ctx, base) < kvReplicas {
		if time.Now().After(deadline) {
			return fmt.Errorf("svc heard no KV event from some of the %d replicas in 20 s", kvReplicas)
		}
		for _, u := range kvURLs {
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"warm up %d %s"}],"max_tokens":1}`, model, time.Now().UnixNano(), strings.Repeat("word ", 40))
			if resp, err := client.Post(u+"/chat/completions", "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}

	loadavg, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nKV-events row (issue 43): %d llm-d-inference-sim replicas a model, %d-block prefix caches, --max-num-seqs 2, 200 us a prompt token;\n", kvReplicas, kvCache)
	fmt.Printf("  %d sessions × %d turns on each model at the same time, %d calls in flight on each; `svc server`'s edge; load average %s\n",
		kvSessions, kvTurns, kvCalls, strings.TrimSpace(string(loadavg)))
	results := map[string]*kvResult{"kv-events": {}, "routed": {}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	host := fmt.Sprintf("localhost:%d", port)
	for _, m := range []string{"kv-events", "routed"} {
		sem := make(chan struct{}, kvCalls)
		res := results[m]
		for s := range kvSessions {
			wg.Go(func() {
				system := fmt.Sprintf("You are agent %d. %s", s%3, kvWords(0, 200))
				msgs := []map[string]string{msg("system", system)}
				prev := 0
				for turn := 0; turn < kvTurns && ctx.Err() == nil; turn++ {
					msgs = append(msgs, msg("user", fmt.Sprintf("session %d turn %d: %s", s, turn, kvWords(s*1000+turn*37, 60))))
					body, _ := json.Marshal(map[string]any{"messages": msgs, "stream": true, "stream_options": map[string]any{"include_usage": true}})
					sem <- struct{}{}
					answer, prompt, cached, ttft, err := kvCall(ctx, client, base, "kv-"+m+"."+host, body)
					<-sem
					mu.Lock()
					if err != nil {
						if res.failed++; res.firstErr == nil {
							res.firstErr = err
						}
						mu.Unlock()
						return
					}
					res.ttft = append(res.ttft, ttft)
					res.prompt += prompt
					res.cached += cached
					res.ideal += prev / 16 * 16
					mu.Unlock()
					prev = prompt
					msgs = append(msgs, msg("assistant", answer))
				}
			})
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Printf("    %-10s %6s %8s %9s %9s %16s %7s   %s\n", "model", "calls", "failed", "ttft p50", "ttft p95", "cached/prompt", "/ideal", "turns placed by")
	for _, m := range []string{"kv-events", "routed"} {
		res := results[m]
		slices.Sort(res.ttft)
		p := func(q float64) time.Duration {
			if len(res.ttft) == 0 {
				return 0
			}
			return res.ttft[min(len(res.ttft)-1, int(q*float64(len(res.ttft))))]
		}
		fmt.Printf("    %-10s %6d %8d %9s %9s %7d/%-8d %6.2f×   %s\n", m, len(res.ttft), res.failed, bench.Ms(p(0.5)), bench.Ms(p(0.95)),
			res.cached, res.prompt, float64(res.cached)/float64(max(res.ideal, 1)), kvPicksBySignal(ctx, base, m))
		if res.firstErr != nil {
			fmt.Printf("      first failure: %v\n", res.firstErr)
		}
	}
	return nil
}

// kvWords returns n pseudo-words from seed on: text the simulator's dummy tokenizer splits one token a word.
func kvWords(seed, n int) string {
	var b strings.Builder
	h := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for range n {
		h ^= h << 13
		h ^= h >> 7
		h ^= h << 17
		fmt.Fprintf(&b, "w%x ", uint32(h)%50000)
	}
	return b.String()
}

// kvCall streams one chat completion through the edge and returns its answer, prompt and cached
// tokens (the stream's usage) and the time to its first content.
func kvCall(ctx context.Context, client *http.Client, base, host string, body []byte) (answer string, prompt, cached int, ttft time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", 0, 0, 0, err
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", 0, 0, 0, fmt.Errorf("%d: %s", resp.StatusCode, b)
	}
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens int `json:"prompt_tokens"`
				Details      struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			return "", 0, 0, 0, err
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" && ttft == 0 {
				ttft = time.Since(t0)
			}
			out.WriteString(ch.Delta.Content)
		}
		if chunk.Usage != nil {
			prompt, cached = chunk.Usage.PromptTokens, chunk.Usage.Details.CachedTokens
		}
	}
	return out.String(), prompt, cached, ttft, sc.Err()
}

// kvMetrics calls line for each line of the server's /metrics that begins with prefix.
func kvMetrics(ctx context.Context, base, prefix string, line func(string)) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return
	}
	resp, err := opsClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			line(rest)
		}
	}
}

// kvStatesKnown counts the kv-events model's replicas whose state svc's index knows.
func kvStatesKnown(ctx context.Context, base string) int {
	n := 0
	kvMetrics(ctx, base, "svc_fleet_replica_kv_blocks{", func(l string) {
		if strings.Contains(l, `model="kv-events"`) && !strings.Contains(l, `state="unknown"`) {
			n++
		}
	})
	return n
}

// kvPicksBySignal reads svc_fleet_kv_picks_total of model, summed over its replicas, by signal.
func kvPicksBySignal(ctx context.Context, base, model string) string {
	picks := map[string]float64{}
	kvMetrics(ctx, base, "svc_fleet_kv_picks_total{", func(l string) {
		if !strings.Contains(l, `model="`+model+`"`) {
			return
		}
		labels, value, _ := strings.Cut(l, "} ")
		_, signal, _ := strings.Cut(labels, `signal="`)
		signal, _, _ = strings.Cut(signal, `"`)
		var v float64
		fmt.Sscan(value, &v)
		picks[signal] += v
	})
	if len(picks) == 0 {
		return "the routed chains (no kvEvents)"
	}
	return fmt.Sprintf("the events %.0f, the routed chains %.0f", picks["kv-events"], picks["routed"])
}
